"""Let go of each inbound MCP message once the SDK has dispatched it.

The SDK's session loop (``JSONRPCDispatcher.run``: ``async for item in read_stream``) keeps the
last message it received in its loop variable until the next one arrives. The request handler
holds its own references while it runs, so nothing needs the message afterwards, yet an idle
session kept its last request for as long as the session lived (30 minutes idle): a
``tools/call`` of 65 MiB held its parsed arguments and the HTTP request with its raw body,
about 130 MiB a session. A caller who signed in with no role could ratchet the server's
resident size up by that much per session (a hostile probe reached 1.3 GB after six rounds of
20 calls; spec/security.md).

:class:`ReleasingReadStream` stands between the transport and that loop: when the loop asks for
the next message, the one it gave before (already dispatched: its handler has what it needs) is
emptied, so the loop variable holds an empty shell. :func:`install` wraps the read stream of
every streamable-HTTP session the SDK's session manager starts (a stdio session is the local
user's own, and its transport's end of input must reach the SDK as it is).
"""

from __future__ import annotations

from typing import Any, Callable

from mcp.shared.message import SessionMessage

PATCHED = "_knowspec_releases_messages"


class ReleasingReadStream:
    """A read stream that empties the message it yielded last before it waits for the next."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._last: SessionMessage | None = None

    @property
    def last_context(self) -> Any:
        """The sender's context of the last message (the SDK's ``ContextReceiveStream``)."""
        return getattr(self._inner, "last_context", None)

    def _release(self) -> None:
        last, self._last = self._last, None
        if last is not None:
            last.message = None  # type: ignore[assignment]
            last.metadata = None
        if hasattr(self._inner, "last_context"):
            self._inner.last_context = None

    async def receive(self) -> Any:
        self._release()
        item = await self._inner.receive()
        if isinstance(item, SessionMessage):
            self._last = item
        return item

    def __aiter__(self) -> "ReleasingReadStream":
        return self

    async def __anext__(self) -> Any:
        from anyio import EndOfStream

        try:
            return await self.receive()
        except EndOfStream:
            self._release()
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        self._release()
        await self._inner.aclose()

    def close(self) -> None:
        self._release()
        closing: Callable[[], None] | None = getattr(self._inner, "close", None)
        if closing is not None:
            closing()

    async def __aenter__(self) -> "ReleasingReadStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def install() -> None:
    """Wrap the read stream of every session the SDK's streamable-HTTP manager serves (once)."""
    from mcp.server import streamable_http_manager as manager

    serve_loop = manager.serve_loop
    if getattr(serve_loop, PATCHED, False):
        return

    async def releasing_serve_loop(server: Any, read_stream: Any, write_stream: Any, **kwargs: Any) -> Any:
        return await serve_loop(server, ReleasingReadStream(read_stream), write_stream, **kwargs)

    setattr(releasing_serve_loop, PATCHED, True)
    manager.serve_loop = releasing_serve_loop
