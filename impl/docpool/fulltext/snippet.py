"""Snippets of ranked chunks: FTS5's ``snippet()`` (``rules.fts5.snippet``) over original texts.

Cut only for the chunks a search returns, from their original column texts; the marks are the
SQLite pool's (``[`` ``]`` ``…``, 16 tokens).
"""

from __future__ import annotations

from typing import Sequence

from knowspec.impl.docpool.fulltext.reader import COLUMNS
from knowspec.impl.rules import fts5
from knowspec.impl.rules.fold import fold

MARKS = ("[", "]", "…")  # snippet open, close, ellipsis
SNIPPET_TOKENS = 16


def column_index(snippet_column: str) -> int:
    """The recipe's ``chunk_fts_snippet_column`` as an FTS5 column number (-1: the best column)."""
    return COLUMNS.index(snippet_column) if snippet_column in COLUMNS else -1


def chunk_snippet(texts: Sequence[str], phrases: Sequence[tuple[str, bool]], column: int,
                  marks: tuple[str, str, str] = MARKS, n_token: int = SNIPPET_TOKENS) -> str:
    """FTS5 ``snippet()`` of one chunk: its original column texts, the index's folded tokens.

    A snippet of one column needs only that column's tokens; an empty snippet column (a
    heading-only section) falls back to the best column, as the FTS5 query does with
    ``snippet(..., -1, ...)``, and only then are all columns tokenised.
    """
    parsed = [fts5.Phrase((token,), prefix) for token, prefix in phrases]
    sizes = [1] * len(parsed)
    if 0 <= column < len(texts) and texts[column]:
        only = [fts5.token_texts(fold(t)) if c == column else [] for c, t in enumerate(texts)]
        lengths = [len(c) for c in only]
        found = fts5.snippet(list(texts), lengths, fts5.row_instances(parsed, only), sizes, column, *marks, n_token)
        if found:
            return found
    columns = [fts5.token_texts(fold(t)) for t in texts]
    args = (list(texts), [len(c) for c in columns], fts5.row_instances(parsed, columns), sizes)
    return fts5.snippet(*args, column, *marks, n_token) or fts5.snippet(*args, -1, *marks, n_token)


def phrase_snippet(texts: Sequence[str], column_sizes: Sequence[int], instances: Sequence[fts5.Instance],
                   phrase_sizes: Sequence[int], column: int, marks: tuple[str, str, str] = MARKS,
                   n_token: int = SNIPPET_TOKENS) -> str:
    """The snippet of a row ``rank.rank_phrases`` found (its instances already known); an empty
    snippet column falls back to the best column."""
    args = (list(texts), list(column_sizes), list(instances), list(phrase_sizes))
    return fts5.snippet(*args, column, *marks, n_token) or fts5.snippet(*args, -1, *marks, n_token)
