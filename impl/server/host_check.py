"""DNS-rebinding protection for every route, with the rule the MCP SDK applies to ``/mcp``.

A server answers only requests whose ``Host`` names one of its names (any port) and whose
``Origin``, when sent, is one of its origins. Bound to a loopback address its names are the
loopback names and its origins their ``http`` origins; an operator adds names with
``serve --allowed-host`` (their ``http`` and ``https`` origins come with them) and replaces the
origins with ``--allowed-origin``. Bound to another address without those options, the server
takes every Host (the operator exposing it names it, e.g. behind a proxy). A web page whose
domain was made to resolve to the server sends its own domain in both headers, so it cannot reach
the server through the visitor's browser. This middleware, the outermost, checks every route
before anything else answers: HTTP 421 for the host, 403 for the origin, as the REST error
envelope (``invalid_request`` / ``forbidden``) or, on ``/mcp`` and below it, a JSON-RPC error.
The whole value must be a name with at most a numeric port: the SDK's own rule (which it still
applies to ``/mcp``) matches ``127.0.0.1:*`` as a prefix, so ``127.0.0.1:1@evil.example`` passed
it, and it leaves ``/mcp/`` to a redirect that echoed the foreign host.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Awaitable, Callable

from knowspec.impl.rest.error_responses import envelope
from knowspec.impl.server.host_names import LOOPBACK_HOSTS, host_name, origin_name
from knowspec.impl.server.json_answer import is_mcp_path, send_json, send_jsonrpc_error

ASGIApp = Callable[[dict[str, Any], Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]]


@dataclass(frozen=True)
class HostRule:
    """The Host and Origin headers a server answers: ``hosts`` (names, any port; none: every
    Host) and ``origins`` (exact; none: the ``schemes`` origins of ``hosts``, any port)."""

    hosts: tuple[str, ...]
    origins: tuple[str, ...] = ()
    schemes: tuple[str, ...] = ("http",)

    @cached_property
    def _host(self) -> re.Pattern[str]:
        return re.compile("(?:" + "|".join(map(re.escape, self.hosts)) + r")(?::\d{1,5})?", re.IGNORECASE)

    @cached_property
    def _origin(self) -> re.Pattern[str]:
        return re.compile("(?:" + "|".join(self.schemes) + ")://" + self._host.pattern, re.IGNORECASE)

    def refusal(self, host: str | None, origin: str | None) -> tuple[int, str] | None:
        """(status, message) for a request the server must not serve, None for one it may."""
        if self.hosts and (host is None or not self._host.fullmatch(host)):
            return 421, "Invalid Host header"
        if origin is None:
            return None
        allowed = origin.lower() in self.origins if self.origins else self._origin.fullmatch(origin) is not None
        return None if allowed else (403, "Invalid Origin header")


def host_rule(bind: str, allowed_hosts: tuple[str, ...] = (), allowed_origins: tuple[str, ...] = (),
              enabled: bool = True) -> HostRule | None:
    """The rule of a server bound to ``bind`` with the operator's names; None: every request."""
    if not enabled:
        return None
    loopback = tuple(host_name(h) for h in LOOPBACK_HOSTS) if bind in LOOPBACK_HOSTS else ()
    hosts = tuple(dict.fromkeys([*loopback, *map(host_name, allowed_hosts)]))
    origins = tuple(dict.fromkeys(map(origin_name, allowed_origins)))
    if not hosts and not origins:
        return None
    return HostRule(hosts, origins, ("http", "https") if allowed_hosts else ("http",))


def transport_security(rule: HostRule | None) -> Any:
    """The rule in the SDK's terms (``TransportSecuritySettings``), for its own check of ``/mcp``;
    it cannot say "every Host", so with origins alone ours is the only check."""
    from mcp.server.transport_security import TransportSecuritySettings

    if rule is None or not rule.hosts:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    origins = list(rule.origins) or [f"{scheme}://{host}{port}" for scheme in rule.schemes
                                     for host in rule.hosts for port in ("", ":*")]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                     allowed_hosts=[f"{h}{port}" for h in rule.hosts for port in ("", ":*")],
                                     allowed_origins=origins)


def _lower_case_names(scope: dict[str, Any]) -> dict[str, Any]:
    """``scope`` with its (accepted) Host and Origin in lower case: names are case-blind
    here, but the SDK's own check of ``/mcp`` is not (``Host: LOCALHOST:8765``, which ``curl
    http://LOCALHOST:8765/mcp`` sends, passed this check and got the SDK's 421)."""
    headers = scope.get("headers") or []
    if all(name.lower() not in (b"host", b"origin") or value == value.lower() for name, value in headers):
        return scope
    lowered = [(name, value.lower() if name.lower() in (b"host", b"origin") else value) for name, value in headers]
    return {**scope, "headers": lowered}


class HostCheckMiddleware:
    def __init__(self, app: ASGIApp, rule: HostRule | None):
        self.app = app
        self.rule = rule

    async def __call__(self, scope: dict[str, Any], receive, send) -> None:
        if self.rule is None or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {key.lower(): value.decode("latin-1") for key, value in scope.get("headers") or []}
        refused = self.rule.refusal(headers.get(b"host"), headers.get(b"origin"))
        if refused is None:
            await self.app(_lower_case_names(scope), receive, send)
            return
        status, message = refused
        if is_mcp_path(scope):
            await send_jsonrpc_error(send, status, message)
            return
        code = "forbidden" if status == 403 else "invalid_request"
        await send_json(send, status, json.dumps(envelope(code, message), separators=(",", ":")).encode())
