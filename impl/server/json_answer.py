"""A whole JSON answer written in raw ASGI, for the middlewares that answer before the app does
(the bearer gate, the body caps, the host check, the worker's session router, the session quota),
and what they read of an MCP request's head."""

from __future__ import annotations

import json
from typing import Any, Awaitable, Callable, Iterable

SESSION_HEADER = b"mcp-session-id"
INVALID_REQUEST = -32600
BATCH_REFUSED = "batch requests are not supported"  # stdio and HTTP alike: one message per line or body


async def send_json(send: Callable[[dict[str, Any]], Awaitable[None]], status: int, body: bytes,
                    headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


async def send_jsonrpc_error(send: Callable[[dict[str, Any]], Awaitable[None]], status: int, message: str,
                             headers: Iterable[tuple[bytes, bytes]] = (), *, code: int = INVALID_REQUEST,
                             request_id: str | int | None = None) -> None:
    """An MCP request refused before the SDK saw it: HTTP ``status``, a JSON-RPC error (id null
    unless the caller read one)."""
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}},
                      separators=(",", ":")).encode("utf-8")
    await send_json(send, status, body, headers)


def is_mcp_path(scope: dict) -> bool:
    """Whether the request is for ``/mcp`` or below it (the MCP endpoint answers JSON-RPC errors)."""
    path = scope.get("path", "")
    return path == "/mcp" or path.startswith("/mcp/")


def session_id_of(scope: dict) -> str | None:
    """The request's ``Mcp-Session-Id``, if it names one."""
    for key, value in scope.get("headers") or []:
        if key.lower() == SESSION_HEADER:
            return value.decode("latin-1")
    return None
