"""The search index's folded bodies, kept LZ4-compressed in blocks of consecutive rows.

search_concepts verifies the candidate bodies of a several-word query with a substring search,
so every folded body must be at hand (re-reading files costs a read, a hash check and a fold per
candidate). Kept plain they were the index's largest part (29.7 MiB on databricks-okf); here
consecutive rows' bodies are joined by NUL into blocks of about ``BLOCK_BYTES`` and each block is
LZ4-compressed (databricks-okf: 13.5 MiB). A query decompresses each block holding a candidate
once and searches the candidates' ranges in it: a match never spans two bodies, since a query
holding NUL never comes here (the index scans field by field instead). Blocks are stored in one
buffer, an allocation the allocator can hand back whole.

An index rebuilt after an edit (:func:`pack_rows`) reuses the packed block of every run of rows
that is unchanged and whole; only blocks touching a changed row are packed again.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

import numpy as np
from lz4.block import compress as _lz4_compress, decompress as _lz4_decompress

BLOCK_BYTES = 8192  # a block closes once its bodies reach this many bytes (a larger body is a block alone)
_SEP = b"\x00"


def _pack(raw: bytes) -> bytes:
    return _lz4_compress(raw, mode="fast", store_size=False)


def _unpack(packed: bytes | memoryview, size: int) -> bytes:
    return _lz4_decompress(packed, uncompressed_size=size) if size else b""


class PackedBodies:
    """Row ``r``'s folded body (UTF-8 bytes) is ``self[r]``; :meth:`holding` searches many at once."""

    def __init__(self, blocks: Sequence[bytes | memoryview], block_sizes: Sequence[int], first_rows: Sequence[int],
                 sizes: Sequence[int]) -> None:
        self.data = b"".join(blocks)
        self.block_offsets = np.zeros(len(blocks) + 1, dtype=np.int64)  # block b is data[off[b]:off[b + 1]]
        np.cumsum(np.fromiter(map(len, blocks), dtype=np.int64, count=len(blocks)), out=self.block_offsets[1:])
        self.block_sizes = np.array(block_sizes, dtype=np.int64)  # its decompressed length
        self.first_rows = np.array(first_rows, dtype=np.int64)  # block b holds rows first_rows[b] .. first_rows[b + 1] - 1
        self.sizes = np.array(sizes, dtype=np.int64)  # per row its body's length
        self.block_of = np.repeat(np.arange(len(blocks), dtype=np.int32), np.diff(self.first_rows))
        # per row where its body starts in its block's text (bodies joined by one NUL)
        ends = np.cumsum(self.sizes + 1)
        self.starts = ends - self.sizes - 1
        self.starts -= (self.starts[self.first_rows[:-1]] if len(blocks) else self.starts[:0]).repeat(np.diff(self.first_rows))

    def __len__(self) -> int:
        return len(self.sizes)

    def block(self, b: int) -> bytes:
        """Block ``b``'s text: its rows' bodies joined by NUL."""
        return _unpack(memoryview(self.data)[self.block_offsets[b]:self.block_offsets[b + 1]], int(self.block_sizes[b]))

    def packed_block(self, b: int) -> memoryview:
        return memoryview(self.data)[self.block_offsets[b]:self.block_offsets[b + 1]]

    def __getitem__(self, row: int) -> bytes:
        start = int(self.starts[row])
        return self.block(int(self.block_of[row]))[start:start + int(self.sizes[row])]

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.rows(0, len(self)))

    def rows(self, first: int, last: int) -> list[bytes]:
        """The bodies of rows ``first`` .. ``last - 1``, each block decompressed once."""
        out: list[bytes] = []
        current, text = -1, b""
        for row, b, start, size in zip(range(first, last), self.block_of[first:last].tolist(),
                                       self.starts[first:last].tolist(), self.sizes[first:last].tolist()):
            if b != current:
                current, text = b, self.block(b)
            out.append(text[start:start + size])
        return out

    def nbytes(self) -> int:
        arrays = (self.block_offsets, self.block_sizes, self.first_rows, self.sizes, self.block_of, self.starts)
        return len(self.data) + sum(a.nbytes for a in arrays)

    def holding(self, rows: np.ndarray, needle: bytes) -> list[int]:
        """The ``rows`` whose body holds ``needle`` (which holds no NUL): each block holding a
        candidate decompressed once, each candidate's range searched in C."""
        rows = np.sort(rows)
        found: list[int] = []
        current, text = -1, b""
        ends = self.starts[rows] + self.sizes[rows]
        for row, b, start, end in zip(rows.tolist(), self.block_of[rows].tolist(), self.starts[rows].tolist(),
                                      ends.tolist()):
            if end - start < len(needle):
                continue
            if b != current:
                current, text = b, self.block(b)
            if text.find(needle, start, end) >= 0:
                found.append(row)
        return found


class Unpacked(Sequence[bytes]):
    """The bodies of a :class:`PackedBodies` decompressed as they are read (the signatures read
    them a chunk of rows at a time: never all of them at once)."""

    def __init__(self, bodies: PackedBodies) -> None:
        self._bodies = bodies

    def __len__(self) -> int:
        return len(self._bodies)

    def __getitem__(self, row: Any) -> Any:
        if isinstance(row, slice):
            first, last, step = row.indices(len(self))
            return self._bodies.rows(first, last)[::step] if step > 0 else [self._bodies[i] for i in range(first, last, step)]
        return self._bodies[row]


class _Packer:
    """Builds a :class:`PackedBodies` row by row, closing a block once it is big enough."""

    def __init__(self) -> None:
        self.blocks: list[bytes | memoryview] = []
        self.block_sizes: list[int] = []
        self.first_rows = [0]
        self.sizes: list[int] = []
        self._pending: list[bytes] = []
        self._pending_bytes = 0

    def add(self, body: bytes) -> None:
        self._pending.append(body)
        self.sizes.append(len(body))
        self._pending_bytes += len(body) + 1
        if self._pending_bytes >= BLOCK_BYTES:
            self._close()

    def add_block(self, packed: memoryview, size: int, sizes: list[int]) -> None:
        """A whole block of another index, its rows next in order."""
        self._close()
        self.blocks.append(packed)
        self.block_sizes.append(size)
        self.sizes.extend(sizes)
        self.first_rows.append(len(self.sizes))

    def _close(self) -> None:
        if self._pending:
            raw = _SEP.join(self._pending)
            self.blocks.append(_pack(raw))
            self.block_sizes.append(len(raw))
            self.first_rows.append(len(self.sizes))
            self._pending, self._pending_bytes = [], 0

    def finish(self) -> PackedBodies:
        self._close()
        return PackedBodies(self.blocks, self.block_sizes, self.first_rows, self.sizes)


def pack(bodies: Sequence[bytes]) -> PackedBodies:
    packer = _Packer()
    for body in bodies:
        packer.add(body)
    return packer.finish()


def pack_rows(sources: Sequence[int | bytes], previous: PackedBodies | None) -> PackedBodies:
    """The bodies of a rebuilt index: ``sources[r]`` is row ``r``'s folded body, or the row of
    ``previous`` it is copied from. A block of ``previous`` whose rows are all copied, whole and
    in order, is reused as it is; the other copied rows are decompressed and packed again."""
    packer = _Packer()
    current, text = -1, b""
    row, n = 0, len(sources)
    while row < n:
        source = sources[row]
        if isinstance(source, bytes) or previous is None:
            assert isinstance(source, bytes)
            packer.add(source)
            row += 1
            continue
        b = int(previous.block_of[source])
        first, last = int(previous.first_rows[b]), int(previous.first_rows[b + 1])
        if source == first and row + (last - first) <= n and \
                all(sources[row + k] == first + k for k in range(last - first)):
            packer.add_block(previous.packed_block(b), int(previous.block_sizes[b]),
                             previous.sizes[first:last].tolist())
            row += last - first
            continue
        if b != current:
            current, text = b, previous.block(b)
        start = int(previous.starts[source])
        packer.add(text[start:start + int(previous.sizes[source])])
        row += 1
    return packer.finish()
