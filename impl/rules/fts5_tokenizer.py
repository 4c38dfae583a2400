"""SQLite FTS5's ``unicode61`` tokenizer (``remove_diacritics 2``) as a pure function.

Split from ``rules.fts5`` (bm25 and snippet) so that code which only needs FTS5's tokens (the
PostgreSQL storage's folded columns, index builders) imports no ranking. ASCII letters and digits
are token characters (lower-cased), other ASCII separates; a non-ASCII code point's class
(separator, token character and its folded form, or a diacritic dropped inside a token) is read
once from the bundled SQLite itself (an in-memory FTS5 table and ``fts5vocab``), so its separator
table and fold map are SQLite's by construction.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import unicodedata
from typing import NamedTuple

from knowspec.impl.rules.fold import fold_char

_SEPARATOR = None  # class of a code point that ends (or never starts) a token
_ASCII: dict[int, str | None] = {
    c: (chr(c).lower() if chr(c).isalnum() else _SEPARATOR) for c in range(128)
}
_CLASSES: dict[int, str | None] = {}
_LOCK = threading.Lock()


class Token(NamedTuple):
    """One token: its folded text and its ``[start, end)`` character span in the source text."""

    text: str
    start: int
    end: int


def _probe_sqlite(code_points: list[int]) -> dict[int, str | None]:
    """Ask SQLite's unicode61 tokenizer how it treats each code point (``q<c>q`` per row)."""
    con = sqlite3.connect(":memory:")
    try:
        con.execute("create virtual table t using fts5(x, tokenize = 'unicode61 remove_diacritics 2')")
        con.execute("create virtual table v using fts5vocab(t, 'instance')")
        con.executemany("insert into t(rowid, x) values (?, ?)", [(cp, f"q{chr(cp)}q") for cp in code_points])
        terms: dict[int, list[str]] = {cp: [] for cp in code_points}
        for doc, term in con.execute("select doc, term from v order by doc, offset"):
            terms[doc].append(term)
    finally:
        con.close()
    out: dict[int, str | None] = {}
    for cp, found in terms.items():
        if len(found) == 1 and found[0].startswith("q") and found[0].endswith("q") and len(found[0]) >= 2:
            out[cp] = found[0][1:-1]  # '' = a diacritic dropped inside a token
        else:
            out[cp] = _SEPARATOR
    return out


def _fallback_class(cp: int) -> str | None:
    """Used only when this Python's SQLite lacks FTS5: Unicode categories L*, N*, Co."""
    ch = chr(cp)
    cat = unicodedata.category(ch)
    if cat[0] in "LN" or cat == "Co":
        base = "".join(c for c in unicodedata.normalize("NFD", ch.lower()) if not unicodedata.combining(c))
        return base[:1] or ch
    if cat == "Mn" and 0x300 <= cp <= 0x36F:
        return ""
    return _SEPARATOR


_KIND: dict[int, str] = {}   # code point -> 'a' token character, 'd' diacritic, ' ' separator
_FOLDED: dict[int, str] = {}  # code point -> its folded form inside a token
_SPLIT: dict[int, str] = {}   # code point -> folded form, '' for a diacritic, ' ' for a separator
_RUN = re.compile(r"a[ad]*")


def _remember(classes: dict[int, str | None]) -> None:
    for cp, folded in classes.items():
        _CLASSES[cp] = folded
        _KIND[cp] = " " if folded is _SEPARATOR else ("d" if folded == "" else "a")
        _FOLDED[cp] = folded or ""
        _SPLIT[cp] = " " if folded is _SEPARATOR else folded


_remember(_ASCII)


def learn_characters(text: str) -> None:
    """Make sure every code point of ``text`` has a known class (one SQLite probe per batch)."""
    if text.isascii():
        return  # every ASCII class is known from the start
    unknown = {ord(c) for c in set(text)} - _CLASSES.keys()
    if not unknown:
        return
    encodable = sorted(cp for cp in unknown if not 0xD800 <= cp <= 0xDFFF and cp != 0)
    with _LOCK:
        try:
            learned = _probe_sqlite(encodable) if encodable else {}
        except sqlite3.Error:
            learned = {cp: _fallback_class(cp) for cp in encodable}
        learned.update({cp: _SEPARATOR for cp in unknown - learned.keys()})
        _remember(learned)


def tokenize(text: str) -> list[Token]:
    """``unicode61 remove_diacritics 2`` tokens of ``text`` with their character spans.

    A token is a run of token characters and diacritics that starts with a token character
    (a lone diacritic does not start one); its text is the folded characters, diacritics dropped.
    """
    if not text:
        return []
    learn_characters(text)
    kinds = text.translate(_KIND)
    return [Token(text[m.start():m.end()].translate(_FOLDED), m.start(), m.end()) for m in _RUN.finditer(kinds)]


def token_texts(text: str) -> list[str]:
    """The folded texts of ``tokenize(text)`` (no spans: the index and query side need only these).

    One ``translate`` of the whole text (separator -> space, diacritic -> nothing, token
    character -> its folded form) and a split on spaces give the same tokens: a diacritic that
    does not continue a token follows a separator or the start, so dropping it joins nothing.
    """
    if not text:
        return []
    learn_characters(text)
    return list(filter(None, text.translate(_SPLIT).split(" ")))


class _FoldedSplitTable(dict):
    """``str.translate`` table: a code point's fold (``rules.fold``) with each resulting character
    then mapped as ``token_texts`` maps it (separator -> space, diacritic -> nothing), filled on
    first use."""

    def __missing__(self, code: int) -> str:
        folded = fold_char(chr(code))
        learn_characters(folded)
        value = folded.translate(_SPLIT)
        self[code] = value
        return value


_FOLDED_SPLIT = _FoldedSplitTable()


def folded_separated(text: str) -> str:
    """``fold(text)`` with every separator a space and every diacritic dropped, in one pass over
    the text (an index builder folds and tokenises every chunk text): its tokens are
    ``token_texts(fold(text)) == list(filter(None, folded_separated(text).split(" ")))``.

    ASCII text needs no fold of its own (the separator table lower-cases it already)."""
    if not text:
        return ""
    if text.isascii():
        return text.translate(_SPLIT)
    return text.translate(_FOLDED_SPLIT)
