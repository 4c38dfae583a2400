"""The captured files of a snapshot by identity, their bytes re-read from disk when asked.

A snapshot used to keep every file's bytes for its whole life (a bundle's size again on the
heap). It now keeps, per file, what identifies the captured content: path, size, ``mtime_ns``
and SHA-256. Bytes are re-read on demand and served only when they hash the same as captured:
a file changed on disk since the capture is refused (``invalid_request``, the capture's own
"file changed while reading"), never served as the old content; the next capture sees the
change. Revisions, fingerprints and section digests come from the kept digests.

A few recently re-read files are kept (:data:`RECENT_FILES`, :data:`RECENT_BYTES`): a tool
reads one document's body several times in a row.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from typing import Iterator, Mapping

from knowspec.impl.errors import ToolError

READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
CHANGED_MESSAGE = "load bundle: file changed while reading"
RECENT_FILES = 16
RECENT_BYTES = 1024 * 1024


class FileRecord:
    """What identifies one captured file's content."""

    __slots__ = ("root", "path", "size", "mtime_ns", "digest")

    def __init__(self, root: str, path: str, size: int, mtime_ns: int, digest: bytes) -> None:
        self.root, self.path, self.size, self.mtime_ns, self.digest = root, path, size, mtime_ns, digest

    @classmethod
    def of(cls, root: str, path: str, data: bytes, mtime_ns: int) -> "FileRecord":
        return cls(root, path, len(data), mtime_ns, hashlib.sha256(data).digest())

    def read(self) -> bytes:
        """The captured bytes, from the recent reads or the disk; ``ToolError`` when the file
        no longer holds them."""
        key = (self.root, self.path, self.digest)
        data = _recent.get(key)
        if data is None:
            data = _read_verified(self)
            _recent.put(key, data)
        return data


def _read_verified(record: FileRecord) -> bytes:
    try:
        fd = os.open(os.path.join(record.root, record.path), READ_FLAGS)
    except OSError:
        raise ToolError("invalid_request", CHANGED_MESSAGE) from None
    try:
        data = os.read(fd, record.size + 1) if record.size else b""
        while record.size and len(data) <= record.size:  # short reads: keep going up to size + 1
            more = os.read(fd, record.size + 1 - len(data))
            if not more:
                break
            data += more
    except OSError:
        raise ToolError("invalid_request", CHANGED_MESSAGE) from None
    finally:
        os.close(fd)
    if len(data) != record.size or hashlib.sha256(data).digest() != record.digest:
        raise ToolError("invalid_request", CHANGED_MESSAGE)
    return data


class _RecentReads:
    """The last few re-read files (least recently used dropped), shared by every thread."""

    def __init__(self, max_files: int, max_bytes: int) -> None:
        self.max_files, self.max_bytes = max_files, max_bytes
        self.lock = threading.Lock()
        self.items: OrderedDict[tuple, bytes] = OrderedDict()
        self.nbytes = 0

    def get(self, key: tuple) -> bytes | None:
        with self.lock:
            data = self.items.get(key)
            if data is not None:
                self.items.move_to_end(key)
            return data

    def put(self, key: tuple, data: bytes) -> None:
        if len(data) > self.max_bytes:
            return
        with self.lock:
            if key in self.items:
                return
            self.items[key] = data
            self.nbytes += len(data)
            while len(self.items) > self.max_files or self.nbytes > self.max_bytes:
                _, dropped = self.items.popitem(last=False)
                self.nbytes -= len(dropped)

    def clear(self) -> None:
        with self.lock:
            self.items.clear()
            self.nbytes = 0


_recent = _RecentReads(RECENT_FILES, RECENT_BYTES)


def forget_recent_reads() -> None:
    _recent.clear()


class CapturedFiles(Mapping[str, bytes]):
    """Relative path -> bytes of every captured file, in path order, read when asked (the
    mapping keeps records, never bytes)."""

    def __init__(self, records: dict[str, FileRecord]) -> None:
        self._records = records

    def __getitem__(self, path: str) -> bytes:
        return self._records[path].read()

    def __iter__(self) -> Iterator[str]:
        return iter(self._records)

    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, path: object) -> bool:
        return path in self._records

    def record(self, path: str) -> FileRecord:
        return self._records[path]

    def digest(self, path: str) -> bytes:
        """SHA-256 of the captured bytes of ``path`` (no read)."""
        return self._records[path].digest

    def size(self, path: str) -> int:
        return self._records[path].size

    def replaced(self, records: Mapping[str, FileRecord]) -> "CapturedFiles":
        """These files with some records replaced (the same paths, so the same order)."""
        return CapturedFiles({**self._records, **records})


def digest_of(files: Mapping[str, bytes], path: str) -> bytes:
    """SHA-256 of ``files[path]``: the kept digest of captured files, else hashed."""
    if isinstance(files, CapturedFiles):
        return files.digest(path)
    return hashlib.sha256(files[path]).digest()


def size_of(files: Mapping[str, bytes], path: str) -> int:
    if isinstance(files, CapturedFiles):
        return files.size(path)
    return len(files[path])
