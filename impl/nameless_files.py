"""Bytes a server keeps for later but rarely reads, held in a temporary file that has no name
instead of in the process's memory.

Why: the page cache holds such a file's bytes, and the system reclaims them under pressure, as it
cannot reclaim the process's own heap. The file is gone with the process (it was never linked into
a folder) and is read back with ``os.pread`` (no shared file position: threads read at once).
Where no such file can be made or written (a read-only or full temporary folder; Windows, which has
no ``os.pread``) every function here says so (None, False) and the caller keeps the bytes in memory.
On a temporary folder in memory (tmpfs) the bytes stay in RAM, only outside the process's RSS.
"""

from __future__ import annotations

import io
import os
import tempfile
from typing import IO, Iterable

WRITE_BYTES = 1 << 20  # pieces reach the file joined into writes of about this size

NamelessFile = io.RawIOBase | IO[bytes]


def new_file(prefix: str) -> NamelessFile | None:
    """A nameless temporary file open for reading and writing, or None where none can be made or
    read back with ``os.pread``."""
    if not hasattr(os, "pread"):
        return None
    try:
        return tempfile.TemporaryFile(prefix=prefix, buffering=0)
    except OSError:
        return None


def filled(file: NamelessFile | None, pieces: Iterable[bytes | memoryview]) -> NamelessFile | None:
    """``file`` holding ``pieces`` back to back, or None where it could not take them all (the
    file is then closed: the caller keeps the bytes in memory)."""
    if file is None or _wrote(file, pieces):
        return file
    file.close()
    return None


def _wrote(file: NamelessFile, pieces: Iterable[bytes | memoryview]) -> bool:
    """Whether ``pieces`` reached ``file``, back to back, ``WRITE_BYTES`` at a time."""
    try:
        pending: list[bytes | memoryview] = []
        size = 0
        for piece in pieces:
            pending.append(piece)
            size += len(piece)
            if size >= WRITE_BYTES:
                _write_all(file, b"".join(pending))
                pending, size = [], 0
        if pending:
            _write_all(file, b"".join(pending))
    except OSError:
        return False
    return True


def read_exactly(fd: int, start: int, size: int) -> bytes:
    """``size`` bytes of the file ``fd`` from ``start``; ``OSError`` if it ends before them."""
    data = os.pread(fd, size, start)
    while len(data) < size:  # a regular file reads short only at its end: never inside ours
        more = os.pread(fd, size - len(data), start + len(data))
        if not more:
            raise OSError(f"nameless file ended at byte {start + len(data)}, {size - len(data)} bytes early")
        data += more
    return data


def _write_all(file: NamelessFile, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = file.write(view)
        if not written:
            raise OSError("the nameless file took no bytes")
        view = view[written:]
