"""DNS-rebinding protection for every route, with the rule the MCP SDK applies to ``/mcp``.

A server bound to a loopback address answers only requests whose ``Host`` names a loopback
address (any port), and whose ``Origin``, when sent, is a loopback ``http`` origin. A web page
whose domain was made to resolve to 127.0.0.1 sends its own domain in both, so it cannot reach
the server through the visitor's browser. The SDK checks ``/mcp`` itself; this middleware
checks the rest (REST, ``/healthz``) with the same settings, answering the REST error envelope:
``invalid_request`` with HTTP 421 for the host, ``forbidden`` (403) for the origin.
"""

from __future__ import annotations

import json
from typing import Any, Awaitable, Callable

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request

from knowspec.impl.rest.error_responses import envelope
from knowspec.impl.server.json_answer import send_json

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")

ASGIApp = Callable[[dict[str, Any], Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]]


def loopback_security(host: str, enabled: bool = True) -> TransportSecuritySettings:
    """The settings for a server bound to ``host``: on for a loopback address (unless
    ``enabled`` is False), off for any other (an operator exposing the server names it)."""
    if not enabled or host not in LOOPBACK_HOSTS:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )


class HostCheckMiddleware:
    def __init__(self, app: ASGIApp, security: TransportSecuritySettings):
        self.app = app
        self.check = TransportSecurityMiddleware(security)
        self.enabled = security.enable_dns_rebinding_protection

    async def __call__(self, scope: dict[str, Any], receive, send) -> None:
        path = scope.get("path", "")
        if not self.enabled or scope["type"] != "http" or path == "/mcp" or path.startswith("/mcp/"):
            await self.app(scope, receive, send)  # /mcp: the SDK's own check, its own answers
            return
        refused = await self.check.validate_request(Request(scope))
        if refused is None:
            await self.app(scope, receive, send)
            return
        code = "forbidden" if refused.status_code == 403 else "invalid_request"
        body = json.dumps(envelope(code, bytes(refused.body).decode()), separators=(",", ":")).encode()
        await send_json(send, refused.status_code, body)
