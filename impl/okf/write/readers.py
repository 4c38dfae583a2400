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
from contextlib import ExitStack, contextmanager
from typing import Callable, Iterator

from knowspec.impl.errors import ToolError
from knowspec.impl.okf.write import journal, lock
from knowspec.impl.okf.write.receipts import StorageCorrupt
from knowspec.impl.okf.write.rootfs import CaptureError

MAX_RECOVERIES = 3
_NO_FLOCK = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL}


@contextmanager
def consistent_read(root_fd: int, check: Callable[[], None] | None = None,
                    timeout: float = lock.DEFAULT_LEASE_TIMEOUT) -> Iterator[None]:
    """Hold while capturing the bundle at ``root_fd``; ``check`` runs while waiting (cancel)."""
    with ExitStack() as held:
        try:
            _enter(held, root_fd, check, timeout)
        except lock.LockTimeout:
            raise ToolError("operation_rejected", "bundle is locked by another writer", retryable=True) from None
        except OSError as exc:
            if exc.errno not in _NO_FLOCK:
                raise ToolError("invalid_request", f"load bundle: {exc.strerror}") from None
            # No flock on this filesystem: the store cannot commit here either, so nothing publishes.
        yield


def _enter(held: ExitStack, root_fd: int, check: Callable[[], None] | None, timeout: float) -> None:
    for attempt in range(MAX_RECOVERIES + 1):
        with ExitStack() as gate:
            gate.enter_context(lock.reader_gate(root_fd, timeout, check))
            # Under the gate no commit runs: anything left over is a dead writer's.
            found = journal.leftover(root_fd)
            if found is None or (found == "staging" and attempt > 0):
                okf_fd = _private_dir(root_fd)
                if okf_fd is None:
                    held.push(gate.pop_all())
                else:
                    held.enter_context(lock.capturing(okf_fd, timeout, check))
                return
        _recover(root_fd, found, timeout)
    raise ToolError("operation_rejected", "bundle has an interrupted commit that did not finish")


def _private_dir(root_fd: int) -> int | None:
    try:
        return journal.open_private(root_fd, create=False)
    except StorageCorrupt:
        return None


def _recover(root_fd: int, found: str, timeout: float) -> None:
    """Finish a dead writer's commit; staging that cannot be removed does not block reads."""
    try:
        with lock.exclusive(root_fd, timeout):
            journal.recover(root_fd, timeout=timeout)
    except (StorageCorrupt, CaptureError) as exc:
        raise ToolError("operation_rejected", f"bundle store needs repair: {exc}") from None
    except OSError as exc:
        if found == "journal":
            raise ToolError("operation_rejected",
                            f"bundle has an interrupted commit that cannot be finished: {exc.strerror}") from None
