"""Per-body bit signatures of the byte trigrams centred on a separator: what the token postings
cannot see, the join between two words.

Token postings (:mod:`token_postings`) tell which bodies hold each word of ``sql warehouse``, not
which hold them side by side. A body holding the query holds each of its trigrams whose middle
byte is a separator (``l w``), so a body whose signature lacks one of those bits cannot hold it.
Only trigrams centred on a separator are kept (a fifth of a prose body's positions), hashed into
2,048 bits = 256 bytes a body; the bodies of a build are signed together in numpy, a few MiB of
text at a time, never one Python call per body.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from knowspec.impl.okf.search.sorted_unique import sorted_unique
from knowspec.impl.okf.search.token_postings import SEPARATORS

BITS = 1 << 11
_SHIFT = np.uint32(32 - 11)  # the top bits of the 32-bit multiplicative hash
_GOLDEN = np.uint32(2654435761)
_IS_SEPARATOR = np.zeros(256, dtype=bool)
_IS_SEPARATOR[list(SEPARATORS)] = True
_JOIN = b"\xff"
_CHUNK_BYTES = 4 << 20
_CHUNK_BODIES = 4096


def _hashes(before: np.ndarray, middle: np.ndarray, after: np.ndarray) -> np.ndarray:
    codes = (before.astype(np.uint32) << np.uint32(16)) | (middle.astype(np.uint32) << np.uint32(8)) | after
    return (codes * _GOLDEN) >> _SHIFT


def sign(bodies: Sequence[bytes | memoryview]) -> np.ndarray:
    """The signatures of ``bodies``: one row of ``BITS // 8`` bytes each."""
    out = np.zeros((len(bodies), BITS // 8), dtype=np.uint8)
    first = 0
    while first < len(bodies):
        last, size = first, 0
        while last < len(bodies) and (last == first or (size < _CHUNK_BYTES and last - first < _CHUNK_BODIES)):
            size += len(bodies[last]) + 1
            last += 1
        _sign_chunk(out[first:last], bodies[first:last])
        first = last
    return out


def _sign_chunk(out: np.ndarray, bodies: Sequence[bytes | memoryview]) -> None:
    # each body between two bytes that are no separator (and never in UTF-8): no trigram is
    # centred on a join, and one ending or starting at a join sets the same bit whatever the neighbour
    data = np.frombuffer(_JOIN + _JOIN.join(bodies) + _JOIN, dtype=np.uint8)
    lengths = np.fromiter(map(len, bodies), dtype=np.int64, count=len(bodies))
    # the row of every byte (a join byte counts with the body after it; the last one with none)
    row_of = np.repeat(np.arange(len(bodies) + 1, dtype=np.int16), np.append(lengths + 1, 1))
    middle = np.flatnonzero(_IS_SEPARATOR[data[1:-1]]) + 1
    rows = row_of[middle]
    hashes = _hashes(data[middle - 1], data[middle], data[middle + 1])
    # bit ``h`` of a row is bit ``128 >> (h % 8)`` of its byte ``h // 8``: packbits' big-endian order
    bits = np.zeros((len(bodies), BITS), dtype=bool)
    bits[rows, hashes] = True
    out |= np.packbits(bits, axis=1)


def query_bits(needle: bytes) -> list[tuple[int, int]]:
    """``(column, mask)`` of each trigram of ``needle`` centred on a separator."""
    data = np.frombuffer(needle, dtype=np.uint8)
    if len(data) < 3:
        return []
    middle = np.flatnonzero(_IS_SEPARATOR[data[1:-1]]) + 1
    hashes = sorted_unique(_hashes(data[middle - 1], data[middle], data[middle + 1]))
    return [(h >> 3, 128 >> (h & 7)) for h in hashes.tolist()]


def narrow(signatures: np.ndarray, rows: np.ndarray, needle: bytes) -> np.ndarray:
    """The ``rows`` whose signature has every bit of ``needle`` (those that may hold it)."""
    for column, mask in query_bits(needle):
        if not len(rows):
            break
        rows = rows[(signatures[rows, column] & mask) != 0]
    return rows
