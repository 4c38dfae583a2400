"""DNS-rebinding protection for every route, with the rule the MCP SDK applies to ``/mcp``.

A server bound to a loopback address answers only requests whose ``Host`` names a loopback
address (any port), and whose ``Origin``, when sent, is a loopback ``http`` origin. A web page
whose domain was made to resolve to 127.0.0.1 sends its own domain in both, so it cannot reach
the server through the visitor's browser. This middleware, the outermost, checks every route
before anything else answers: HTTP 421 for the host, 403 for the origin, as the REST error
envelope (``invalid_request`` / ``forbidden``) or, on ``/mcp`` and below it, a JSON-RPC error.
The whole value must be a loopback name with at most a numeric port: the SDK's own rule (which
it still applies to ``/mcp``) matches ``127.0.0.1:*`` as a prefix, so ``127.0.0.1:1@evil.example``
passed it, and it leaves ``/mcp/`` to a redirect that echoed the foreign host.
"""

from __future__ import annotations

import json
import re
from typing import Any, Awaitable, Callable

from mcp.server.transport_security import TransportSecuritySettings

from knowspec.impl.rest.error_responses import envelope
from knowspec.impl.server.json_answer import is_mcp_path, send_json, send_jsonrpc_error

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
# Each as it stands in a Host header or an origin (an IPv6 address in brackets).
_LOOPBACK_NAMES = tuple(f"[{host}]" if ":" in host else host for host in LOOPBACK_HOSTS)

ASGIApp = Callable[[dict[str, Any], Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]]


def loopback_security(host: str, enabled: bool = True) -> TransportSecuritySettings:
    """The settings for a server bound to ``host``: on for a loopback address (unless
    ``enabled`` is False), off for any other (an operator exposing the server names it)."""
    if not enabled or host not in LOOPBACK_HOSTS:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return TransportSecuritySettings(  # with a port or without, as ``refusal`` allows on every route
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*_LOOPBACK_NAMES, *(f"{name}:*" for name in _LOOPBACK_NAMES)],
        allowed_origins=[*(f"http://{name}" for name in _LOOPBACK_NAMES),
                         *(f"http://{name}:*" for name in _LOOPBACK_NAMES)],
    )


_NAME_AND_PORT = "(?:" + "|".join(map(re.escape, _LOOPBACK_NAMES)) + r")(?::\d{1,5})?"
LOOPBACK_HOST = re.compile(_NAME_AND_PORT, re.IGNORECASE)
LOOPBACK_ORIGIN = re.compile("http://" + _NAME_AND_PORT, re.IGNORECASE)


def refusal(host: str | None, origin: str | None) -> tuple[int, str] | None:
    """(status, message) for a request a loopback server must not serve, None for one it may."""
    if host is None or not LOOPBACK_HOST.fullmatch(host):
        return 421, "Invalid Host header"
    if origin is not None and not LOOPBACK_ORIGIN.fullmatch(origin):
        return 403, "Invalid Origin header"
    return None


def _lower_case_names(scope: dict[str, Any]) -> dict[str, Any]:
    """``scope`` with its (accepted, loopback) Host and Origin in lower case: names are case-blind
    here, but the SDK's own check of ``/mcp`` is not (``Host: LOCALHOST:8765``, which ``curl
    http://LOCALHOST:8765/mcp`` sends, passed this check and got the SDK's 421)."""
    headers = scope.get("headers") or []
    if all(name.lower() not in (b"host", b"origin") or value == value.lower() for name, value in headers):
        return scope
    lowered = [(name, value.lower() if name.lower() in (b"host", b"origin") else value) for name, value in headers]
    return {**scope, "headers": lowered}


class HostCheckMiddleware:
    def __init__(self, app: ASGIApp, security: TransportSecuritySettings):
        self.app = app
        self.enabled = security.enable_dns_rebinding_protection

    async def __call__(self, scope: dict[str, Any], receive, send) -> None:
        if not self.enabled or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {key.lower(): value.decode("latin-1") for key, value in scope.get("headers") or []}
        refused = refusal(headers.get(b"host"), headers.get(b"origin"))
        if refused is None:
            await self.app(_lower_case_names(scope), receive, send)
            return
        status, message = refused
        if is_mcp_path(scope):
            await send_jsonrpc_error(send, status, message)
            return
        code = "forbidden" if status == 403 else "invalid_request"
        await send_json(send, status, json.dumps(envelope(code, message), separators=(",", ":")).encode())
