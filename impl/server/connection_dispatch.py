"""``serve --http --workers N``: the supervisor accepts every connection and chooses its worker.

An MCP session lives in the worker that opened it, and a client keeps its session on one
keep-alive connection, so whichever worker holds a session's connection does that session's
work. Left to the kernel (one ``SO_REUSEPORT`` socket per worker, a hash per connection), 8
sessions split 4/4 over 2 workers in 1 trial of 8 and one worker could serve 7 of them while
the other idled. So the supervisor accepts, peeks at the connection's first request head
(``MSG_PEEK``: nothing is consumed) and hands the connection itself to a worker
(``connection_handoff.py``); after that no byte of it passes through the supervisor.

- A request naming an MCP session (``Mcp-Session-Id: <tag>-<id>``) goes to the worker that owns
  it, so a session's later connections (its event stream, a client's second connection) land
  where the session lives instead of being relayed.
- Anything else (a new session's ``initialize``, REST, ``/healthz``) goes to the workers in turn,
  so new sessions alternate between them.
- A connection whose head has not arrived after ``PEEK_SECONDS`` goes to the next worker in turn
  (that worker's HTTP server then deals with the slow client as it would with any other).
"""

from __future__ import annotations

import re
import resource
import selectors
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from knowspec.impl.server.connection_handoff import (
    HANDOFF_SUFFIX, WorkerBusy, WorkerGone, hand_off, handoff_path, handoff_sender)
from knowspec.impl.server.json_answer import SESSION_HEADER
from knowspec.impl.server.workers import owner_tag

PEEK_BYTES = 16 * 1024  # a head longer than this is routed by the header lines it has so far
PEEK_SECONDS = 1.0
RECHECK_SECONDS = 0.005  # a head that came in parts is peeked at again after this, then twice as long each time
RETRY_SECONDS = 0.05  # no worker could take a connection (all starting, or all queues full)
WORKER_WAIT_SECONDS = 60.0  # ... for this long: the connection is closed
MAX_HELD = 4096  # connections held (head not in yet, or waiting for a worker) before accepting pauses,
# and never more than half the descriptors this process may open
ACCEPT_BACKLOG = 2048
_HEAD_END = re.compile(rb"\r?\n\r?\n")


def session_owner(head: bytes) -> str | None:
    """The worker tag of the MCP session a request head names, or ``None`` (no session header,
    or an id that no worker issued). ``head`` may be cut anywhere: only whole header lines count."""
    end = _HEAD_END.search(head)
    lines = (head if end is None else head[:end.start()]).split(b"\n")
    if end is None:
        lines = lines[:-1]  # the last line may be cut short
    for line in lines[1:]:  # the request line first
        name, sep, value = line.partition(b":")
        if sep and name.strip().lower() == SESSION_HEADER:
            return owner_tag(value.strip().decode("latin-1"))
    return None


def head_is_whole(head: bytes) -> bool:
    return _HEAD_END.search(head) is not None or len(head) >= PEEK_BYTES


@dataclass(eq=False)
class _Held:
    """An accepted connection not yet handed to a worker."""

    conn: socket.socket
    deadline: float  # routed with what it has by then
    head: bytes = b""
    wake_at: float = 0.0  # when resting: peek again, or try the workers again
    ready: bool = False  # head read (or given up on): only a worker is missing
    peeks: int = 0  # how often a head in parts was peeked at


class Dispatcher:
    """The supervisor's accept loop (one thread): accepts on ``listener``, routes each connection
    to a worker receiving in ``run_dir`` (``<tag>.in``) and closes its own copy."""

    def __init__(self, listener: socket.socket, run_dir: Path) -> None:
        self.listener = listener
        self.run_dir = run_dir
        self.turn = 0
        self.max_held = min(MAX_HELD, max(16, resource.getrlimit(resource.RLIMIT_NOFILE)[0] // 2))
        self._sender = handoff_sender()
        self._stop = threading.Event()
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.listener.listen(ACCEPT_BACKLOG)
        self.listener.setblocking(False)
        self._thread = threading.Thread(target=self._run, name="knowspec-dispatch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Accept nothing more (connections not yet handed are closed); idempotent."""
        if self._stop.is_set():
            return
        self._stop.set()
        try:
            self._wake_writer.send(b"x")
        except OSError:
            pass
        if self._thread is not None:
            self._thread.join()
        for sock in (self._wake_reader, self._wake_writer, self._sender):
            sock.close()

    def _workers(self) -> list[Path]:
        return sorted(self.run_dir.glob(f"*{HANDOFF_SUFFIX}"))

    def route(self, held: _Held) -> bool:
        """Hand ``held`` to its session's owner, else to the next worker in turn; ``False`` when no
        worker could take it now. A worker nobody receives for any more is forgotten."""
        workers = self._workers()
        owner = session_owner(held.head)
        if owner is not None:
            named = handoff_path(self.run_dir, owner)
            if named in workers and self._try(named, held.conn):
                return True
        for attempt in range(len(workers)):
            target = workers[(self.turn + attempt) % len(workers)]
            if self._try(target, held.conn):
                self.turn += attempt + 1
                return True
        return False

    def _try(self, path: Path, conn: socket.socket) -> bool:
        try:
            hand_off(self._sender, path, conn)
        except WorkerGone:
            path.unlink(missing_ok=True)  # a worker that died leaves its socket file behind
            return False
        except WorkerBusy:
            return False
        return True

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self._wake_reader, selectors.EVENT_READ, None)
        listening = False
        accept_after = 0.0  # accepting pauses a moment after an accept failed (e.g. no descriptor left)
        watching: set[_Held] = set()  # registered: waiting for (more of) its head
        resting: set[_Held] = set()  # until its wake_at: to peek again, or to try the workers again

        def watch(entry: _Held) -> None:
            selector.register(entry.conn, selectors.EVENT_READ, entry)
            watching.add(entry)

        def rest(entry: _Held) -> None:
            selector.unregister(entry.conn)
            watching.discard(entry)
            resting.add(entry)

        try:
            while not self._stop.is_set():
                now = time.monotonic()
                room = len(watching) + len(resting) < self.max_held
                if listening != (room and now >= accept_after):
                    if listening:
                        selector.unregister(self.listener)
                    else:
                        selector.register(self.listener, selectors.EVENT_READ, None)
                    listening = not listening
                wakes = [h.deadline for h in watching] + [h.wake_at for h in resting]
                if room and not listening:
                    wakes.append(accept_after)
                timeout = max(0.0, min(wakes) - now) if wakes else None
                for key, _ in selector.select(timeout):
                    if key.fileobj is self.listener:
                        accepted, failed = self._accept_some()
                        if failed:
                            accept_after = time.monotonic() + RETRY_SECONDS
                        for conn in accepted:
                            watch(_Held(conn, deadline=time.monotonic() + PEEK_SECONDS))
                    elif key.data is not None:
                        rest(key.data)
                        self._peek(key.data)
                        if key.data.conn.fileno() < 0:  # the client closed: nothing to hand
                            resting.discard(key.data)
                now = time.monotonic()
                for entry in [e for e in watching if e.deadline <= now]:  # silent too long
                    entry.ready, entry.wake_at = True, now
                    rest(entry)
                for entry in [e for e in resting if e.wake_at <= now]:
                    resting.discard(entry)
                    if not (entry.ready or entry.deadline <= now):  # a head in parts: watch for the rest
                        watch(entry)
                        continue
                    entry.ready = True  # routed with what it has
                    if self.route(entry) or now > entry.deadline + WORKER_WAIT_SECONDS:
                        entry.conn.close()  # handed (or no worker came up in time: refused)
                    else:
                        entry.wake_at = now + RETRY_SECONDS
                        resting.add(entry)
        finally:
            selector.close()
            for entry in watching | resting:
                entry.conn.close()

    def _accept_some(self) -> tuple[list[socket.socket], bool]:
        """Up to 64 waiting connections, and whether accepting failed (so the caller pauses it:
        the listener stays readable, and retrying at once would spin)."""
        accepted: list[socket.socket] = []
        for _ in range(64):
            try:
                conn, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return accepted, False
            except ConnectionAbortedError:  # reset while it waited: take the next
                continue
            except OSError:  # e.g. out of descriptors for now
                return accepted, True
            conn.setblocking(False)
            accepted.append(conn)
        return accepted, False

    @staticmethod
    def _peek(entry: _Held) -> None:
        """Read (without consuming) what the client has sent; decide whether the head is in."""
        now = time.monotonic()
        try:
            head = entry.conn.recv(PEEK_BYTES, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            entry.wake_at = now + RECHECK_SECONDS
            return
        except OSError:
            head = b""
        if not head:  # the client closed (or reset) before sending a request: nothing to serve
            entry.conn.close()
            return
        entry.head = head
        if head_is_whole(head):
            entry.ready, entry.wake_at = True, now
        else:  # peeked again later and later: a client trickling its head costs a few peeks, not hundreds
            entry.wake_at = min(entry.deadline, now + RECHECK_SECONDS * 2 ** entry.peeks)
            entry.peeks += 1
