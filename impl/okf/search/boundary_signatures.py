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
body.

The index keeps them by column: for each of the ``BITS`` bits, a bitmap of the bodies that have
it (:mod:`row_bitmaps`), so narrowing candidates is one AND per bit of the query. This module is
the rule and the query side; the bodies are signed in bulk by :mod:`boundary_signing` (numpy), in a
short-lived helper process (:mod:`index_helper`), so the server itself never loads numpy.
"""

from __future__ import annotations

import re

from knowspec.impl.okf.search import row_bitmaps
from knowspec.impl.okf.search.token_postings import SEPARATORS

BITS = 2 << 11  # the trigrams' 2,048 bits, then the 5-grams'
HASH_BITS = 11
GOLDEN_3 = 2654435761  # 32-bit multiplicative hash of a trigram's 3 bytes (little-endian)
GOLDEN_5 = 0x9E3779B97F4A7C15  # 64-bit multiplicative hash of a 5-gram's 5 bytes (little-endian)
JOIN = b"\xff\xff"  # the frame a body is signed in: never a separator, never in UTF-8
# An incremental rebuild signs at most this many changed bodies in process (a few ms); more, and
# the next query with a separator has the helper sign every body again.
SPLICE_MAX_ROWS = 64
_SEPARATOR = re.compile(b"[" + re.escape(SEPARATORS) + b"]")


def trigram_bit(gram: int) -> int:
    """The bit of a trigram (its 3 bytes as a little-endian integer)."""
    return ((gram * GOLDEN_3) & 0xFFFF_FFFF) >> (32 - HASH_BITS)


def five_gram_bit(gram: int) -> int:
    """The bit of a 5-gram (its 5 bytes as a little-endian integer), after the trigrams' bits."""
    return (((gram * GOLDEN_5) & 0xFFFF_FFFF_FFFF_FFFF) >> (64 - HASH_BITS)) + BITS // 2


def query_bits(needle: bytes) -> list[int]:
    """The bits of each trigram and 5-gram of ``needle`` centred on a separator, ascending."""
    bits = set()
    for match in _SEPARATOR.finditer(needle, 1, max(1, len(needle) - 1)):
        middle = match.start()
        bits.add(trigram_bit(int.from_bytes(needle[middle - 1:middle + 2], "little")))
        if 2 <= middle < len(needle) - 2:
            bits.add(five_gram_bit(int.from_bytes(needle[middle - 2:middle + 3], "little")))
    return sorted(bits)


def narrow(columns: bytes, n_rows: int, rows: int, needle: bytes) -> int:
    """The ``rows`` (a bitmap) whose signature has every bit of ``needle`` (those that may hold
    it). ``columns`` holds ``BITS`` bitmaps of ``n_rows`` rows, one after the other."""
    stride = (n_rows + 7) // 8
    view = memoryview(columns)
    for bit in query_bits(needle):
        if not rows:
            break
        rows &= row_bitmaps.of_bytes(view[bit * stride:(bit + 1) * stride])
    return rows


def body_bits(body: bytes) -> list[int]:
    """The bits of a body's signature, as :mod:`boundary_signing` sets them (a body is signed
    between two ``JOIN`` frames): for the few bodies an incremental rebuild signs in process."""
    return query_bits(JOIN + body + JOIN)


def splice(columns: bytes, n_rows: int, fresh: dict[int, list[int]]) -> bytes:
    """``columns`` with the signature of each row of ``fresh`` replaced by its bits."""
    stride = (n_rows + 7) // 8
    out = bytearray(columns)
    for row, bits in fresh.items():
        at, mask = row // 8, 1 << (row % 8)
        for bit in range(BITS):
            out[bit * stride + at] &= ~mask & 0xFF
        for bit in bits:
            out[bit * stride + at] |= mask
    return bytes(out)
