"""Hand an accepted TCP connection from one process to another: its descriptor over a Unix socket.

``serve --http --workers N``: the supervisor accepts every connection and gives it to a worker
(``connection_dispatch.py``); the worker serves it as if it had accepted it itself. Each worker
receives on a datagram socket in the run folder (mode 0700: only the server's user can hand a
worker anything); one datagram carries one descriptor (``SCM_RIGHTS``), so nothing is read from
or written to the connection on the way and the worker's HTTP parser sees the request whole.
"""

from __future__ import annotations

import array
import asyncio
import logging
import os
import socket
from pathlib import Path
from typing import Callable

HANDOFF_SUFFIX = ".in"  # short: a Unix socket path has 107 bytes, and the run folder is under TMPDIR
_MESSAGE = b"c"
logger = logging.getLogger("knowspec.workers")


class WorkerGone(Exception):
    """Nobody receives on that path any more (the worker stopped or died): try another worker."""


class WorkerBusy(Exception):
    """The worker's queue of handed connections is full: try another worker, or this one later."""


def handoff_path(run_dir: Path, tag: str) -> Path:
    return run_dir / f"{tag}{HANDOFF_SUFFIX}"


def handoff_sender() -> socket.socket:
    """The supervisor's unbound datagram socket; never blocks (a full worker is ``WorkerBusy``)."""
    sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sender.setblocking(False)
    return sender


def hand_off(sender: socket.socket, path: Path, conn: socket.socket) -> None:
    """Send ``conn``'s descriptor to the worker receiving on ``path``; the caller then closes its copy."""
    try:
        # socket.send_fds drops its address argument before Python 3.12: sendmsg takes it
        sender.sendmsg([_MESSAGE], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [conn.fileno()]))],
                       0, str(path))
    except (ConnectionRefusedError, FileNotFoundError) as exc:
        raise WorkerGone(str(path)) from exc
    except BlockingIOError as exc:
        raise WorkerBusy(str(path)) from exc


class HandoffReceiver:
    """A worker's end: every descriptor that arrives becomes a connection of ``protocol_factory``
    (uvicorn's HTTP protocol of the worker's server) on the running event loop."""

    def __init__(self, path: Path, protocol_factory: Callable[[], asyncio.Protocol]) -> None:
        self.path = path
        self.protocol_factory = protocol_factory
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: set[asyncio.Task] = set()

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.setblocking(False)
        sock.bind(str(self.path))
        os.chmod(self.path, 0o600)
        self._sock = sock
        self._loop.add_reader(sock.fileno(), self._receive)

    def stop(self) -> None:
        """Receive nothing more; connections already taken are the server's to close."""
        if self._sock is None:
            return
        assert self._loop is not None
        self._loop.remove_reader(self._sock.fileno())
        self._sock.close()
        self._sock = None
        self.path.unlink(missing_ok=True)  # descriptors still queued are closed with the socket

    def _receive(self) -> None:
        assert self._sock is not None and self._loop is not None
        while True:
            try:
                _, fds, _, _ = socket.recv_fds(self._sock, 16, 4)
            except BlockingIOError:
                return
            except OSError:
                logger.exception("receiving a handed connection failed")
                return
            for fd in fds:
                # family, type and protocol read from the descriptor: TCP, so asyncio turns Nagle off
                conn = socket.socket(fileno=fd)
                conn.setblocking(False)
                task = self._loop.create_task(self._serve(conn))
                self._pending.add(task)
                task.add_done_callback(self._pending.discard)

    async def _serve(self, conn: socket.socket) -> None:
        assert self._loop is not None
        try:
            await self._loop.connect_accepted_socket(self.protocol_factory, conn)
        except Exception:  # a connection the peer already reset: nothing to serve
            logger.debug("a handed connection could not be served", exc_info=True)
            conn.close()
