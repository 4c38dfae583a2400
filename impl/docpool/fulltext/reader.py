"""The full-text engine's data: a pool's index as numpy postings, read once per change stamp.

``FtsArrays`` is the layout every ranker of ``fulltext.rank`` reads: a sorted vocabulary,
postings (term -> rows with per-column instance counts), tokens per row, the row -> chunk ->
topic maps, and the table-wide statistics FTS5's ``bm25()`` uses. Two readers fill it:

- ``build`` reads a SQLite pool's FTS5 index (``fts5vocab`` instances and the averages record)
  once per change stamp; ``FtsArraysCache`` keeps it per pool file. A search waits for them
  (the SQLite storage asks in ``sync`` mode): FTS5 never ranks; ``KNOWSPEC_FTS_ARRAYS`` now only
  decides whether other callers of ``get`` start a build in a thread (``background``) or not.
- ``FtsIndex.build`` tokenises chunk rows itself (``rules.fts5.token_texts``, unicode61 over
  folded text) for a storage without FTS5 (PostgreSQL, Firebird), and keeps their original
  texts and the topics' titles, so a search there needs no further SQL.

Nothing here ranks: ranking is ``fulltext.rank``, snippets ``fulltext.snippet``.
"""

from __future__ import annotations

import sqlite3
import threading
from array import array
from bisect import bisect_left
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np

from knowspec.impl import runtime as process
from knowspec.impl.rules import fts5
from knowspec.impl.rules.fold import fold

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

    def term_range(self, token: str, prefix: bool) -> tuple[int, int]:
        """Vocabulary indexes ``[lo, hi)`` of ``token`` (every term starting with it when ``prefix``)."""
        if prefix:
            found = fts5.prefix_range(self.terms, token)
            return found.start, found.stop
        lo = bisect_left(self.terms, token)
        return lo, (lo + 1 if lo < len(self.terms) and self.terms[lo] == token else lo)


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


@dataclass
class FtsIndex:
    """What a search ranks: one pool's ``FtsArrays`` at one change stamp. ``texts`` (original
    title, heading, body per row) and the topic titles are kept only by ``FtsIndex.build`` (a
    storage without FTS5); ``None`` means the search layer reads them from the storage."""

    stamp: tuple
    arrays: FtsArrays
    texts: list[tuple[str, str, str]] | None = None   # per row (row = arrays.row_chunk)
    topic_title: list[str] | None = None              # per topic index (arrays.topic_id)
    topic_breadcrumb: list[str] | None = None

    @classmethod
    def build(cls, stamp: tuple, chunks: Iterable[tuple[int, int, str, str, str]],
              topics: Iterable[tuple[int, str, str, str, str]]) -> "FtsIndex":
        """Index ``(chunk_id, topic_id, title, heading, body)`` rows (original text, folded here)
        of the topics ``(topic_id, collection, slug, title, breadcrumb)``, with the statistics
        of the whole table (row count, total tokens), as FTS5 keeps them."""
        rows = sorted((int(c[0]), int(c[1]), (c[2] or "", c[3] or "", c[4] or "")) for c in chunks)
        topic_rows = sorted((int(t[0]), *t[1:5]) for t in topics)
        n_cols = len(COLUMNS)
        seen: dict[str, int] = {}  # term -> id in order of first sight (token strings are not kept)
        ids = array("q")
        lengths = np.zeros(len(rows) * n_cols, dtype=np.int64)
        k = 0
        for _, _, texts in rows:
            for text in texts:
                toks = fts5.token_texts(fold(text))
                ids.extend([seen.setdefault(t, len(seen)) for t in toks])
                lengths[k] = len(toks)
                k += 1
        first_seen = list(seen)
        del seen
        order = sorted(range(len(first_seen)), key=first_seen.__getitem__)
        terms = [first_seen[i] for i in order]
        rank = np.empty(len(order), dtype=np.int64)
        rank[np.asarray(order, dtype=np.int64)] = np.arange(len(order), dtype=np.int64)
        term = rank[np.frombuffer(ids, dtype=np.int64)] if len(ids) else np.zeros(0, dtype=np.int64)
        del ids
        cells = np.repeat(np.arange(len(rows) * n_cols, dtype=np.int64), lengths)  # (row, column) of each token
        term_start, post_row, post_tf, row_len = postings(term, cells // n_cols, cells % n_cols, len(terms), len(rows))
        del term, cells
        topic_id = np.array([t[0] for t in topic_rows], dtype=np.int64)
        chunk_topic = np.array([r[1] for r in rows], dtype=np.int64)
        arrays = FtsArrays(
            terms=terms, term_start=term_start, post_row=post_row, post_tf=post_tf,
            row_chunk=np.array([r[0] for r in rows], dtype=np.int64),
            row_topic=lookup(topic_id, np.arange(len(topic_id)), chunk_topic), row_len=row_len,
            topic_id=topic_id, topic_collection=[t[1] for t in topic_rows], topic_slug=[t[2] for t in topic_rows],
            n_rows=len(rows), total_tokens=int(lengths.sum()))
        return cls(stamp, arrays, [r[2] for r in rows], [t[3] or "" for t in topic_rows],
                   [t[4] or "" for t in topic_rows])

    def row(self, chunk_id: int) -> int:
        return int(np.searchsorted(self.arrays.row_chunk, chunk_id))

    def nbytes(self) -> int:
        """Estimated memory held: the arrays and the kept texts (a cache's ``sizeof``)."""
        held = [v for v in vars(self.arrays).values() if isinstance(v, np.ndarray)]
        return sum(a.nbytes for a in held) + sum(len(t) for row in self.texts or () for t in row)


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

