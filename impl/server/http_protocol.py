"""uvicorn's h11 protocol with deadlines on the client's side of each exchange.

uvicorn times a connection out only while it idles after a response (keep-alive). Two kinds of
client could hold a connection, and what it carries, for as long as they liked:

- one that connects and sends nothing, or sends a request head a byte at a time (forty such
  anonymous connections were held by an HTTP probe for minutes): here each request head must
  arrive whole within ``HEAD_SECONDS`` of the connection, or of the first byte after the
  previous response;
- one that asks for a big answer and never reads it: the answer waited in the process (800
  unread 4.8 MB answers held 5 GB). Here, once the unsent bytes pass the transport's high-water
  mark, the client must read at least ``MIN_READ_BYTES`` of them in every ``READ_WINDOW_SECONDS``
  until they fall below its low-water mark, else the connection is aborted and the answer freed.
  The pace asked (about 4 KiB/s) is far below any link a real client answers over. The unsent
  bytes counted are the transport's and, on Linux, the kernel's send queue too: the kernel takes
  more from the transport only once a third of its queue (a megabyte or so) has gone, so the
  transport's count alone moves in bursts, and a client reading 16 KB/s had been cut off.

Bodies have their own caps and deadlines (:mod:`body_limits`); how many connections a process
keeps open at all is :mod:`connection_limits`' (a protocol made by :func:`capped`).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import sys

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from knowspec.impl.server.connection_limits import ConnectionLimits

HEAD_SECONDS = 10.0
READ_WINDOW_SECONDS = 15.0
MIN_READ_BYTES = 64 * 1024

log = logging.getLogger("knowspec.http")


def kernel_unsent(sock: object) -> int:
    """Bytes the kernel still holds for ``sock`` (sent but unacknowledged, or not yet sent):
    Linux's ``SIOCOUTQ``; 0 where it cannot be read."""
    if not sys.platform.startswith("linux") or sock is None:
        return 0
    import fcntl
    import termios

    try:
        return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]  # type: ignore[attr-defined]
    except (OSError, ValueError):
        return 0


class DeadlineProtocol(H11Protocol):
    head_seconds = HEAD_SECONDS
    read_window_seconds = READ_WINDOW_SECONDS
    min_read_bytes = MIN_READ_BYTES
    _head_timer: asyncio.TimerHandle | None = None
    _read_timer: asyncio.TimerHandle | None = None
    _unsent_before = 0
    limits: ConnectionLimits | None = None  # the process's connection caps (set by ``capped``)
    _counted = False  # admitted by ``limits``, under ``_address``
    _address: str | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if self.limits is not None:
            address = self.client[0] if self.client else None
            if not self.limits.admit(address):
                transport.abort()  # before a byte is read: its descriptor is free again at once
                return
            self._counted, self._address = True, address
        self._arm_head_timer()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:  # still waiting for a whole head
            if self._head_timer is None:
                self._arm_head_timer()
        else:
            self._cancel_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._counted and self.limits is not None:
            self.limits.release(self._address)
            self._counted = False
        self._cancel_head_timer()
        self._cancel_read_timer()
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        """The unsent bytes passed the high-water mark: the client must now read at its pace."""
        super().pause_writing()
        if self._read_timer is None:
            self._unsent_before = self._unsent()
            self._read_timer = self.loop.call_later(self.read_window_seconds, self._read_window_over)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._cancel_read_timer()

    def _unsent(self) -> int:
        return self.transport.get_write_buffer_size() + kernel_unsent(self.transport.get_extra_info("socket"))

    def _arm_head_timer(self) -> None:
        self._head_timer = self.loop.call_later(self.head_seconds, self._head_late)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _cancel_read_timer(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()

    def _read_window_over(self) -> None:
        self._read_timer = None
        if self.transport.is_closing():
            return
        unsent = self._unsent()
        if self._unsent_before - unsent < self.min_read_bytes and unsent <= self._unsent_before:
            log.info("closing a connection whose client read %d of %d unsent bytes in %.0f s",
                     max(self._unsent_before - unsent, 0), self._unsent_before, self.read_window_seconds)
            sock = self.transport.get_extra_info("socket")
            if sock is not None:  # a reset, not a close: the kernel drops what it still held for the client
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.transport.abort()  # connection_lost follows: the app's sends end, its answer is freed
            return
        self._unsent_before = unsent
        self._read_timer = self.loop.call_later(self.read_window_seconds, self._read_window_over)


def capped(limits: ConnectionLimits) -> type[DeadlineProtocol]:
    """``DeadlineProtocol`` holding one server process's connections within ``limits``."""
    return type("CappedDeadlineProtocol", (DeadlineProtocol,), {"limits": limits})
