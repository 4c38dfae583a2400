"""Exclusive writer lock on the pinned root directory itself.

``flock`` on the root directory fd excludes writers across processes without creating any
file (so opening a store mutates nothing); a per-root thread lock covers threads that share
one open file description. Waiting is bounded by a lease timeout.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from contextlib import contextmanager
from typing import Iterator

DEFAULT_LEASE_TIMEOUT = 30.0
_thread_locks: dict[tuple[int, int], threading.Lock] = {}
_guard = threading.Lock()


class LockTimeout(Exception):
    """Another writer held the bundle longer than the lease timeout."""


def _thread_lock(root_fd: int) -> threading.Lock:
    st = os.fstat(root_fd)
    with _guard:
        return _thread_locks.setdefault((st.st_dev, st.st_ino), threading.Lock())


@contextmanager
def exclusive(root_fd: int, timeout: float = DEFAULT_LEASE_TIMEOUT) -> Iterator[None]:
    tlock = _thread_lock(root_fd)
    deadline = time.monotonic() + timeout
    if not tlock.acquire(timeout=timeout):
        raise LockTimeout("bundle is locked by another writer")
    try:
        # A fresh open file description: flock must conflict with every other open.
        fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=root_fd)
    except BaseException:
        tlock.release()
        raise
    try:
        delay = 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockTimeout("bundle is locked by another writer") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
        tlock.release()
