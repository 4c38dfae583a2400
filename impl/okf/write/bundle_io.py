"""Opening a bundle for a write tool: pin the root, finish interrupted commits, capture.

Path rules and their error texts are the read side's (``knowspec.impl.okf.bundle.paths``); capture
here hashes with the write contract's revision recipe. Store failures are translated to the
contract's envelope codes in one place.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Callable, Iterator, Mapping

from knowspec.impl.errors import ToolError
from knowspec.impl.okf.bundle.paths import check_bundle_path, pin_root
from knowspec.impl.okf.write import journal, lock
from knowspec.impl.okf.write.readers import consistent_read, unfinishable
from knowspec.impl.okf.write.receipts import StorageCorrupt
from knowspec.impl.okf.write.revision import index_files, revision_of
from knowspec.impl.okf.write.rootfs import CaptureError, CaptureLimit, capture_files


@contextmanager
def pinned(bundle_path: str) -> Iterator[int]:
    """The pinned root fd for one call (``invalid_request`` on any path-rule failure)."""
    fd, _ = pin_root(check_bundle_path(bundle_path))
    try:
        yield fd
    finally:
        os.close(fd)


def finish_interrupted(root_fd: int) -> None:
    """Roll an interrupted commit forward (or its staging back) before anyone reads.

    Touches only an existing ``.okf``; a bundle never written by the store stays untouched.
    """
    try:
        if journal.pending(root_fd):
            with lock.exclusive(root_fd):
                journal.recover(root_fd)
    except (StorageCorrupt, CaptureError) as exc:
        raise ToolError("operation_rejected", f"bundle store needs repair: {exc}") from None
    except lock.LockTimeout:
        raise ToolError("operation_rejected", "bundle is locked by another writer", retryable=True) from None
    except OSError as exc:  # before: "tool operation was rejected", and a traceback in the log
        raise unfinishable(exc) from None


def capture(root_fd: int, bundle_path: str | None = None,
            check: Callable[[], None] | None = None) -> tuple[Mapping[str, bytes], str]:
    """Read-only capture (links skipped, ``.okf`` ignored) and its revision; never a
    half-published commit, so a preview never plans against a state that did not exist.

    Given the ``bundle_path`` the root was pinned from, the read side's cached snapshot answers
    (``cached_capture``); the walk below is the answer whenever that one cannot be."""
    if bundle_path is not None:
        found = cached_capture(root_fd, bundle_path, check, strict=False, locked=False)
        if found is not None:
            return found
    try:
        with consistent_read(root_fd):
            files = capture_files(root_fd, strict=False, check=check)
    except CaptureLimit:
        raise ToolError("resource_limit", "bundle exceeds MCP resource limits") from None
    except CaptureError as exc:
        raise ToolError("invalid_request", f"bundle cannot be captured: {exc}") from None
    except OSError as exc:  # e.g. EINVAL reading a /proc file: "load bundle" failures (spec/okf/contract/read.md §4.2)
        raise ToolError("invalid_request", f"bundle cannot be captured: {exc.strerror or 'I/O error'}") from None
    return files, revision_of(files)


def locked_capture(root_fd: int, bundle_path: str, check: Callable[[], None] | None = None
                   ) -> tuple[Mapping[str, bytes], str]:
    """The store's strict capture under the writers' lock (a symbolic link is corruption): the
    cached snapshot when it can vouch for the tree, else the strict walk."""
    found = cached_capture(root_fd, bundle_path, check, strict=True, locked=True)
    if found is not None:
        return found
    files = capture_files(root_fd, strict=True)
    return files, revision_of(files)


class _Cancellation:
    def __init__(self, check: Callable[[], None] | None) -> None:
        self._check = check

    def check_cancelled(self, operation: str = "") -> None:
        if self._check is not None:
            self._check()


def cached_capture(root_fd: int, bundle_path: str, check: Callable[[], None] | None, *, strict: bool,
                   locked: bool) -> tuple[Mapping[str, bytes], str] | None:
    """The files of the read side's snapshot of the pinned root (revalidated through its
    inotify watch, so an unchanged bundle is not read again) and their revision, from the
    root's revision index (only changed files are hashed again).

    The read side's capture rules are the write side's or stricter (crash evidence, revision
    paths, limits), so when it succeeds the walk would capture the same files; when it refuses,
    None lets the walk answer in the write side's words. ``strict``: None when a symbolic link
    was skipped (the store refuses it)."""
    from knowspec.impl.okf.bundle.snapshot import capture_pinned

    try:
        found = capture_pinned(bundle_path, root_fd, _Cancellation(check), locked=locked)
    except ToolError as exc:
        if exc.code == "operation_cancelled":
            raise
        return None
    if found is None or (strict and found[1]):
        return None
    snapshot = found[0]
    # The captured files themselves (read when asked), not a copy: a copy would read them all.
    return snapshot.files, index_files(snapshot.files, snapshot.root, snapshot.derived_from).revision


def has_private_dir(root_fd: int) -> bool:
    try:
        os.stat(journal.OKF_DIR, dir_fd=root_fd, follow_symlinks=False)
        return True
    except FileNotFoundError:
        return False
