"""Descriptor-relative, no-follow access below a pinned bundle root.

The root itself is pinned by the read side (``knowspec.impl.okf.bundle.paths.pin_root``); from then
on no file is opened by absolute path and every component is opened with ``O_NOFOLLOW``.
That keeps writes inside the root and never through a link, even if someone swaps
directories while we work.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Callable

from knowspec.impl import runtime as process
from knowspec.impl.okf.bundle.limits import BundleLimits, limits_for
from knowspec.impl.okf.write.paths import is_reserved_component, is_revision_path

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_FILES = 10_000
MAX_TOTAL_BYTES = 64 << 20
MAX_DEPTH = 64


class CaptureLimit(Exception):
    """The bundle is larger than the write side will capture (maps to ``resource_limit``)."""


class ResultOverLimits(CaptureLimit):
    """A write's result would exceed the limits the read tools apply (``resource_limit``)."""


class CaptureError(Exception):
    """The tree cannot be captured as a bundle: crash evidence, bad names, or a link the
    transactional store refuses (maps to ``operation_rejected``)."""


def open_subdir(root_fd: int, rel: str, *, create: bool = False) -> int:
    """Directory fd for ``rel`` (slash path, may be "") under the root, never via a link."""
    fd = os.dup(root_fd)
    try:
        for part in [p for p in rel.split("/") if p]:
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                    os.fsync(fd)  # the new entry must survive a crash as much as its contents
                except FileExistsError:
                    pass
            try:
                nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                raise CaptureError(f"cannot open directory component {part!r}: {exc.strerror}") from None
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(dir_fd: int, name: str) -> bytes | None:
    """Bytes of a regular file, None if absent; a link or special file is an error."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CaptureError(f"cannot read {name!r}: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CaptureError(f"{name!r} is not a regular file")
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


@dataclass
class _Walk:
    strict: bool
    files: dict
    check: Callable[[], None] | None = None   # the call's cancellation, between directories
    total: int = 0
    # the read side's limits: the contract's, or the ones the operator raised at start
    limits: BundleLimits = field(default_factory=lambda: limits_for(process.current(), MAX_FILES, MAX_TOTAL_BYTES))


def capture_files(root_fd: int, *, strict: bool, check: Callable[[], None] | None = None) -> dict[str, bytes]:
    """Every revision-visible regular file (root ``.okf`` excluded) as path -> bytes.

    ``strict`` is the transactional store's view: a revision-visible symlink is corruption.
    Otherwise (read-only previews) links are skipped silently, like the read side.
    """
    walk = _Walk(strict, {}, check)
    _walk_dir(root_fd, "", walk, 0)
    return walk.files


def _walk_dir(dir_fd: int, prefix: str, walk: _Walk, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise CaptureLimit("bundle is nested too deeply")
    if walk.check is not None:
        walk.check()
    with os.scandir(dir_fd) as it:
        names = sorted(e.name for e in it)
    for name in names:
        if not prefix and name == ".okf":
            continue
        rel = prefix + name
        if is_reserved_component(name):
            raise CaptureError("bundle contains an unfinished transaction artifact; recovery is required")
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            if walk.strict:
                raise CaptureError("bundle contains a revision-visible symlink")
            continue
        if stat.S_ISDIR(st.st_mode):
            sub = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
            try:
                _walk_dir(sub, rel + "/", walk, depth + 1)
            finally:
                os.close(sub)
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        if not is_revision_path(rel):
            raise CaptureError("bundle contains a path that is not a canonical revision path")
        data = read_regular(dir_fd, name)
        if data is None:
            continue
        walk.total += len(data)
        walk.files[rel] = data
        if len(walk.files) > walk.limits.files or walk.total > walk.limits.total_bytes:
            raise CaptureLimit("bundle exceeds the capture limits")
