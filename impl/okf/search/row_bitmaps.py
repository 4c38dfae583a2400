"""Sets of index rows as Python integers: bit ``r`` set when row ``r`` is in the set.

The search index answers a query with unions, intersections and differences of row sets, then
counts them and takes the first few rows. On an ``int`` each of those is one C-level pass over
``rows / 64`` machine words (``|``, ``&``, ``& ~``, ``bit_count``), so a query's cost does not
grow with its hits the way a set or list of row numbers does, and the server needs no array
library for it (numpy alone is 15 MiB of an OKF server's memory). Moving between a list of rows
and a bitmap goes through one byte per row, also in C: ``int(text, 2)`` reads a binary numeral in
linear time, ``bin`` writes one.
"""

from __future__ import annotations

from collections import deque
from itertools import compress, repeat
from typing import Iterable, Iterator

_ONE = ord("1")
_DIGIT_TO_FLAG = bytes.maketrans(b"01", b"\x00\x01")


def of_rows(rows: Iterable[int], n_rows: int) -> int:
    """The bitmap of ``rows`` (each below ``n_rows``; repeats allowed)."""
    if not n_rows:
        return 0
    digits = bytearray(b"0") * n_rows
    deque(map(digits.__setitem__, rows, repeat(_ONE)), maxlen=0)
    digits.reverse()  # the numeral's last digit is bit 0
    return int(digits, 2)


def of_bytes(data: bytes | memoryview) -> int:
    """The bitmap stored as little-endian bytes (:func:`to_bytes`)."""
    return int.from_bytes(data, "little")


def to_bytes(bitmap: int, n_rows: int) -> bytes:
    """``bitmap`` as ``ceil(n_rows / 8)`` little-endian bytes."""
    return bitmap.to_bytes((n_rows + 7) // 8, "little")


def every_row(n_rows: int) -> int:
    return (1 << n_rows) - 1


def rows(bitmap: int) -> Iterator[int]:
    """The rows of ``bitmap``, ascending."""
    if not bitmap:
        return iter(())
    flags = bin(bitmap)[:1:-1].encode().translate(_DIGIT_TO_FLAG)  # bit 0 first
    return compress(range(len(flags)), flags)


def first_rows(bitmap: int, count: int) -> list[int]:
    """The ``count`` lowest rows of ``bitmap``, ascending: one step per row taken, not per row held."""
    out: list[int] = []
    while bitmap and len(out) < count:
        lowest = bitmap & -bitmap
        out.append(lowest.bit_length() - 1)
        bitmap ^= lowest
    return out
