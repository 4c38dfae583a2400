"""Text normalisation and word tokens shared by the search tools.

The OKF tools compare text after Unicode *full* case folding followed by NFC (``cases.Fold`` then
``norm.NFC`` upstream). Python's ``str.casefold`` implements the same full folding (``ß`` → ``ss``,
``ﬃ`` → ``ffi``, no Turkic rules), so both sides of every comparison go through :func:`case_fold`.

Word tokens are maximal runs of Unicode letters, numbers and marks (general categories ``L*``,
``N*``, ``M*``); everything else separates tokens. The standard ``re`` module has no ``\\p{..}``
classes, so the character class is built once from ``unicodedata`` on first use.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from functools import lru_cache
from typing import Iterator, NamedTuple


def case_fold(text: str) -> str:
    """Unicode full case folding, then NFC: the one comparison form of search text."""
    folded = text.casefold()
    if folded.isascii():
        return folded
    return unicodedata.normalize("NFC", folded)


def _word_ranges() -> list[tuple[int, int]]:
    """Inclusive code-point ranges whose general category is a letter, number or mark."""
    ranges: list[tuple[int, int]] = []
    start = -1
    for cp in range(sys.maxunicode + 1):
        is_word = unicodedata.category(chr(cp))[0] in "LNM"
        if is_word and start < 0:
            start = cp
        elif not is_word and start >= 0:
            ranges.append((start, cp - 1))
            start = -1
    if start >= 0:
        ranges.append((start, sys.maxunicode))
    return ranges


def _class_char(cp: int) -> str:
    return "\\" + chr(cp) if chr(cp) in "\\]^-[" else chr(cp)


def _class(ranges: list[tuple[int, int]]) -> str:
    parts = [_class_char(lo) if lo == hi else f"{_class_char(lo)}-{_class_char(hi)}" for lo, hi in ranges]
    return "[" + "".join(parts) + "]"


@lru_cache(maxsize=1)
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(BMP-only pattern, full pattern). ``re`` bitmaps BMP classes but scans astral ranges
    linearly, so text without astral characters uses the ten-times-faster BMP pattern."""
    ranges = _word_ranges()
    bmp = [(lo, min(hi, 0xFFFF)) for lo, hi in ranges if lo <= 0xFFFF]
    return re.compile(_class(bmp) + "+"), re.compile(_class(ranges) + "+")


_ASTRAL = re.compile("[\U00010000-\U0010FFFF]")


def word_pattern(text: str) -> re.Pattern[str]:
    """A compiled pattern matching one maximal word token (letters, numbers, marks) in ``text``."""
    bmp, full = _patterns()
    return full if _ASTRAL.search(text) else bmp


def has_letter_or_number(text: str) -> bool:
    """True when the text holds at least one Unicode letter or number (marks alone do not count)."""
    return any(unicodedata.category(ch)[0] in "LN" for ch in text)


class Token(NamedTuple):
    """A word token of the original text: its span (in code points) and its folded form."""

    start: int
    end: int
    norm: str


def words(text: str) -> list[str]:
    """The word tokens of ``text`` after folding: ``case_fold`` first, then split (query and corpus)."""
    folded = case_fold(text)
    return word_pattern(folded).findall(folded)


def raw_tokens(text: str) -> Iterator[Token]:
    """Word tokens of the unfolded text with their spans; used to place snippets in source text."""
    for m in word_pattern(text).finditer(text):
        yield Token(m.start(), m.end(), case_fold(m.group()))


def unique_terms(text: str) -> list[str]:
    """Distinct folded words of a query in first-occurrence order."""
    seen: dict[str, None] = {}
    for w in words(text):
        seen.setdefault(w, None)
    return list(seen)
