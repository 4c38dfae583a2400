"""Turkish and Latin accent folding: one rule for every pool storage.

The seed folds Turkish and Latin accents before full-text matching (PostgreSQL's ``doc$fold``,
Firebird's in-memory index and SQLite's indexed text all go through this one function), so the
same query finds the same topics whatever the storage. ``fold`` lower-cases, maps the letters
that Unicode decomposition leaves alone (``ı``, ``ß``, ``œ``, ``æ``, ``ø``, ``ł``, ``đ``, ``ð``,
``þ``) and drops combining marks (``ş → s``, ``ğ → g``, ``â → a``, ``İ → i``).

It never inserts or removes a token separator: a letter maps to letters, a combining mark is
dropped, anything else is kept. That keeps token counts identical between the original text and
its folded copy, which the SQLite external-content FTS index relies on for snippets.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

# Letters without a canonical decomposition, mapped as PostgreSQL's unaccent does.
SPECIAL_LETTERS: dict[str, str] = {
    "ı": "i", "İ": "i", "I": "i",
    "ß": "ss", "ẞ": "ss",
    "œ": "oe", "Œ": "oe",
    "æ": "ae", "Æ": "ae",
    "ø": "o", "Ø": "o",
    "ł": "l", "Ł": "l",
    "đ": "d", "Đ": "d",
    "ð": "d", "Ð": "d",
    "þ": "th", "Þ": "th",
    "ŀ": "l", "Ŀ": "l",
    "ħ": "h", "Ħ": "h",
    "ŧ": "t", "Ŧ": "t",
    "ﬁ": "fi", "ﬂ": "fl", "ﬀ": "ff", "ﬃ": "ffi", "ﬄ": "ffl",
}


@lru_cache(maxsize=4096)
def fold_char(ch: str) -> str:
    """The folded form of one character ('' for a combining mark)."""
    special = SPECIAL_LETTERS.get(ch)
    if special is not None:
        return special
    if ch.isascii():
        return ch.lower()
    if unicodedata.category(ch) == "Mn":
        return ""
    base = unicodedata.normalize("NFD", ch)
    kept = "".join(c for c in base if unicodedata.category(c) != "Mn")
    if not kept:
        return ""
    if any(unicodedata.category(c).startswith("M") for c in kept):
        # A spacing mark (Tamil, Balinese vowels) would become a token separator: keep the letter.
        return ch.lower() if len(ch.lower()) == 1 else ch
    lowered = kept.lower()
    # str.lower may expand (e.g. 'İ' -> 'i̇'); drop any mark it introduces.
    return "".join(c for c in lowered if unicodedata.category(c) != "Mn")


class _FoldTable(dict):
    """``str.translate`` table that computes and remembers each character's fold on first use."""

    def __missing__(self, code: int) -> str:
        value = fold_char(chr(code))
        self[code] = value
        return value


_TABLE = _FoldTable()


def fold(text: str | None) -> str:
    """Lower-case ``text`` and strip Turkish / Latin accents (``None`` folds to '')."""
    if not text:
        return ""
    if text.isascii():
        return text.lower()
    return text.translate(_TABLE)


def ascii_lower(text: str) -> str:
    """ASCII-only lower-casing: the seed compares ACL principals this way."""
    return text.translate(_ASCII_LOWER)


_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}
