"""Full-text ranking over ``reader.FtsArrays``: FTS5's ``bm25()``, exactly, for every storage.

``rank`` answers single-token phrases joined by AND / OR with arrays: the arithmetic is
``rules.bm25``'s FTS5 rule, elementwise, with the table-wide statistics FTS5 uses. A query word
that unicode61 splits into several tokens (or none) is a phrase the arrays cannot answer:
``query_phrases`` says so, and ``rank_phrases`` finds those instances by tokenising the candidate
rows again and scores them one row at a time with ``rules.fts5.bm25`` (it asks for the texts of
those candidate rows only: kept by the index, or read from the storage).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from knowspec.impl.docpool.fulltext.reader import COLUMNS, FtsArrays
from knowspec.impl.rules import fts5
from knowspec.impl.rules.bm25 import fts5_avg_len, fts5_frequency, fts5_phrase_score, idf_fts5
from knowspec.impl.rules.fold import fold
from knowspec.impl.rules.fts_query import parse_match


@dataclass(frozen=True)
class RankedChunk:
    topic_id: int
    chunk_id: int
    score: float



@dataclass(frozen=True)
class RankedRow:
    """A topic's best row found by ``rank_phrases``: its phrase instances and tokens per column
    are what ``snippet.phrase_snippet`` needs."""

    row: int
    score: float
    instances: list[fts5.Instance]
    column_sizes: list[int]
    phrase_sizes: list[int]
    texts: tuple[str, ...]  # the row's original (title, heading, body)


def query_phrases(match: str) -> tuple[list[tuple[str, bool]], str] | None:
    """(token, prefix) per phrase of a ``rules.fts_query`` expression and its joiner, or ``None``
    when a word is not exactly one FTS5 token (FTS5 must answer that query itself)."""
    words, joiner = parse_match(match)
    phrases = []
    for w in words:
        tokens = fts5.token_texts(w.text)
        if len(tokens) != 1:
            return None
        phrases.append((tokens[0], w.prefix))
    return (phrases, joiner) if phrases else None


def phrase_postings(arrays: FtsArrays, token: str, prefix: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, counts)`` of one phrase: the ascending rows it occurs in and its instances per
    column there (``counts[i, c]``); a prefix's terms are summed per row."""
    lo, hi = arrays.term_range(token, prefix)
    a, b = arrays.term_start[lo], arrays.term_start[hi]
    rows, tf = arrays.post_row[a:b], arrays.post_tf[a:b]
    if hi - lo <= 1:  # one term: its postings are already one per row, ascending
        return rows, tf
    return summed_per_row(rows, tf, len(arrays.row_chunk))


def summed_per_row(rows: np.ndarray, tf: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The ascending rows (of ``n``) holding an instance among ``rows`` (postings of several terms,
    a row maybe more than once) and, per row, the float64 sums of their ``tf`` columns, summed in
    posting order. The counts run over the rows held (a prefix's few thousand postings), not over
    every row of the pool: on the 100k-chunk pool of ``knowspec bench docpool-vector`` a full-text
    call took 7.7-8.3 ms of server CPU instead of 9.2-9.5."""
    seen = np.zeros(n, dtype=bool)
    seen[rows] = True
    held = np.flatnonzero(seen)
    slot = np.empty(n, dtype=np.intp)
    slot[held] = np.arange(len(held))
    group = slot[rows]
    sums = np.empty((len(held), tf.shape[1]))
    some = np.zeros(len(held), dtype=bool)
    for c in range(tf.shape[1]):
        sums[:, c] = np.bincount(group, weights=tf[:, c], minlength=len(held))
        some |= sums[:, c] > 0
    if not some.all():  # postings of no instance (none are made so; kept exact all the same)
        held, sums = held[some], sums[some]
    return held, sums


def rank(arrays: FtsArrays, phrases: Sequence[tuple[str, bool]], joiner: str, weights: Sequence[float],
         allowed_topics: np.ndarray | None, limit: int) -> list[RankedChunk]:
    """The best chunk of each allowed matching topic, topics by (bm25, collection, slug), ``limit`` of them.

    ``allowed_topics``: a boolean mask over ``arrays.topic_id`` (``None`` = every topic). Ties
    break as the FTS5 path does: a topic's best chunk by (score, chunk id). Each phrase is scored
    on its own rows only: an absent phrase adds ``idf * 0.0 = 0.0``, so skipping it changes no bit.
    """
    found = [phrase_postings(arrays, token, prefix) for token, prefix in phrases]
    if not found or (joiner == "AND" and not all(len(rows_p) for rows_p, _ in found)):
        return []  # (a phrase no row holds: no row holds them all)
    n = len(arrays.row_chunk)
    if joiner == "AND":
        seen = np.zeros(n, dtype=np.int32)
        for rows_p, _ in found:
            seen[rows_p] += 1  # rows_p has no repeats
        match = seen == len(found)
    else:
        match = np.zeros(n, dtype=bool)
        for rows_p, _ in found:
            match[rows_p] = True
    valid = arrays.row_topic >= 0
    if allowed_topics is not None:
        valid &= allowed_topics[np.maximum(arrays.row_topic, 0)]
    rows = np.flatnonzero(match & valid)
    if not len(rows) or limit <= 0:
        return []
    position = np.full(n, -1, dtype=np.int64)
    position[rows] = np.arange(len(rows))
    avg = fts5_avg_len(arrays.total_tokens, arrays.n_rows)
    score = np.zeros(len(rows))
    for rows_p, counts_p in found:
        at = position[rows_p]
        kept = at >= 0
        counts = counts_p  # every row the phrase holds matches (an OR, its topics allowed): no copy
        if not kept.all():
            at, counts = at[kept], counts_p[kept]
        if not len(at):
            continue
        idf = idf_fts5(arrays.n_rows, len(rows_p))
        freq = fts5_frequency([counts[:, c] for c in range(len(COLUMNS))], weights)
        score[at] = score[at] + fts5_phrase_score(idf, freq, arrays.row_len[rows[at]], avg)
    score = -1.0 * score
    topic = arrays.row_topic[rows]
    # Only rows scoring at most the limit-th best topic score can be a competing topic's best
    # chunk, so the sort below sees those few instead of every match (a broad OR matches most rows).
    topic_best = np.full(len(arrays.topic_id), np.inf)
    np.minimum.at(topic_best, topic, score)
    topic_best = topic_best[np.isfinite(topic_best)]
    if len(topic_best) > limit:
        cutoff = np.partition(topic_best, limit - 1)[limit - 1]
        near = np.flatnonzero(score <= cutoff)  # every topic tied with the last place competes
        rows, score, topic = rows[near], score[near], topic[near]
    chunk = arrays.row_chunk[rows]
    order = np.lexsort((chunk, score, topic))
    first = np.ones(len(order), dtype=bool)
    first[1:] = topic[order][1:] != topic[order][:-1]
    best = order[first]                     # one row per topic: its best chunk
    ranked = sorted(best.tolist(), key=lambda i: (score[i], arrays.topic_collection[topic[i]],
                                                  arrays.topic_slug[topic[i]]))[:limit]
    return [RankedChunk(int(arrays.topic_id[topic[i]]), int(chunk[i]), float(score[i])) for i in ranked]


def _holding(arrays: FtsArrays, token: str, prefix: bool) -> np.ndarray:
    """A mask over the rows: those holding ``token`` (any term it begins, for a prefix)."""
    lo, hi = arrays.term_range(token, prefix)
    mask = np.zeros(len(arrays.row_chunk), dtype=bool)
    mask[arrays.post_row[arrays.term_start[lo]:arrays.term_start[hi]]] = True
    return mask


RowTexts = Callable[[list[int]], Mapping[int, Sequence[str]]]
"""Original (title, heading, body) of the given rows (``FtsArrays`` row numbers)."""


# Candidate rows whose texts are read and searched at a time: the memory a phrase query holds
# is this many rows' texts, whatever the pool, and a cancelled call stops within one batch.
PHRASE_BATCH = 1024


PhraseRows = dict[int, list[tuple[int, int]]]
"""A phrase's instances in the rows holding it: row -> [(column, token offset), ...]."""


def rank_phrases(arrays: FtsArrays, texts: RowTexts, match: str, allowed_topics: np.ndarray | None,
                 weights: Sequence[float], limit: int, *, known: dict[fts5.Phrase, PhraseRows] | None = None,
                 check_cancelled: Callable[[], None] = lambda: None) -> list[RankedRow]:
    """Any phrases (several tokens, or none), row by row: candidates from the postings, the
    instances from searching those rows' folded tokens again (``texts``, asked a batch at a
    time, ``check_cancelled`` before each), ``rules.fts5.bm25`` per matching row; the best row
    per allowed topic, topics by (bm25, collection, slug), ``limit`` of them. The texts of the
    rows returned are asked for once more at the end (kept meanwhile: only the instances of
    the matching rows). ``known``: phrases already found in these arrays (over all rows, so
    whoever asks), not searched again; the ones found here are added."""
    a = arrays
    words, joiner = parse_match(match)
    phrases = [fts5.phrase(w.text, w.prefix) for w in words]
    if not phrases:
        return []
    known = {} if known is None else known
    known.update(_phrase_rows(a, texts, [p for p in dict.fromkeys(phrases) if p not in known], check_cancelled))
    return _ranked(a, texts, phrases, [known[p] for p in phrases], joiner, allowed_topics, weights, limit)


def _phrase_rows(a: FtsArrays, texts: RowTexts, phrases: list[fts5.Phrase],
                 check_cancelled: Callable[[], None]) -> dict[fts5.Phrase, PhraseRows]:
    """Each phrase's instances in every row holding it: the candidate rows' texts a batch at a time."""
    if not phrases:
        return {}
    # A phrase can occur only in rows holding all its tokens; no token, no row.
    candidates = [np.logical_and.reduce([_holding(a, tok, p.prefix and k == p.size - 1)
                                         for k, tok in enumerate(p.tokens)])
                  if p.tokens else np.zeros(len(a.row_chunk), dtype=bool) for p in phrases]
    every = np.flatnonzero(np.logical_or.reduce(candidates)).tolist()
    hits: list[PhraseRows] = [{} for _ in phrases]
    for start in range(0, len(every), PHRASE_BATCH):
        check_cancelled()
        flat: list[str] = []
        owners: list[tuple[int, int]] = []  # (row, column) of each text in ``flat``
        for row, columns in texts(every[start:start + PHRASE_BATCH]).items():  # a row gone from the storage is absent
            flat.extend(t or "" for t in columns)
            owners.extend((row, c) for c in range(len(columns)))
        for where, mask, instances in zip(hits, candidates, fts5.phrase_offsets_in_texts(phrases, flat)):
            for text, offset in instances:
                row, column = owners[text]
                if mask[row]:  # a text newer than the postings is searched only where they say the phrase can be
                    where.setdefault(row, []).append((column, offset))
    check_cancelled()
    return dict(zip(phrases, hits))


def _ranked(a: FtsArrays, texts: RowTexts, phrases: list[fts5.Phrase], hits: list[PhraseRows], joiner: str,
            allowed_topics: np.ndarray | None, weights: Sequence[float], limit: int) -> list[RankedRow]:
    """The rows matching the phrases joined by ``joiner``, scored; the best per allowed topic."""
    rows = set(hits[0])
    for h in hits[1:]:
        rows = rows & set(h) if joiner == "AND" else rows | set(h)
    counts = [len(h) for h in hits]
    best: dict[int, tuple[float, int, int, list[fts5.Instance]]] = {}
    for row in rows:
        t = int(a.row_topic[row])
        if t < 0 or (allowed_topics is not None and not allowed_topics[t]):
            continue
        instances = sorted(fts5.Instance(c, off, i) for i, h in enumerate(hits) for c, off in h.get(row, ()))
        score = fts5.bm25(instances, len(phrases), weights, counts, int(a.row_len[row]), a.total_tokens, a.n_rows)
        chunk = int(a.row_chunk[row])
        if t not in best or (score, chunk) < best[t][:2]:
            best[t] = (score, chunk, row, instances)
    ranked = sorted(best.values(), key=lambda b: (b[0], a.topic_collection[a.row_topic[b[2]]],
                                                  a.topic_slug[a.row_topic[b[2]]]))[: max(limit, 0)]
    shown = texts([row for _, _, row, _ in ranked]) if ranked else {}
    sizes = [p.size for p in phrases]
    return [RankedRow(row, score, instances, [len(fts5.token_texts(fold(t or ""))) for t in shown[row]], sizes,
                      tuple(t or "" for t in shown[row]))
            for score, _, row, instances in ranked if row in shown]
