"""Turn a user's search text into FTS MATCH expressions (seed 001, doc_search "fts").

Rules, in order:
1. fold the text (``rules.fold``) and split it into words: runs of letters and digits; every
   other character (quotes, ``*``, ``-``, ``(``, ``:``, ``^`` ...) separates words, so no FTS
   syntax typed by the user survives;
2. keep words of 2 or more characters, at most the first 12;
3. drop stopwords, unless that would drop every word (then the originals stay);
4. double-quote each word; words of 3 or more characters match as prefixes (``"word"*``);
5. the first expression joins the words with AND, the fallback with OR. ``AND``, ``OR``,
   ``NOT`` and ``NEAR`` typed by the user are plain words like any other.

The expressions are storage-neutral (``"a"* AND "b"``); PostgreSQL and Firebird translate the
same ``FtsQuery.words`` into their own syntax.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from knowspec.impl.rules.fold import fold

MIN_WORD_CHARS = 2
PREFIX_MIN_CHARS = 3
MAX_WORDS = 12

_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class QueryWord:
    """One query word after folding: matched as a prefix when ``prefix``."""

    text: str
    prefix: bool

    def fts5(self) -> str:
        quoted = '"' + self.text.replace('"', '""') + '"'
        return quoted + "*" if self.prefix else quoted


@dataclass(frozen=True)
class FtsQuery:
    """The words of a query and its AND expression and OR fallback (``None`` when identical)."""

    words: tuple[QueryWord, ...]
    all_words: str
    any_word: str | None


def query_words(text: str, stopwords: Iterable[str] = ()) -> list[QueryWord]:
    """The words a query searches for, after the length, count and stopword rules."""
    words = [w for w in _WORD.findall(fold(text)) if len(w) >= MIN_WORD_CHARS][:MAX_WORDS]
    stop = {fold(s) for s in stopwords}
    kept = [w for w in words if w not in stop] or words
    return [QueryWord(w, len(w) >= PREFIX_MIN_CHARS) for w in kept]


def parse_stopwords(raw: str | None) -> list[str]:
    """``doc$meta.search_stopwords``: words separated by whitespace or commas."""
    if not raw:
        return []
    return [w for w in re.split(r"[\s,;]+", raw) if w]


def build_fts_query(text: str, stopwords: Iterable[str] = ()) -> FtsQuery | None:
    """The MATCH expressions for ``text``, or ``None`` when no word is left to search."""
    words = query_words(text, stopwords)
    if not words:
        return None
    terms = [w.fts5() for w in words]
    all_words = " AND ".join(terms)
    any_word = " OR ".join(terms) if len(terms) > 1 else None
    return FtsQuery(tuple(words), all_words, any_word)


_TERM = re.compile(r'"((?:[^"]|"")*)"(\*?)')


def parse_match(expression: str) -> tuple[list[QueryWord], str]:
    """Split an expression built here back into its words and joiner ('AND' or 'OR').

    The full-text search layer (``docpool.fulltext``) ranks every storage's postings from the
    expression and reads its words back with this.
    """
    words = [QueryWord(m.group(1).replace('""', '"'), bool(m.group(2))) for m in _TERM.finditer(expression)]
    return words, ("OR" if " OR " in expression else "AND")
