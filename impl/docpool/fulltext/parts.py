"""A persisted full-text index read part by part: only what a search touches leaves the database.

``doc$fts_snapshot`` holds ``reader.dump``'s bytes cut into numbered parts. A process's first
search reads the small head (vocabulary, per-row and per-topic data) and leaves the postings
and texts in the database: ``LazyArray`` / ``LazyBytes`` stand for them and, when a search
slices them, read just the parts the slice covers (``SnapshotParts``), once per process and
stamp. The parts are read through the request's own snapshot (``PartReader``, bound per
request by ``FtsIndex.with_reader``), and each one's revision is checked against the index's.
"""

from __future__ import annotations

import zlib
from typing import Any, Callable, Iterable, Sequence

import numpy as np

PartReader = Callable[[list[int]], Iterable[tuple[int, str, Any]]]
"""``(part, revision, data)`` of the numbered parts (those that exist) in the request's
snapshot of ``doc$fts_snapshot``: one query for all of them."""


class SnapshotParts:
    """The parts of one persisted index read so far, shared by every request at its stamp."""

    def __init__(self, revision: str, part_bytes: int, loaded: dict[int, bytes],
                 unpack: Callable[[Any], bytes] = bytes) -> None:
        """``unpack``: a stored part's data as the dump's bytes (decompressed, if they were)."""
        self.revision, self.part_bytes, self._unpack = revision, part_bytes, unpack
        self._parts = dict(loaded)

    def prefetch(self, spans: Iterable[tuple[int, int]], reader: PartReader | None) -> None:
        """Read the parts of every byte span ``[start, stop)`` not held yet, in one ``reader`` call."""
        size = self.part_bytes
        wanted = {k for start, stop in spans if stop > start for k in range(start // size, (stop - 1) // size + 1)}
        missing = sorted(k for k in wanted if k not in self._parts)
        if missing:
            self._fetch(missing, reader)

    def read(self, start: int, stop: int, reader: PartReader | None) -> memoryview | bytes:
        """Bytes ``[start, stop)`` of the dump, reading the parts not held yet through ``reader``."""
        if stop <= start:
            return b""
        size = self.part_bytes
        first, last = start // size, (stop - 1) // size
        self.prefetch([(start, stop)], reader)
        if first == last:
            return memoryview(self._parts[first])[start - first * size:stop - first * size]
        return b"".join(memoryview(self._parts[k])[max(start - k * size, 0):min(stop - k * size, size)]
                        for k in range(first, last + 1))

    def _fetch(self, wanted: list[int], reader: PartReader | None) -> None:
        if reader is None:
            raise RuntimeError("a persisted full-text index was read outside a request")
        try:
            got = {int(k): self._unpack(data) for k, revision, data in reader(wanted) if revision == self.revision}
        except zlib.error as exc:
            raise LookupError("the persisted full-text index is damaged") from exc
        if any(k not in got for k in wanted):
            raise LookupError("the persisted full-text index is incomplete")
        self._parts.update(got)  # concurrent readers may both fetch a part: the same bytes

    def held(self) -> int:
        """Bytes read so far."""
        return sum(len(p) for p in self._parts.values())


class LazyArray:
    """A persisted numpy array read by slices of its first axis (what ``fulltext.rank`` asks)."""

    def __init__(self, parts: SnapshotParts, start: int, dtype: np.dtype, shape: tuple[int, ...],
                 reader: PartReader | None = None) -> None:
        self._parts, self._start, self._reader = parts, start, reader
        self.dtype, self.shape = np.dtype(dtype), tuple(shape)
        self._row_bytes = self.dtype.itemsize * int(np.prod(self.shape[1:], dtype=np.int64))

    def bound(self, reader: PartReader) -> "LazyArray":
        """The same array, reading its missing parts through ``reader``."""
        return LazyArray(self._parts, self._start, self.dtype, self.shape, reader)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        """The whole array's size (what the process holds once every part is read)."""
        return self._row_bytes * self.shape[0]

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, (int, np.integer)):
            k = int(key) + (len(self) if int(key) < 0 else 0)
            if not 0 <= k < len(self):
                raise IndexError(key)
            return self[k:k + 1][0]
        if not isinstance(key, slice):
            raise TypeError(f"a persisted array is read by slices, not {type(key).__name__}")
        lo, hi, step = key.indices(len(self))
        if step != 1:
            return self[:][key]
        hi = max(hi, lo)
        data = self._parts.read(self._start + lo * self._row_bytes, self._start + hi * self._row_bytes, self._reader)
        return np.frombuffer(data, dtype=self.dtype).reshape((hi - lo, *self.shape[1:]))

    def prefetch(self, slices: Iterable[tuple[int, int]]) -> None:
        """Read the parts of every ``[lo, hi)`` slice not held yet, in one round trip."""
        self._parts.prefetch(self.spans(slices), self._reader)

    def spans(self, slices: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
        """The dump's byte spans of these ``[lo, hi)`` slices."""
        row = self._row_bytes
        return [(self._start + lo * row, self._start + hi * row) for lo, hi in slices]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        whole = self[:]
        return whole if dtype is None else whole.astype(dtype)


class LazyBytes:
    """A persisted byte string read by slices (the packed chunk texts)."""

    def __init__(self, parts: SnapshotParts, start: int, size: int, reader: PartReader | None = None) -> None:
        self._parts, self._start, self._size, self._reader = parts, start, size, reader

    def bound(self, reader: PartReader) -> "LazyBytes":
        return LazyBytes(self._parts, self._start, self._size, reader)

    def __len__(self) -> int:
        return self._size

    def prefetch(self, spans: Sequence[tuple[int, int]]) -> None:
        """Read the parts of every ``[lo, hi)`` span not held yet, in one round trip."""
        self._parts.prefetch([(self._start + lo, self._start + hi) for lo, hi in spans], self._reader)

    def __getitem__(self, key: slice) -> bytes:
        lo, hi, step = key.indices(self._size)
        if step != 1:
            raise TypeError("a persisted byte string is read by plain slices")
        return bytes(self._parts.read(self._start + lo, self._start + max(hi, lo), self._reader))


def prefetch_slices(arrays: Sequence[LazyArray], slices: Sequence[tuple[int, int]]) -> None:
    """The same ``[lo, hi)`` slices of several arrays of one dump, read in one round trip."""
    if arrays:
        spans = [span for a in arrays for span in a.spans(slices)]
        arrays[0]._parts.prefetch(spans, arrays[0]._reader)
