"""The ``array`` typecode of the stored row and token ids of the search index: two bytes an id
when they fit.

A bundle of fewer than 65,535 concepts (the default limit is 10,000) needs no more than 16 bits a
row id, nor a vocabulary of fewer than 65,535 tokens a token id: databricks-okf's postings of its
bodies are 1.25 million row ids (5.0 MB as 32-bit, 2.5 MB as 16-bit) and its vocabulary trigrams
list 390,000 token ids. The bound leaves room for ``id + 1`` (an offset's end) in the same width.
"""

from __future__ import annotations

from array import array

SMALL_IDS = 0xFFFF  # ids below this count fit 16 bits, and so does the last id + 1
WIDE = "I" if array("I").itemsize == 4 else "L"  # 32 bits on every platform Python supports


def id_typecode(count: int) -> str:
    """The unsigned typecode that holds the ids ``0 .. count - 1`` (and ``count``)."""
    return "H" if count < SMALL_IDS else WIDE
