"""Every row's folded body, LZ4-compressed, kept in a nameless temporary file and read back where a
query needs it.

A query with a separator (``sql warehouse``) verifies its candidate bodies byte for byte, so the
index keeps every folded body: reading the files back instead (a disk read, a hash check and a
fold per candidate) made such queries at 50k concepts 2-3x slower. Kept plain, the bodies were
the largest part of an OKF server's memory (databricks-okf: 28 MiB of 172). LZ4's block format
keeps them in 14 MiB and decompresses them at about 1 GB/s, so verifying a candidate costs about
2.3x a plain ``bytes.find`` (a hit no longer stops the work at its first occurrence: the whole body
is decompressed); the 5-gram signatures (:mod:`boundary_signatures`) keep that many fewer bodies to
verify. zstd and zlib keep the bodies smaller (10 MiB) but decompress about 2x and 5x slower.

Compressed, they were still the largest single part of the server's resident memory (14 MiB of
151 on databricks-okf), though a query reads only its candidates. So they are written once to a
temporary file that has no name (:mod:`knowspec.impl.nameless_files`: gone with the process, read
back with ``os.pread`` by any thread). What a query reads comes from the page cache, which the
system reclaims under pressure; candidates close together are read in one call. Where no
such file can be made, written or read that way (a read-only or full temporary folder; Windows),
or with ``KNOWSPEC_SEARCH_BODIES=memory``, they stay in memory, read the same way: in one buffer,
not one object per body, which the allocator hands back whole rather than keeping freed pages
pinned among the heap's other objects.
"""

from __future__ import annotations

import weakref
from array import array
from itertools import accumulate
from typing import Iterator, Sequence

import lz4.block

from knowspec.impl import nameless_files

# One read covers the wanted bodies within this many bytes, skipping over unwanted ones between
# two wanted ones when they take at most GAP_BYTES: fewer calls, and a read stays small enough to
# be a short-lived buffer.
SPAN_BYTES = 1 << 20
GAP_BYTES = 64 << 10


def compress(folded: bytes | memoryview) -> bytes:
    """The stored form of one folded body (its length comes first, so it decompresses alone)."""
    return lz4.block.compress(folded)


class FoldedBodies:
    """The folded bodies of an index's rows, each stored as :func:`compress` made it; in a
    temporary file when ``on_disk`` and one can be written, else in memory."""

    def __init__(self, stored: Sequence[bytes | memoryview], *, on_disk: bool = True) -> None:
        self._hold(on_disk)
        self.fill(stored)

    @classmethod
    def empty(cls, *, on_disk: bool = True) -> "FoldedBodies":
        """No bodies yet; the objects it keeps (and the file) made now, before a build's
        temporaries (see ``ConceptSearchIndex._hold``); :meth:`fill` stores them."""
        bodies = cls.__new__(cls)
        bodies._hold(on_disk)
        return bodies

    def _hold(self, on_disk: bool) -> None:
        self.offsets = array("q", [0])
        self._data = b""
        self._file = nameless_files.new_file("knowspec-bodies-") if on_disk else None
        if self._file is not None:
            weakref.finalize(self, self._file.close)  # closed with the index, not left to the collector

    def fill(self, stored: Sequence[bytes | memoryview]) -> None:
        """Store ``stored`` (once): in the file, or in memory where it cannot be written."""
        self.offsets.extend(accumulate(map(len, stored)))  # after the 0 _hold put first
        self._file = nameless_files.filled(self._file, stored)
        if self._file is None:
            self._data = b"".join(stored)

    @classmethod
    def of(cls, folded: Sequence[bytes], *, on_disk: bool = True) -> "FoldedBodies":
        return cls([compress(body) for body in folded], on_disk=on_disk)

    @property
    def on_disk(self) -> bool:
        return self._file is not None

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, row: int) -> bytes:
        """Row ``row``'s folded body (UTF-8 bytes)."""
        return lz4.block.decompress(self.stored(row))

    def __iter__(self) -> Iterator[bytes]:
        decompress = lz4.block.decompress
        return (decompress(stored) for _, stored in self.stored_rows(range(len(self))))

    def stored(self, row: int) -> bytes | memoryview:
        """Row ``row``'s body as stored (compressed)."""
        return self._read(self.offsets[row], self.offsets[row + 1])

    def handed_down(self) -> dict[str, bytes | int | None]:
        """What another process needs to read these bodies (:meth:`reader`): their offsets, and
        the descriptor of their file (for it to inherit) or, kept in memory, the bodies."""
        fileno = None if self._file is None else self._file.fileno()
        return {"offsets": self.offsets.tobytes(), "fileno": fileno, "inline": self._data if fileno is None else b""}

    @classmethod
    def reader(cls, offsets: bytes, fileno: int | None, inline: bytes) -> "FoldedBodies":
        """The bodies :meth:`handed_down` describes, read in this (helper) process."""
        bodies = cls.__new__(cls)
        bodies.offsets = array("q")
        bodies.offsets.frombytes(offsets)
        bodies._data = inline
        bodies._file = None if fileno is None else open(fileno, "rb", buffering=0, closefd=False)
        return bodies

    def stored_rows(self, rows: Sequence[int]) -> Iterator[tuple[int, memoryview]]:
        """``(row, body as stored)`` for each of ``rows`` in their order, read span by span (rows
        in ascending order share reads): what an incremental rebuild carries over for the
        concepts it did not change, and what a query decompresses."""
        rows_list = list(rows)
        offsets = self.offsets
        starts, ends = [offsets[row] for row in rows_list], [offsets[row + 1] for row in rows_list]
        first, count = 0, len(rows_list)
        while first < count:
            base = starts[first]
            last = first + 1  # one past the span's last row
            while (last < count and ends[last - 1] <= starts[last] <= ends[last - 1] + GAP_BYTES
                   and ends[last] - base <= SPAN_BYTES):
                last += 1
            span = memoryview(self._read(base, ends[last - 1]))
            for at in range(first, last):
                yield rows_list[at], span[starts[at] - base:ends[at] - base]
            first = last

    def nbytes(self) -> int:
        """The bytes held in memory (the offsets, and the bodies when they are not on disk)."""
        return len(self._data) + self.offsets.itemsize * len(self.offsets)

    def holding(self, rows: Sequence[int], needle: bytes) -> list[int]:
        """The ``rows`` whose body holds ``needle``."""
        decompress = lz4.block.decompress
        return [row for row, stored in self.stored_rows(rows) if needle in decompress(stored)]

    def _read(self, start: int, end: int) -> bytes | memoryview:
        if self._file is None:
            return memoryview(self._data)[start:end]
        return nameless_files.read_exactly(self._file.fileno(), start, end - start)
