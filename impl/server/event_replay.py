"""No events to replay: a ``GET /mcp`` carrying ``Last-Event-ID`` is served as a fresh stream.

The server keeps no event store and never sends event ids, so no client holds one to resume
from; the SDK, asked to replay without a store, returned without any response (an HTTP 500 and
"ASGI callable returned without starting response" on stderr). Without the header the GET opens
the session's stream as any other (MCP 2025-11-25 transports, resumability: resuming is the
server's option).
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from knowspec.impl.server.json_answer import is_mcp_path

LAST_EVENT_ID = b"last-event-id"


class NoEventReplay:
    """ASGI middleware: drops ``Last-Event-ID`` from a GET to ``/mcp``."""

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope.get("type") == "http" and scope.get("method") == "GET" and is_mcp_path(scope):
            headers = scope.get("headers") or []
            if any(name.lower() == LAST_EVENT_ID for name, _ in headers):
                scope = {**scope, "headers": [(n, v) for n, v in headers if n.lower() != LAST_EVENT_ID]}
        await self.app(scope, receive, send)
