"""uvicorn's h11 protocol with a deadline on every request head.

uvicorn times a connection out only while it idles after a response (keep-alive). A client that
connects and sends nothing, or sends a request head a byte at a time, held its socket and file
descriptor for as long as it liked: forty such anonymous connections were held by an HTTP probe
for minutes. Here each request head must arrive whole within ``HEAD_SECONDS`` of the
connection, or of the first byte after the previous response; else the connection is closed.
Bodies have their own caps and deadlines (:mod:`body_limits`).
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEAD_SECONDS = 10.0


class HeadDeadlineProtocol(H11Protocol):
    head_seconds = HEAD_SECONDS
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:  # still waiting for a whole head
            if self._head_timer is None:
                self._arm_head_timer()
        else:
            self._cancel_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def _arm_head_timer(self) -> None:
        self._head_timer = self.loop.call_later(self.head_seconds, self._head_late)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()
