"""Per-body bit signatures of the byte grams centred on a separator: what the token postings
cannot see, the join between two words.

Token postings (:mod:`token_postings`) tell which bodies hold each word of ``sql warehouse``, not
which hold them side by side. A body holding the query holds each of its grams whose middle byte
is a separator, so a body whose signature lacks one of their bits cannot hold it. Two widths are
signed: the trigram (``l w``), which a query as short as ``a b`` has, and the 5-gram (``ql wa``),
which tells far more joins apart (a trigram such as ``e t`` is in most English bodies;
databricks-okf's ``create table`` kept 1,251 of 1,256 candidates on trigrams, 600 with 5-grams
too; a 50k-concept bundle's ``merge partition`` 46,752 of 46,959, then 8,614). Only grams centred on
a separator are kept (a fifth of a prose body's positions), each width hashed into its own 2,048
bits (so a short query's trigrams are told apart as well as with trigrams alone): 512 bytes a
body. The bodies of a build are signed together in numpy, a few hundred KiB of text at a time,
never one Python call per body.
"""

from __future__ import annotations

from typing import Iterator, Protocol, Sequence

import numpy as np

from knowspec.impl.okf.search.sorted_unique import sorted_unique
from knowspec.impl.okf.search.token_postings import SEPARATORS

BITS = 2 << 11  # the trigrams' 2,048 bits, then the 5-grams'
_SHIFT = np.uint32(32 - 11)  # the top bits of the 32-bit multiplicative hash
_GOLDEN = np.uint32(2654435761)
_SHIFT_5 = np.uint64(64 - 11)  # the same for the 5-grams' 64-bit hash
_GOLDEN_5 = np.uint64(0x9E3779B97F4A7C15)
_LOW_3, _LOW_5 = np.uint64(0xFF_FFFF), np.uint64(0xFF_FFFF_FFFF)
_SEPARATOR_FLAGS = bytes(b in SEPARATORS for b in range(256))  # bytes.translate's table: 1 a separator, else 0
_JOIN = b"\xff\xff"
# Text signed in one numpy pass. Its arrays (eight bytes a separator, a bit per body and gram
# slot) stay below the server's fixed mmap threshold (native_memory.py), so every pass reuses the
# heap: 4 MiB passes had each array mapped, faulted in and unmapped (databricks-okf: 0.63 s to
# sign, 0.2 s in 256 KiB passes).
CHUNK_BYTES = 256 << 10
_CHUNK_BODIES = 256


def _words(text: bytes) -> np.ndarray:
    """The 8 bytes from every offset of ``text`` on, as one little-endian integer each: a gram's
    bytes are then one gather and one mask, not one gather per byte."""
    padded = text + bytes(7)
    return np.ndarray((len(text),), dtype="<u8", buffer=padded, strides=(1,))


def _gram_bits(trigrams: np.ndarray, fives: np.ndarray) -> np.ndarray:
    """The bits of the trigrams (3 bytes each, little-endian) and of the 5-grams (5 bytes each)."""
    return np.concatenate([(((trigrams & _LOW_3).astype(np.uint32) * _GOLDEN) >> _SHIFT).astype(np.int64),
                           (((fives & _LOW_5) * _GOLDEN_5) >> _SHIFT_5).astype(np.int64) + BITS // 2])


def _separators(text: bytes) -> np.ndarray:
    """Per byte of ``text``: is it a separator."""
    return np.frombuffer(text.translate(_SEPARATOR_FLAGS), dtype=bool)


class Bodies(Protocol):
    """What :func:`sign` reads: a count, then the bodies in order (a list, or a store that
    decompresses them one at a time)."""

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[bytes]: ...


def sign(bodies: Bodies | Sequence[bytes | memoryview]) -> np.ndarray:
    """The signatures of ``bodies``: one row of ``BITS // 8`` bytes each. The bodies are read in
    order, one pass at a time (a store that decompresses them never holds them all at once)."""
    out = np.zeros((len(bodies), BITS // 8), dtype=np.uint8)
    first, chunk, size = 0, [], 0
    for body in bodies:
        chunk.append(body)
        size += len(body) + len(_JOIN)
        if size >= CHUNK_BYTES or len(chunk) >= _CHUNK_BODIES:
            _sign_chunk(out[first:first + len(chunk)], chunk)
            first, chunk, size = first + len(chunk), [], 0
    if chunk:
        _sign_chunk(out[first:], chunk)
    return out


def _sign_chunk(out: np.ndarray, bodies: Sequence[bytes | memoryview]) -> None:
    # each body between two bytes that are no separator (and never in UTF-8): no gram is centred
    # on a join, and one reaching into a join sets the same bit whatever the neighbouring body
    text = _JOIN + _JOIN.join(bodies) + _JOIN
    lengths = np.fromiter(map(len, bodies), dtype=np.int64, count=len(bodies))
    # the row of every byte (the join bytes count with the body after them; the last ones with none)
    row_of = np.repeat(np.arange(len(bodies) + 1, dtype=np.int16), np.append(lengths + 2, 2))
    middle = np.flatnonzero(_separators(text)[2:-2]) + 2
    rows = row_of[middle].astype(np.int64)
    grams = _words(text)[middle - 2]  # a 5-gram's bytes, the trigram's in the middle of them
    # bit ``h`` of a row is bit ``128 >> (h % 8)`` of its byte ``h // 8``: packbits' big-endian order
    bits = np.zeros(len(bodies) * BITS, dtype=bool)
    bits[np.concatenate([rows, rows]) * BITS + _gram_bits(grams >> np.uint64(8), grams)] = True
    out |= np.packbits(bits.reshape(len(bodies), BITS), axis=1)


def query_bits(needle: bytes) -> list[tuple[int, int]]:
    """``(column, mask)`` of each trigram and 5-gram of ``needle`` centred on a separator."""
    if len(needle) < 3:
        return []
    middle = np.flatnonzero(_separators(needle)[1:-1]) + 1
    wide = middle[(middle >= 2) & (middle < len(needle) - 2)]
    words = _words(needle)
    hashes = sorted_unique(_gram_bits(words[middle - 1], words[wide - 2]))
    return [(h >> 3, 128 >> (h & 7)) for h in hashes.tolist()]


def narrow(signatures: np.ndarray, rows: np.ndarray, needle: bytes) -> np.ndarray:
    """The ``rows`` whose signature has every bit of ``needle`` (those that may hold it)."""
    for column, mask in query_bits(needle):
        if not len(rows):
            break
        rows = rows[(signatures[rows, column] & mask) != 0]
    return rows
