"""The captured files of a snapshot by identity, their bytes re-read from disk when asked.

A snapshot used to keep every file's bytes for its whole life (a bundle's size again on the
heap). It now keeps, per file, what identifies the captured content: path, size, ``mtime_ns``
and SHA-256. Bytes are re-read on demand and served only when they hash the same as captured:
a file changed on disk since the capture is refused (``invalid_request``, the capture's own
"file changed while reading"), never served as the old content; the next capture sees the
change. Revisions, fingerprints and section digests come from the kept digests.

A re-read costs about what a lookup in a cache of recent reads would (databricks-okf: 6.5 us a
file, open, read, close and SHA-256 included), so none is kept.
"""

from __future__ import annotations

import functools
import hashlib
import os
from contextvars import ContextVar
from hashlib import sha256
from typing import Any, Callable, Iterator, Mapping, TypeVar

from knowspec.impl.errors import ToolError
from knowspec.impl.okf.bundle.limits import SizeTally
from knowspec.impl.okf.layered_map import LayeredMap, flat

READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
CHANGED_MESSAGE = "load bundle: file changed while reading"
ANSWER_ATTEMPTS = 3

F = TypeVar("F", bound=Callable[..., Any])


class FileChanged(ToolError):
    """A captured file no longer holds the captured bytes: the caller captures again."""

    def __init__(self) -> None:
        super().__init__("invalid_request", CHANGED_MESSAGE)


def retried_on_file_change(handler: F) -> F:
    """A read tool's handler (or a write's capture and plan), run again from a new capture,
    which sees the change, when a file changed on disk while the call was re-reading it (e.g.
    another writer committed). After ``ANSWER_ATTEMPTS`` it fails as the capture does when a
    file changes under it."""
    @functools.wraps(handler)
    def answered(*args: Any, **kwargs: Any) -> Any:
        for attempt in range(ANSWER_ATTEMPTS):
            try:
                return handler(*args, **kwargs)
            except FileChanged:
                if attempt + 1 == ANSWER_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")

    return answered  # type: ignore[return-value]


# The snapshots captured during the current read tool call whose documents still hold the
# bytes they were parsed from (None outside :func:`captures_released_at_end`).
_CALL_CAPTURES: ContextVar[list[Any] | None] = ContextVar("okf_call_captures", default=None)


def release_at_call_end(snapshot: Any) -> None:
    """Have ``snapshot`` drop its documents' bytes when the current read tool call ends; outside
    one, the next capture releases them."""
    captures = _CALL_CAPTURES.get()
    if captures is not None:
        captures.append(snapshot)


def captures_released_at_end(handler: F) -> F:
    """A read tool's handler whose captures drop the bytes they parsed when it returns: the call
    has had its pass over the bodies, and later readers re-read what they need. Left to the next
    capture, a server whose first call loaded databricks-okf held 34 MiB of file bytes until a
    second call came (``benchmarks/okf_cold_memory.py``). Writers keep theirs to the next
    capture: their plans are rendered after the capture."""
    @functools.wraps(handler)
    def answered(*args: Any, **kwargs: Any) -> Any:
        if _CALL_CAPTURES.get() is not None:  # a nested call: the outermost one releases
            return handler(*args, **kwargs)
        captures: list[Any] = []
        scope = _CALL_CAPTURES.set(captures)
        try:
            return handler(*args, **kwargs)
        finally:
            _CALL_CAPTURES.reset(scope)
            for snapshot in captures:
                snapshot.release_bytes()

    return answered  # type: ignore[return-value]


class FileRecord:
    """What identifies one captured file's content."""

    __slots__ = ("root", "path", "size", "mtime_ns", "digest")

    def __init__(self, root: str, path: str, size: int, mtime_ns: int, digest: bytes) -> None:
        self.root, self.path, self.size, self.mtime_ns, self.digest = root, path, size, mtime_ns, digest

    @classmethod
    def of(cls, root: str, path: str, data: bytes, mtime_ns: int) -> "FileRecord":
        return cls(root, path, len(data), mtime_ns, hashlib.sha256(data).digest())

    def read(self) -> bytes:
        """The captured bytes, read from the file again; ``ToolError`` when it no longer holds them."""
        return _read_verified(self)


def _read_verified(record: FileRecord) -> bytes:
    """One file's bytes if they are still the captured ones (one byte more is asked for, so a
    file that grew is told apart without a second read)."""
    size = record.size
    try:
        fd = os.open(f"{record.root}/{record.path}", READ_FLAGS)
    except OSError:
        raise FileChanged() from None
    try:
        data = os.read(fd, size + 1)
        while len(data) < size:  # a short read (not seen on regular files): read on to the end
            more = os.read(fd, size + 1 - len(data))
            if not more:
                break
            data += more
    except OSError:
        raise FileChanged() from None
    finally:
        os.close(fd)
    if len(data) != size or sha256(data).digest() != record.digest:
        raise FileChanged()
    return data


class CapturedFiles(Mapping[str, bytes]):
    """Relative path -> bytes of every captured file, in path order, read when asked (the
    mapping keeps records, never bytes)."""

    def __init__(self, records: Mapping[str, FileRecord], tally: SizeTally | None = None) -> None:
        self._records = records  # a dict, or a layered one (``replaced``) until something iterates
        self._tally = tally  # made at the first write's commit, then carried by ``replaced``

    def __getitem__(self, path: str) -> bytes:
        return self._records[path].read()

    def __iter__(self) -> Iterator[str]:
        # a pass over every file looks each one up next: from one dict
        self._records = records = flat(self._records)
        return iter(records)

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
        tally = None
        if self._tally is not None:
            tally = self._tally.after(sizes_or_none(self), {p: r.size for p, r in records.items()}, ())
        return CapturedFiles(LayeredMap(self._records, records), tally)

    def size_tally(self) -> SizeTally:
        """What the read limits look at in these files (counted once, then carried)."""
        if self._tally is None:
            self._tally = SizeTally.of({path: record.size for path, record in self._records.items()})
        return self._tally


def digest_of(files: Mapping[str, bytes], path: str) -> bytes:
    """SHA-256 of ``files[path]``: the kept digest of captured files, else hashed."""
    if isinstance(files, CapturedFiles):
        return files.digest(path)
    return hashlib.sha256(files[path]).digest()


def size_of(files: Mapping[str, bytes], path: str) -> int:
    if isinstance(files, CapturedFiles):
        return files.size(path)
    return len(files[path])


def size_tally_of(files: Mapping[str, bytes]) -> SizeTally:
    """The read limits' tally of ``files``: kept by captured files, else counted."""
    if isinstance(files, CapturedFiles):
        return files.size_tally()
    return SizeTally.of({path: len(data) for path, data in files.items()})


def sizes_or_none(files: Mapping[str, bytes]) -> Callable[[str], int | None]:
    """A file's size in ``files`` by path (None: absent), without reading captured bytes."""
    return lambda path: size_of(files, path) if path in files else None
