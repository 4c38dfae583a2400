"""Linux inotify watches over a captured bundle's directories, so revalidation is a queue drain.

A cached snapshot is current exactly when nothing has changed under any captured directory since
that directory was armed. The snapshot module arms every directory (through its pinned
descriptor, ``/proc/self/fd/N``) *before* listing it, so any later change queues an event; a
call then drains the queue without blocking. No events: the snapshot is provably current. Events
name the directory and entry that changed; the snapshot module re-checks only those.

What inotify cannot vouch for is reported as :class:`Changes.full` (rescan everything): queue
overflow, a watched directory deleted, moved or unmounted, a watch dropped by the kernel, a
change of a directory's own attributes. Filesystems where remote or lower-layer writers bypass
the local notification path (network, FUSE) are not watched at all (:func:`watchable`).

Plain ctypes over libc; no third-party dependency. Everything raises :class:`WatchUnavailable`
when the kernel refuses (not Linux, no ``/proc``, watch or instance limit reached); callers then
fall back to the full stat walk.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import struct
import sys
from dataclasses import dataclass, field

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_UNMOUNT = 0x00002000
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_ISDIR = 0x40000000

WATCH_MASK = (
    IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO
    | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR
)
_SELF_LOST = IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_IGNORED
_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len

# statfs f_type values whose changes are all seen by the local kernel's fsnotify.
_LOCAL_FS = {
    0xEF53,  # ext2/3/4
    0x58465342,  # xfs
    0x9123683E,  # btrfs
    0x01021994,  # tmpfs
    0x794C7630,  # overlayfs
    0x2FC12FC1,  # zfs
    0xF2F52010,  # f2fs
    0x3153464A,  # jfs
    0x52654973,  # reiserfs
    0x858458F6,  # ramfs
}


class WatchUnavailable(Exception):
    """The kernel cannot watch this tree; revalidate by walking instead."""


def _load_libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.fstatfs.argtypes = [ctypes.c_int, ctypes.c_void_p]
        return libc
    except (OSError, AttributeError):
        return None


_libc = _load_libc()
ENABLED = _libc is not None  # tests switch this off to exercise the stat-walk fallback


def available() -> bool:
    return ENABLED and _libc is not None


def watchable(dir_fd: int) -> bool:
    """Whether the filesystem holding ``dir_fd`` reports every change to the local kernel."""
    if not available():
        return False
    buf = ctypes.create_string_buffer(256)
    if _libc.fstatfs(dir_fd, buf) != 0:
        return False
    f_type = struct.unpack_from("l", buf.raw, 0)[0] & 0xFFFFFFFF
    return f_type in _LOCAL_FS


@dataclass
class Changes:
    """What a drain found: ``full`` (rescan everything) or entries ``(dir prefix, name)``."""

    full: bool = False
    names: set[tuple[str, str]] = field(default_factory=set)


class DirectoryWatch:
    """One inotify instance; ``prefixes`` maps each watch descriptor to its directory prefix
    (``""`` for the root, else ``"a/b/"``)."""

    def __init__(self) -> None:
        if not available():
            raise WatchUnavailable("inotify not available")
        fd = _libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            raise WatchUnavailable(os.strerror(ctypes.get_errno()))
        self.fd = fd
        self.owner = os.getpid()  # a forked child shares the queue: its events are not all its own
        self.prefixes: dict[int, str] = {}

    def add(self, dir_fd: int, prefix: str) -> None:
        """Watch the directory open as ``dir_fd`` (call before listing it)."""
        path = f"/proc/self/fd/{dir_fd}".encode()
        wd = _libc.inotify_add_watch(self.fd, path, WATCH_MASK)
        if wd < 0:
            err = ctypes.get_errno()
            raise WatchUnavailable(os.strerror(err) if err else "inotify_add_watch failed")
        known = self.prefixes.get(wd)
        if known is not None and known != prefix:
            raise WatchUnavailable("directory watched under two prefixes")
        self.prefixes[wd] = prefix

    def watches(self, prefix: str) -> bool:
        """Whether the directory ``prefix`` still has a live watch (not deleted, not dropped)."""
        return prefix in self.prefixes.values()

    def remove_under(self, prefix: str) -> None:
        """Stop watching ``prefix`` and every directory below it (they left the tree)."""
        for wd, known in list(self.prefixes.items()):
            if known.startswith(prefix):
                del self.prefixes[wd]
                _libc.inotify_rm_watch(self.fd, wd)  # its IN_IGNORED then names no prefix

    def drain(self) -> Changes:
        """Read every queued event without blocking and classify them."""
        changes = Changes()
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return changes
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                changes.full = True
                return changes
            if not data:
                return changes
            self._classify(data, changes)

    def _classify(self, data: bytes, changes: Changes) -> None:
        offset = 0
        while offset + _HEADER.size <= len(data):
            wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
            raw_name = data[offset + _HEADER.size : offset + _HEADER.size + length].rstrip(b"\0")
            offset += _HEADER.size + length
            if mask & IN_Q_OVERFLOW:
                changes.full = True
                continue
            prefix = self.prefixes.get(wd)
            if prefix is None:
                continue  # a directory already dropped from the tree (or its IN_IGNORED)
            if raw_name:
                changes.names.add((prefix, os.fsdecode(raw_name)))
            elif prefix and mask & (IN_DELETE_SELF | IN_MOVE_SELF):
                # The parent's entry tells where it went: re-check that entry.
                parent, _, name = prefix[:-1].rpartition("/")
                changes.names.add((parent + "/" if parent else "", name))
                if mask & IN_DELETE_SELF:
                    del self.prefixes[wd]  # the kernel drops the watch itself
            elif mask & (_SELF_LOST | IN_ATTRIB):
                # root moved or deleted, a watch lost, or a directory's own permissions changed
                changes.full = True

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            self.prefixes.clear()

    def __del__(self) -> None:  # a dropped cache slot must not leak its descriptor
        try:
            self.close()
        except Exception:
            pass
