"""FTS5 ranking of a SQLite pool from numpy arrays: the same answers, without FTS5's per-row cost.

FTS5 scores every matching row of a broad prefix query one row at a time (a docsize lookup and a
position-list walk each: ~15 ms for ``"table"*`` over 50k chunks), and its ``snippet()`` rebuilds
the prefix doclist per call. This module reads the pool's FTS5 index once per change stamp
(``fts5vocab`` instances and the table's averages record), keeps it as compressed postings
(term -> rows with per-column counts), and answers single-token phrases, AND / OR, exactly as
``bm25()`` would: the arithmetic is ``rules.bm25``'s FTS5 rule, elementwise.

Anything it cannot answer exactly (a query word FTS5 splits into several tokens, an index still
being built, a failed build) returns ``None`` and the caller runs the FTS5 query instead, so FTS5
stays the reference. ``KNOWSPEC_FTS_ARRAYS`` = ``background`` (default: built in a thread while
FTS5 answers), ``sync`` (built by the first search that needs it) or ``off``.
"""

from __future__ import annotations

import sqlite3
import threading
from bisect import bisect_left
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from knowspec.impl import runtime as process
from knowspec.impl.rules import fts5
from knowspec.impl.rules.bm25 import fts5_avg_len, fts5_frequency, fts5_phrase_score, idf_fts5
from knowspec.impl.rules.fold import fold
from knowspec.impl.rules.fts_query import parse_match

FTS_TABLE = "doc$chunk_fts"
COLUMNS = ("title", "heading", "body")
MAX_CACHED_POOLS = 4


@dataclass(frozen=True)
class FtsArrays:
    """One pool's FTS5 index as arrays (rows = indexed chunks, sorted by chunk id)."""

    terms: list[str]            # sorted vocabulary
    term_start: np.ndarray      # postings of terms[k]: [term_start[k], term_start[k + 1])
    post_row: np.ndarray        # int32 row of each posting
    post_tf: np.ndarray         # uint16 (int32 if needed) (postings, columns): instances per column
    row_chunk: np.ndarray       # int64 chunk id per row
    row_topic: np.ndarray       # int64 index into ``topic_id`` per row
    row_len: np.ndarray         # float64 tokens per row over all columns (FTS5's ``D``)
    topic_id: np.ndarray        # int64 topic ids, sorted
    topic_collection: list[str]
    topic_slug: list[str]
    n_rows: int                 # FTS5's row count (averages record)
    total_tokens: int           # FTS5's token total over all columns (averages record)
    _masks: dict[str, np.ndarray] = field(default_factory=dict, compare=False, repr=False)

    def collection_mask(self, collection: str) -> np.ndarray:
        """Boolean mask over ``topic_id``: the topics of ``collection`` (remembered)."""
        mask = self._masks.get(collection)
        if mask is None:
            mask = np.fromiter((c == collection for c in self.topic_collection), bool, len(self.topic_id))
            self._masks[collection] = mask
        return mask

    def allowed(self, storage, access, collection: str | None,
                linked_to: tuple[str, str] | None) -> np.ndarray | None:
        """The topics a search may return, as a mask over ``topic_id`` (``None``: all). An
        unrestricted caller's collection is known here; ACLs and entity links come from
        ``storage.topic_ids`` (the pool's tables, in the request's snapshot)."""
        if access.unrestricted and linked_to is None:
            return None if collection is None else self.collection_mask(collection)
        ids = storage.topic_ids(access, collection=collection, linked_to=linked_to)
        return np.isin(self.topic_id, np.asarray(list(ids), dtype=np.int64))

    def term_range(self, token: str, prefix: bool) -> tuple[int, int]:
        """Vocabulary indexes ``[lo, hi)`` of ``token`` (every term starting with it when ``prefix``)."""
        if prefix:
            found = fts5.prefix_range(self.terms, token)
            return found.start, found.stop
        lo = bisect_left(self.terms, token)
        return lo, (lo + 1 if lo < len(self.terms) and self.terms[lo] == token else lo)


@dataclass(frozen=True)
class RankedChunk:
    topic_id: int
    chunk_id: int
    score: float


def _varints(blob: bytes) -> list[int]:
    """SQLite varints (FTS5's record encoding): 7 bits a byte, big-endian, 9th byte whole."""
    out, i = [], 0
    while i < len(blob):
        value = 0
        for k in range(9):
            byte = blob[i]
            i += 1
            if k == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


def read_totals(con: sqlite3.Connection, schema: str = "main") -> tuple[int, int]:
    """(rows, tokens over all columns) from FTS5's averages record, the numbers ``bm25`` uses."""
    row = con.execute(f'select block from {schema}."{FTS_TABLE}_data" where id = 1').fetchone()
    values = _varints(bytes(row[0])) if row and row[0] else [0]
    return values[0], sum(values[1:1 + len(COLUMNS)])


def build(path: Path | str) -> FtsArrays:
    """Read a pool file's FTS5 index into ``FtsArrays`` (its own read-only connection)."""
    con = sqlite3.connect(Path(path).absolute().as_uri() + "?mode=ro", uri=True)
    try:
        con.execute("begin")  # one snapshot for the index, the chunks and the topics
        con.execute(f"create virtual table temp.v using fts5vocab(main, '{FTS_TABLE}', 'instance')")
        cases = " ".join(f"when '{c}' then {i}" for i, c in enumerate(COLUMNS))
        terms: list[str] = []
        lengths: list[int] = []
        doc_parts: list[str] = []
        col_parts: list[str] = []
        # fts5vocab scans in (term, doc, col, offset) order, so this GROUP BY streams.
        for term, docs, cols in con.execute(
                f"select term, group_concat(doc), group_concat(case col {cases} end, '') "
                "from temp.v group by term order by term"):
            terms.append(term)
            lengths.append(len(cols))
            doc_parts.append(docs)
            col_parts.append(cols)
        n_rows, total_tokens = read_totals(con)
        chunk_topic = np.array(con.execute('select id, topic_id from "doc$chunk" order by id').fetchall(),
                               dtype=np.int64).reshape(-1, 2)
        topics = con.execute('select id, collection, slug from "doc$topic" order by id').fetchall()
    finally:
        con.close()
    docs = np.fromstring(",".join(doc_parts), dtype=np.int64, sep=",") if doc_parts else np.zeros(0, np.int64)
    del doc_parts
    cols = np.frombuffer("".join(col_parts).encode("ascii"), dtype=np.uint8) - ord("0")
    del col_parts
    term = np.repeat(np.arange(len(terms), dtype=np.int32), lengths)
    row_chunk = np.unique(docs)
    term_start, post_row, post_tf, row_len = postings(term, np.searchsorted(row_chunk, docs), cols,
                                                      len(terms), len(row_chunk))
    topic_id = np.array([t[0] for t in topics], dtype=np.int64)
    row_topic_id = lookup(chunk_topic[:, 0], chunk_topic[:, 1], row_chunk)
    row_topic = lookup(topic_id, np.arange(len(topic_id)), row_topic_id)
    return FtsArrays(
        terms=terms, term_start=term_start, post_row=post_row, post_tf=post_tf, row_chunk=row_chunk,
        row_topic=row_topic, row_len=row_len,
        topic_id=topic_id, topic_collection=[t[1] for t in topics], topic_slug=[t[2] for t in topics],
        n_rows=n_rows, total_tokens=total_tokens)


def postings(term: np.ndarray, row: np.ndarray, col: np.ndarray, n_terms: int, n_rows: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(term_start, post_row, post_tf, row_len)`` of ``FtsArrays`` from one (term id, row,
    column) per token instance, in any order (FTS5's own order is kept without sorting)."""
    if not _sorted_by(term, row, col):
        order = np.lexsort((col, row, term))
        term, row, col = term[order], row[order], col[order]
    new_pair = np.ones(len(term), dtype=bool)
    new_pair[1:] = (term[1:] != term[:-1]) | (row[1:] != row[:-1])
    pair = np.cumsum(new_pair) - 1
    n_pairs = int(pair[-1]) + 1 if len(pair) else 0
    post_tf = np.bincount(pair * len(COLUMNS) + col, minlength=n_pairs * len(COLUMNS)).reshape(n_pairs, len(COLUMNS))
    del pair
    post_tf = post_tf.astype(np.uint16 if post_tf.max(initial=0) < 2 ** 16 else np.int32)
    term_start = np.searchsorted(term[new_pair], np.arange(n_terms + 1))
    row_len = np.bincount(row, minlength=n_rows).astype(np.float64)  # FTS5's D: tokens per row
    return term_start, row[new_pair].astype(np.int32), post_tf, row_len


def _sorted_by(term: np.ndarray, row: np.ndarray, col: np.ndarray) -> bool:
    """Whether instances come ordered by (term, row, column)."""
    same_term = term[1:] == term[:-1]
    later_row = row[1:] > row[:-1]
    same_row = row[1:] == row[:-1]
    return bool(np.all((term[1:] > term[:-1]) | (same_term & (later_row | (same_row & (col[1:] >= col[:-1]))))))


def lookup(keys: np.ndarray, values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """``values[keys == w]`` for each ``w`` of ``wanted`` (``keys`` sorted), -1 where absent."""
    if not len(keys):
        return np.full(len(wanted), -1, dtype=np.int64)
    at = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
    return np.where(keys[at] == wanted, values[at], -1).astype(np.int64)


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
    n = len(arrays.row_chunk)
    dense = [np.bincount(rows, weights=tf[:, c], minlength=n) for c in range(tf.shape[1])]
    rows = np.flatnonzero(np.logical_or.reduce([d > 0 for d in dense]))
    return rows, np.stack([d[rows] for d in dense], axis=1)


def rank(arrays: FtsArrays, phrases: Sequence[tuple[str, bool]], joiner: str, weights: Sequence[float],
         allowed_topics: np.ndarray | None, limit: int) -> list[RankedChunk]:
    """The best chunk of each allowed matching topic, topics by (bm25, collection, slug), ``limit`` of them.

    ``allowed_topics``: a boolean mask over ``arrays.topic_id`` (``None`` = every topic). Ties
    break as the FTS5 path does: a topic's best chunk by (score, chunk id). Each phrase is scored
    on its own rows only: an absent phrase adds ``idf * 0.0 = 0.0``, so skipping it changes no bit.
    """
    found = [phrase_postings(arrays, token, prefix) for token, prefix in phrases]
    if not found:
        return []
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
        at = at[kept]
        if not len(at):
            continue
        idf = idf_fts5(arrays.n_rows, len(rows_p))
        counts = counts_p[kept]
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


# -- the per-process cache -----------------------------------------------------------------------

@dataclass
class _Entry:
    stamp: tuple
    arrays: FtsArrays | None = None
    done: threading.Event | None = None


class FtsArraysCache:
    """Arrays per pool file and change stamp (the runtime's ``docpool.fts_arrays`` cache); a
    changed stamp starts a new build."""

    def __init__(self, runtime: process.Runtime | None = None) -> None:
        self._runtime = runtime or process.current()
        self._entries = self._runtime.cache("docpool.fts_arrays", max_entries=MAX_CACHED_POOLS, sizeof=_entry_bytes)

    def get(self, path: Path | str, stamp: tuple, mode: str | None = None) -> FtsArrays | None:
        """The arrays for ``stamp`` if ready (``sync``: build them now); ``None`` = use FTS5."""
        mode = mode or self._runtime.settings.fts_arrays
        if mode == "off":
            return None
        key = str(Path(path).absolute())
        entry = self._entries.get(key, stamp, lambda: self._start(stamp, key))
        if mode == "sync" and entry.done is not None:
            entry.done.wait()
        return entry.arrays

    def _start(self, stamp: tuple, key: str) -> _Entry:
        entry = _Entry(stamp, done=threading.Event())
        threading.Thread(target=self._build, args=(entry, key), daemon=True, name="knowspec-fts-arrays").start()
        return entry

    def _build(self, entry: _Entry, path: str) -> None:
        try:
            entry.arrays = build(path)
        except (sqlite3.Error, ValueError, OSError):
            entry.arrays = None  # FTS5 keeps answering for this stamp
        finally:
            assert entry.done is not None
            entry.done.set()
            self._entries.resize(path)

    def clear(self) -> None:
        self._entries.clear()


def _entry_bytes(entry: _Entry) -> int:
    arrays = entry.arrays
    if arrays is None:
        return 0
    held = [v for v in vars(arrays).values() if isinstance(v, np.ndarray)]
    return sum(a.nbytes for a in held) + sum(len(t) + 50 for t in arrays.terms)


def fts_arrays_cache() -> FtsArraysCache:
    """The process runtime's arrays."""
    return FtsArraysCache(process.current())


def chunk_snippet(texts: Sequence[str], phrases: Sequence[tuple[str, bool]], column: int,
                  marks: tuple[str, str, str], n_token: int) -> str:
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
