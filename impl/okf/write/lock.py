"""Bundle locks: the writers' exclusive lock on the root, the publication lock on ``.okf``.

``flock`` on the pinned root directory excludes writers across processes without creating any
file (so opening a store mutates nothing); a per-root thread lock covers threads that share
one open file description. Readers take the root's *shared* side for an instant, as a gate
that waits out a running commit, and keep the shared side of ``.okf`` while they capture; the
publisher holds ``.okf`` exclusively while it renames (:mod:`readers` pairs them). Every wait
is bounded by a lease timeout and polls, so a caller can stop waiting when it is cancelled.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

DEFAULT_LEASE_TIMEOUT = 30.0
_thread_locks: dict[tuple[int, int], threading.Lock] = {}
_guard = threading.Lock()
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class LockTimeout(Exception):
    """Another writer held the bundle longer than the lease timeout."""


def _thread_lock(root_fd: int) -> threading.Lock:
    st = os.fstat(root_fd)
    with _guard:
        return _thread_locks.setdefault((st.st_dev, st.st_ino), threading.Lock())


def _fresh(dir_fd: int, name: str = ".") -> int:
    """A new open file description of a directory: flock must conflict with every other open."""
    return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)


def _acquire(fd: int, operation: int, deadline: float, check: Callable[[], None] | None = None) -> None:
    delay = 0.001
    while True:
        try:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if check is not None:
                check()
            if time.monotonic() >= deadline:
                raise LockTimeout("bundle is locked by another writer") from None
            time.sleep(delay)
            delay = min(delay * 2, 0.05)


@contextmanager
def _held(fd: int, operation: int, deadline: float, check: Callable[[], None] | None = None) -> Iterator[None]:
    """Lock ``fd`` (which this call owns and closes) until exit."""
    try:
        _acquire(fd, operation, deadline, check)
        yield
    finally:
        os.close(fd)  # closing the last descriptor of the description releases the flock


@contextmanager
def exclusive(root_fd: int, timeout: float = DEFAULT_LEASE_TIMEOUT) -> Iterator[None]:
    """The writers' lock: one commit or recovery per bundle at a time."""
    tlock = _thread_lock(root_fd)
    deadline = time.monotonic() + timeout
    if not tlock.acquire(timeout=timeout):
        raise LockTimeout("bundle is locked by another writer")
    try:
        with _held(_fresh(root_fd), fcntl.LOCK_EX, deadline):
            yield
    finally:
        tlock.release()


@contextmanager
def publishing(okf_fd: int, timeout: float = DEFAULT_LEASE_TIMEOUT) -> Iterator[None]:
    """Exclusive side of ``.okf``: waits for readers still capturing, keeps new ones out."""
    with _held(_fresh(okf_fd), fcntl.LOCK_EX, time.monotonic() + timeout):
        yield


def take_shared(fd: int, deadline: float, check: Callable[[], None] | None = None) -> None:
    """Shared flock on ``fd``, a descriptor the caller opened itself and closes to release.

    Readers take it on the root (the gate: no commit is running) and on ``.okf`` (no
    publication renames until it is closed).
    """
    _acquire(fd, fcntl.LOCK_SH, deadline, check)


def open_shared(dir_fd: int, deadline: float, check: Callable[[], None] | None = None) -> int:
    """:func:`take_shared` on a fresh descriptor of ``dir_fd``'s directory (close to release)."""
    fd = _fresh(dir_fd)
    try:
        take_shared(fd, deadline, check)
    except BaseException:
        os.close(fd)
        raise
    return fd
