"""Sets of index rows as Python integers: bit ``r`` set when row ``r`` is in the set.

The search index answers a query with unions, intersections and differences of row sets, then
counts them and takes the first few rows. On an ``int`` each of those is one C-level pass over
``rows / 64`` machine words (``|``, ``&``, ``& ~``, ``bit_count``), so a query's cost does not
grow with its hits the way a set or list of row numbers does, and the server needs no array
library for it (numpy alone is 15 MiB of an OKF server's memory). Moving between a list of rows
and a bitmap goes through one byte per row, also in C: ``int(text, 2)`` reads a binary numeral in
linear time, ``bin`` writes one. That costs the same for one row as for thousands, so a set of few
rows (most of a selective query's) goes through the bitmap's bytes instead, a step per row.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sized
from itertools import compress, repeat
from typing import Iterable, Iterator

_ONE = ord("1")
# Under one row in this many, of_rows sets bits one by one and rows reads non-zero bytes: the
# numeral of one byte per row they go through otherwise costs the same for one row or thousands.
SPARSE_SHARE = 32
_DIGIT_TO_FLAG = bytes.maketrans(b"01", b"\x00\x01")
_NON_ZERO_BYTE = re.compile(rb"[^\x00]")
_BITS_OF_BYTE = [tuple(bit for bit in range(8) if value >> bit & 1) for value in range(256)]


def of_rows(rows: Iterable[int], n_rows: int) -> int:
    """The bitmap of ``rows`` (each below ``n_rows``; repeats allowed).

    Few rows (under one in ``SPARSE_SHARE``) set their bits in ``n_rows / 8`` bytes, one step per
    row; more go through the numeral of one byte per row, which costs the same whatever they are
    (50,000 rows: 180 us for one row or a hundred, against 8-26 us)."""
    if not n_rows:
        return 0
    listed = rows if isinstance(rows, Sized) else list(rows)
    if len(listed) * SPARSE_SHARE < n_rows:
        data = bytearray((n_rows + 7) // 8)
        for row in listed:
            data[row >> 3] |= 1 << (row & 7)
        return int.from_bytes(data, "little")
    digits = bytearray(b"0") * n_rows
    deque(map(digits.__setitem__, listed, repeat(_ONE)), maxlen=0)
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
    """The rows of ``bitmap``, ascending.

    Few rows (under one bit in ``SPARSE_SHARE`` up to the highest) are read from the bitmap's
    non-zero bytes; more from its binary numeral, one byte per row up to the highest, which costs
    the same whatever they are (rows up to 50,000: 1.1-1.6 ms for eleven rows or a hundred,
    against 0.08-0.19 ms)."""
    if not bitmap:
        return iter(())
    width = bitmap.bit_length()
    if bitmap.bit_count() * SPARSE_SHARE < width:
        return iter(_rows_of_bytes(bitmap.to_bytes((width + 7) // 8, "little")))
    flags = bin(bitmap)[:1:-1].encode().translate(_DIGIT_TO_FLAG)  # bit 0 first
    return compress(range(len(flags)), flags)


def _rows_of_bytes(data: bytes) -> list[int]:
    """The rows of a bitmap's little-endian bytes, byte by non-zero byte."""
    found: list[int] = []
    for byte in _NON_ZERO_BYTE.finditer(data):
        base = byte.start() << 3
        found += [base + bit for bit in _BITS_OF_BYTE[data[byte.start()]]]
    return found


def first_rows(bitmap: int, count: int) -> list[int]:
    """The ``count`` lowest rows of ``bitmap``, ascending: one step per row taken, not per row held."""
    out: list[int] = []
    while bitmap and len(out) < count:
        lowest = bitmap & -bitmap
        out.append(lowest.bit_length() - 1)
        bitmap ^= lowest
    return out
