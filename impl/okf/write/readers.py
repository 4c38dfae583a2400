"""Reads that never see a half-published commit, and never serve an interrupted one.

A read first rolls an interrupted commit forward (journal) or back (staging) under the writers'
lock. It then passes the root's reader gate, which waits out a running commit, and holds the
shared side of ``.okf`` while it captures. The publisher renames only while it holds ``.okf``
exclusively (:func:`journal.publish`), so the capture sees the whole rename sequence or none
of it. The gate is held only for an instant, so a stream of readers cannot starve a writer.

A bundle with no ``.okf`` (or one that is not ours) has never been published by the store; its
reader keeps the gate for the whole capture instead, since a first commit creates ``.okf`` only
under the writers' lock. Nothing here writes unless a commit was interrupted.
"""

from __future__ import annotations

import errno
import os
import time
from typing import Callable

from knowspec.impl.errors import ToolError
from knowspec.impl.okf.write import journal, lock
from knowspec.impl.okf.write.receipts import StorageCorrupt
from knowspec.impl.okf.write.rootfs import CaptureError

MAX_RECOVERIES = 3
_NO_FLOCK = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL}


class consistent_read:  # noqa: N801 - used like a function: ``with consistent_read(fd):``
    """Hold while capturing the bundle at ``root_fd``; ``check`` runs while waiting (cancel).

    A plain class rather than a generator: it runs on every read, cached ones included.
    """

    def __init__(self, root_fd: int, check: Callable[[], None] | None = None,
                 timeout: float = lock.DEFAULT_LEASE_TIMEOUT) -> None:
        self.root_fd, self.check, self.timeout = root_fd, check, timeout
        self.held: int | None = None  # the descriptor whose shared flock we hold

    def __enter__(self) -> "consistent_read":
        try:
            self._enter()
        except lock.LockTimeout:
            raise ToolError("operation_rejected", "bundle is locked by another writer", retryable=True) from None
        except OSError as exc:
            if exc.errno not in _NO_FLOCK:
                raise ToolError("invalid_request", f"load bundle: {exc.strerror}") from None
            # No flock on this filesystem: the store cannot commit here either, so nothing publishes.
        return self

    def __exit__(self, *exc: object) -> None:
        if self.held is not None:
            os.close(self.held)
            self.held = None

    def _enter(self) -> None:
        deadline = time.monotonic() + self.timeout
        gate: int | None
        for attempt in range(MAX_RECOVERIES + 1):
            gate, okf_fd = lock.open_shared(self.root_fd, deadline, self.check), None
            try:
                # Under the gate no commit runs: anything left over is a dead writer's.
                okf_fd = _private_dir(self.root_fd)
                found = _leftover(okf_fd)
                if found is None or (found == "staging" and attempt > 0):
                    if okf_fd is None:
                        self.held, gate = gate, None  # keep the gate for the whole capture
                    else:
                        lock.take_shared(okf_fd, deadline, self.check)  # a fresh open of .okf
                        self.held, okf_fd = okf_fd, None
                    return
            finally:
                if gate is not None:
                    os.close(gate)
                if okf_fd is not None:
                    os.close(okf_fd)
            _recover(self.root_fd, found, self.timeout)
        raise ToolError("operation_rejected", "bundle has an interrupted commit that did not finish")


def _private_dir(root_fd: int) -> int | None:
    """``.okf`` when it is ours (a real directory), else None."""
    try:
        return journal.open_private(root_fd, create=False)
    except StorageCorrupt:
        return None


def _leftover(okf_fd: int | None) -> str | None:
    return None if okf_fd is None else journal.leftover_in(okf_fd)


def unfinishable(exc: OSError) -> ToolError:
    """An interrupted commit that the file system will not let finish (a folder where a file is
    published, a read-only folder): said plainly; the next call tries again."""
    return ToolError("operation_rejected",
                     f"bundle has an interrupted commit that cannot be finished: {exc.strerror or exc}")


def _recover(root_fd: int, found: str, timeout: float) -> None:
    """Finish a dead writer's commit; staging that cannot be removed does not block reads."""
    try:
        with lock.exclusive(root_fd, timeout):
            journal.recover(root_fd, timeout=timeout)
    except (StorageCorrupt, CaptureError) as exc:
        raise ToolError("operation_rejected", f"bundle store needs repair: {exc}") from None
    except OSError as exc:
        if found == "journal":
            raise unfinishable(exc) from None
