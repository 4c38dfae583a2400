"""The bodies' boundary signatures made in bulk with numpy (the rule: :mod:`boundary_signatures`).

Runs in the short-lived helper process of :mod:`index_helper`, never in the server: the bodies
of a build are signed a few hundred KiB of text at a time, never one Python call per body (a
pure-Python signer took 4.3 s on databricks-okf against 0.14 s here), straight into the index's
column bitmaps.
"""

from __future__ import annotations

from typing import Iterator, Protocol, Sequence

import numpy as np

from knowspec.impl.okf.search.boundary_signatures import BITS, GOLDEN_3, GOLDEN_5, HASH_BITS, JOIN as _JOIN
from knowspec.impl.okf.search.token_postings import SEPARATORS

_SHIFT = np.uint32(32 - HASH_BITS)  # the top bits of the 32-bit multiplicative hash
_GOLDEN = np.uint32(GOLDEN_3)
_SHIFT_5 = np.uint64(64 - HASH_BITS)  # the same for the 5-grams' 64-bit hash
_GOLDEN_5 = np.uint64(GOLDEN_5)
_LOW_3, _LOW_5 = np.uint64(0xFF_FFFF), np.uint64(0xFF_FFFF_FFFF)
_SEPARATOR_FLAGS = bytes(b in SEPARATORS for b in range(256))  # bytes.translate's table: 1 a separator, else 0
# Text signed in one numpy pass. Its arrays (eight bytes a separator, a bit per body and gram
# slot) stay below glibc's mmap threshold, so every pass reuses the heap: 4 MiB passes had each
# array mapped, faulted in and unmapped (databricks-okf: 0.63 s to sign, 0.2 s in 256 KiB passes).
CHUNK_BYTES = 256 << 10
_CHUNK_BODIES = 256


def _words(text: bytes) -> np.ndarray:
    """The 8 bytes from every offset of ``text`` on, as one little-endian integer each: a gram's
    bytes are then one gather and one mask, not one gather per byte."""
    padded = text + bytes(7)
    return np.ndarray((len(text),), dtype="<u8", buffer=padded, strides=(1,))


def _gram_bits(trigrams: np.ndarray, fives: np.ndarray) -> np.ndarray:
    """The bits of the trigrams (3 bytes each, little-endian) and of the 5-grams (5 bytes each):
    ``trigram_bit`` and ``five_gram_bit`` of :mod:`boundary_signatures`, on whole arrays."""
    return np.concatenate([(((trigrams & _LOW_3).astype(np.uint32) * _GOLDEN) >> _SHIFT).astype(np.int64),
                           (((fives & _LOW_5) * _GOLDEN_5) >> _SHIFT_5).astype(np.int64) + BITS // 2])


def _separators(text: bytes) -> np.ndarray:
    """Per byte of ``text``: is it a separator."""
    return np.frombuffer(text.translate(_SEPARATOR_FLAGS), dtype=bool)


class Bodies(Protocol):
    """What :func:`sign` reads: a count, then the bodies in order (a list, or a reader that
    decompresses them one at a time)."""

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[bytes]: ...


def sign(bodies: Bodies | Sequence[bytes | memoryview]) -> bytes:
    """The signatures of ``bodies`` by column, as the index keeps them: for each of the ``BITS``
    bits, the little-endian bitmap of the bodies that have it (``ceil(len(bodies) / 8)`` bytes
    each), one after the other. The bodies are read in order, a pass of a multiple of 8 of them
    at a time (each pass fills whole bytes of every column), so a reader that decompresses them
    never holds them all at once."""
    n_rows = len(bodies)
    out = np.zeros((BITS, (n_rows + 7) // 8), dtype=np.uint8)
    first, chunk, size = 0, [], 0
    for body in bodies:
        chunk.append(body)
        size += len(body) + len(_JOIN)
        if (size >= CHUNK_BYTES or len(chunk) >= _CHUNK_BODIES) and len(chunk) % 8 == 0:
            _sign_chunk(out, first, chunk)
            first, chunk, size = first + len(chunk), [], 0
    if chunk:
        _sign_chunk(out, first, chunk)
    return out.tobytes()


def _sign_chunk(out: np.ndarray, first: int, bodies: Sequence[bytes | memoryview]) -> None:
    """Set the bits of ``bodies``, rows ``first`` on (a multiple of 8), in the columns ``out``."""
    # each body between two bytes that are no separator (and never in UTF-8): no gram is centred
    # on a join, and one reaching into a join sets the same bit whatever the neighbouring body
    text = _JOIN + _JOIN.join(bodies) + _JOIN
    lengths = np.fromiter(map(len, bodies), dtype=np.int64, count=len(bodies))
    # the row of every byte (the join bytes count with the body after them; the last ones with none)
    row_of = np.repeat(np.arange(len(bodies) + 1, dtype=np.int16), np.append(lengths + 2, 2))
    middle = np.flatnonzero(_separators(text)[2:-2]) + 2
    rows = row_of[middle].astype(np.int64)
    grams = _words(text)[middle - 2]  # a 5-gram's bytes, the trigram's in the middle of them
    bits = np.zeros(BITS * len(bodies), dtype=bool)  # bit-major: a column's rows side by side
    bits[_gram_bits(grams >> np.uint64(8), grams) * len(bodies) + np.concatenate([rows, rows])] = True
    packed = np.packbits(bits.reshape(BITS, len(bodies)), axis=1, bitorder="little")
    out[:, first // 8:first // 8 + packed.shape[1]] |= packed
