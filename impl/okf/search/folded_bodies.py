"""Every row's folded body, kept LZ4-compressed in one buffer and decompressed where a query needs it.

A query with a separator (``sql warehouse``) verifies its candidate bodies byte for byte, so the
index keeps every folded body: reading the files back instead (a disk read, a hash check and a
fold per candidate) made such queries at 50k concepts 2-3x slower. Kept plain, the bodies were
the largest part of an OKF server's memory (databricks-okf: 28 MiB of 172). LZ4's block format
keeps them in 14 MiB and decompresses them at about 1 GB/s, so verifying a candidate costs about
2.3x a plain ``bytes.find`` (a hit no longer stops the work at its first occurrence: the whole body
is decompressed); the 5-gram signatures (:mod:`boundary_signatures`) keep that many fewer bodies to
verify. zstd and zlib keep the bodies smaller (10 MiB) but decompress about 2x and 5x slower.

One buffer for all rows, not one object per body: a single allocation the allocator hands back
whole, not thousands scattered among the heap's other objects (which kept freed pages pinned).
"""

from __future__ import annotations

from typing import Iterator, Sequence

import lz4.block
import numpy as np


def compress(folded: bytes | memoryview) -> bytes:
    """The stored form of one folded body (its length comes first, so it decompresses alone)."""
    return lz4.block.compress(folded)


class FoldedBodies:
    """The folded bodies of an index's rows, each stored as :func:`compress` made it."""

    def __init__(self, stored: Sequence[bytes | memoryview]) -> None:
        self.data = b"".join(stored)
        self.offsets = np.zeros(len(stored) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, stored), dtype=np.int64, count=len(stored)), out=self.offsets[1:])

    @classmethod
    def of(cls, folded: Sequence[bytes]) -> "FoldedBodies":
        return cls([compress(body) for body in folded])

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, row: int) -> bytes:
        """Row ``row``'s folded body (UTF-8 bytes)."""
        return lz4.block.decompress(self.stored(row))

    def __iter__(self) -> Iterator[bytes]:
        return (self[row] for row in range(len(self)))

    def stored(self, row: int) -> memoryview:
        """Row ``row``'s body as stored (compressed), without a copy: what an incremental
        rebuild carries over for an unchanged concept."""
        return memoryview(self.data)[self.offsets[row]:self.offsets[row + 1]]

    def nbytes(self) -> int:
        return len(self.data) + self.offsets.nbytes

    def holding(self, rows: np.ndarray, needle: bytes) -> list[int]:
        """The ``rows`` whose body holds ``needle``."""
        whole, decompress = memoryview(self.data), lz4.block.decompress
        starts, ends = self.offsets[rows].tolist(), self.offsets[rows + 1].tolist()
        return [row for row, start, end in zip(rows.tolist(), starts, ends) if needle in decompress(whole[start:end])]
