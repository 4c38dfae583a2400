"""A whole JSON answer written in raw ASGI, for the middlewares that answer before the app does
(the bearer gate, the body caps, the host check, the worker's session router)."""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Iterable


async def send_json(send: Callable[[dict[str, Any]], Awaitable[None]], status: int, body: bytes,
                    headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})
