"""Okapi BM25 as pure arithmetic over term statistics.

Two callers share this module and differ only in their IDF and in how they weight fields:

- OKF ``search_sections``: ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))`` (:func:`idf_plus_one`),
  k1 = 1.2, b = 0.75, tf and length weighted per field (body x1, heading x3, title x2);
- SQLite FTS5 ``bm25()`` (document pools): ``idf = ln((N - df + 0.5) / (df + 0.5))`` floored at
  1e-6 (:func:`idf_fts5`), per-column weights applied to tf only, length = unweighted token
  count of the row, and the final value negated (:func:`fts5_bm25`).

No function here reads documents: callers count terms and hand the numbers in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

K1 = 1.2
B = 0.75

IdfRule = Callable[[int, int], float]


def idf_plus_one(n_docs: int, df: int) -> float:
    """Lucene-style IDF that is never negative: ``ln(1 + (N - df + 0.5) / (df + 0.5))``."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def idf_fts5(n_docs: int, df: int) -> float:
    """SQLite FTS5's IDF: ``ln((N - df + 0.5) / (df + 0.5))``, replaced by 1e-6 when not positive."""
    value = math.log((n_docs - df + 0.5) / (df + 0.5))
    return value if value > 0 else 1e-6


@dataclass(frozen=True)
class TermStat:
    """One query term's statistics for one document: weighted tf, and df over the collection."""

    tf: float
    df: int


def term_weight(tf: float, doc_len: float, avg_len: float, *, k1: float = K1, b: float = B) -> float:
    """The saturated tf part of BM25: ``tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avg))``."""
    if tf <= 0:
        return 0.0
    avg = avg_len if avg_len > 0 else 1.0
    return tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * doc_len / avg))


def bm25(
    stats: Iterable[TermStat],
    doc_len: float,
    avg_len: float,
    n_docs: int,
    *,
    k1: float = K1,
    b: float = B,
    idf: IdfRule = idf_plus_one,
) -> float:
    """Sum over the query terms of ``idf(N, df) * term_weight(tf, len, avg)``."""
    total = 0.0
    for stat in stats:
        if stat.tf > 0:
            total += idf(n_docs, stat.df) * term_weight(stat.tf, doc_len, avg_len, k1=k1, b=b)
    return total


def weighted_tf(counts: Mapping[str, int], weights: Mapping[str, float]) -> float:
    """Field-weighted term frequency: ``Σ counts[field] * weights[field]`` (missing weight = 1)."""
    return sum(count * weights.get(field, 1.0) for field, count in counts.items())


def average_length(lengths: Sequence[float]) -> float:
    """Mean document length, or 1 for an empty or all-empty collection (never divides by zero)."""
    if not lengths:
        return 1.0
    mean = sum(lengths) / len(lengths)
    return mean if mean > 0 else 1.0


def fts5_frequency(column_counts: Sequence[Any], column_weights: Sequence[float]) -> Any:
    """FTS5's weighted phrase frequency (``aFreq``): each instance adds its column's weight.

    FTS5 adds the weight once per instance, column after column. With integral weights that is
    exactly ``Σ count * weight``; other weights are added one instance at a time so the rounding
    is FTS5's. Works on ints or on numpy arrays of counts (one element per row).
    """
    acc: Any = 0.0
    for col, count in enumerate(column_counts):
        w = float(column_weights[col]) if col < len(column_weights) else 1.0
        if w.is_integer() and abs(w) < 2.0 ** 31:
            acc = acc + count * w
        elif hasattr(count, "shape"):
            for k in range(int(count.max(initial=0))):
                acc = acc + (count > k) * w
        else:
            for _ in range(int(count)):
                acc = acc + w
    return acc


def fts5_phrase_score(idf: float, freq: Any, row_len: Any, avg_len: float, *, k1: float = K1, b: float = B) -> Any:
    """One phrase's share of FTS5 ``bm25()``, in the C source's operation order (bit-exact).

    ``aIDF[i] * ((aFreq[i] * (k1 + 1.0)) / (aFreq[i] + k1 * (1 - b + b * D / avgdl)))``; works on
    floats or elementwise on numpy arrays. (Measured against FTS5 itself: the other grouping
    differs in the last bit for a third of the rows, enough to swap tied results.)
    """
    return idf * ((freq * (k1 + 1.0)) / (freq + k1 * ((1.0 - b) + (b * row_len) / avg_len)))


def fts5_avg_len(total_tokens: int, n_rows: int) -> float:
    """``avgdl``: the table's tokens over its rows, as FTS5 computes it."""
    return float(total_tokens) / float(n_rows) if n_rows else 0.0


def fts5_bm25(
    column_counts: Sequence[Sequence[int]],
    column_weights: Sequence[float],
    dfs: Sequence[int],
    row_len: int,
    avg_len: float,
    n_rows: int,
    *,
    k1: float = K1,
    b: float = B,
) -> float:
    """SQLite FTS5 ``bm25(table, w0, w1, ...)`` for one row (negative: smaller is better).

    ``column_counts[i][c]`` is how often phrase ``i`` occurs in column ``c`` of the row; ``dfs[i]``
    is the number of rows holding phrase ``i``; ``row_len`` is the row's total token count over
    all columns and ``avg_len`` the mean of that over the table.
    """
    score = 0.0
    for counts, df in zip(column_counts, dfs):
        freq = fts5_frequency(counts, column_weights)
        score += fts5_phrase_score(idf_fts5(n_rows, df), freq, float(row_len), avg_len, k1=k1, b=b)
    return -1.0 * score
