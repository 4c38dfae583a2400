"""Durable file primitives relative to a directory fd: create, replace, rename, fsync.

A visible file is only ever replaced by ``rename`` of a fully written and fsynced file in the
same filesystem, followed by an fsync of the directory, so a reader or a crash sees either
the old bytes or the new bytes, never a torn file.
"""

from __future__ import annotations

import os
import stat

FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def fsync_dir(dir_fd: int) -> None:
    os.fsync(dir_fd)


def write_new(dir_fd: int, name: str, data: bytes, mode: int = 0o644) -> None:
    """Create ``name`` (must not exist) with ``data`` and fsync it."""
    sync_all([create_unsynced(dir_fd, name, data, mode)])


def create_unsynced(dir_fd: int, name: str, data: bytes, mode: int = 0o644) -> int:
    """Create ``name`` (must not exist) holding ``data``; its descriptor, open and not yet synced
    (:func:`sync_all`): files all written before any is synced let the file system commit
    their entries together."""
    fd = os.open(name, FILE_FLAGS, mode, dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    except BaseException:
        os.close(fd)
        raise
    return fd


def sync_all(fds: list[int]) -> None:
    """fsync every descriptor, then close them all (each closed even when a sync fails)."""
    try:
        for fd in fds:
            os.fsync(fd)
    finally:
        for fd in fds:
            os.close(fd)


def replace_file(dir_fd: int, name: str, data: bytes, tmp_name: str) -> None:
    """Atomically make ``name`` hold ``data``: temp file, fsync, rename, fsync the dir."""
    unlink_if_exists(dir_fd, tmp_name)
    write_new(dir_fd, tmp_name, data)
    os.rename(tmp_name, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    fsync_dir(dir_fd)


def ensure_not_link(dir_fd: int, name: str) -> None:
    """Refuse to publish over a symlink or a non-regular entry."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise OSError(f"refusing to replace non-regular entry {name!r}")


def unlink_if_exists(dir_fd: int, name: str) -> bool:
    try:
        os.unlink(name, dir_fd=dir_fd)
        return True
    except FileNotFoundError:
        return False


def remove_tree(dir_fd: int, name: str) -> None:
    """Remove a private directory tree below ``dir_fd`` without following links."""
    if not empty_tree(dir_fd, name):
        return
    try:
        os.rmdir(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass


def empty_tree(dir_fd: int, name: str) -> bool:
    """Remove everything inside the private directory ``name`` below ``dir_fd``, never following
    a link, and keep the directory; True when it is a directory (now empty). Anything else under
    that name (a file, a link) is removed."""
    try:
        sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    except NotADirectoryError:
        unlink_if_exists(dir_fd, name)
        return False
    try:
        with os.scandir(sub) as it:
            entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
        for child, is_dir in entries:
            if is_dir:
                remove_tree(sub, child)
            else:
                unlink_if_exists(sub, child)
    finally:
        os.close(sub)
    return True
