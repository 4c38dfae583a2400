"""An in-memory full-text index that answers like the SQLite pool's ``doc$chunk_fts``.

Firebird has no FTS5, so its storage keeps this index in process memory: every chunk's folded
title / heading / body tokenised by ``rules.fts5.token_texts`` (unicode61) into the array layout
of ``_fts_arrays.FtsArrays`` (sorted vocabulary, postings term -> rows with per-column counts,
tokens per row, topics), built with numpy. Ranking is ``_fts_arrays.rank`` -- the same code
that answers a SQLite pool from its FTS5 index -- with the table-wide statistics FTS5 uses (row
count, total tokens, rows per phrase over ALL chunks, whatever the caller may see), so scores,
order and snippets equal SQLite's. Snippets are cut only for the returned chunks, from their
original text kept here (``_fts_arrays.chunk_snippet`` / ``rules.fts5.snippet``).

A query word that unicode61 splits into several tokens (or none) is a phrase the arrays cannot
answer; such a query takes ``_search_phrases``, which finds the phrase instances by tokenising
the candidate rows again and scores them one row at a time with ``rules.fts5.bm25``.

Built once per pool and change stamp (topic titles, slugs and collections included: only an
import changes them, and an import moves the stamp); read-only afterwards.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from knowspec.impl.docpool.storage import _fts_arrays
from knowspec.impl.docpool.storage._fts_arrays import FtsArrays
from knowspec.impl.docpool.storage.base import SearchHit
from knowspec.impl.rules import fts5
from knowspec.impl.rules.fold import fold
from knowspec.impl.rules.fts_query import parse_match

COLUMNS = ("title", "heading", "body")
MARKS = ("[", "]", "…")  # snippet open, close, ellipsis: the SQLite pool's
SNIPPET_TOKENS = 16


@dataclass
class FtsIndex:
    """The index of one pool at one change stamp."""

    stamp: tuple
    arrays: FtsArrays
    texts: list[tuple[str, str, str]]           # original column texts per row (row = arrays.row_chunk)
    topic_title: list[str]                      # per topic index (arrays.topic_id)
    topic_breadcrumb: list[str]

    @classmethod
    def build(cls, stamp: tuple, chunks: Iterable[tuple[int, int, str, str, str]],
              topics: Iterable[tuple[int, str, str, str, str]]) -> "FtsIndex":
        """Index ``(chunk_id, topic_id, title, heading, body)`` rows (original text, folded here)
        of the topics ``(topic_id, collection, slug, title, breadcrumb)``."""
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
        term_start, post_row, post_tf, row_len = _fts_arrays.postings(term, cells // n_cols, cells % n_cols,
                                                                      len(terms), len(rows))
        del term, cells
        topic_id = np.array([t[0] for t in topic_rows], dtype=np.int64)
        chunk_topic = np.array([r[1] for r in rows], dtype=np.int64)
        arrays = FtsArrays(
            terms=terms, term_start=term_start, post_row=post_row, post_tf=post_tf,
            row_chunk=np.array([r[0] for r in rows], dtype=np.int64),
            row_topic=_fts_arrays.lookup(topic_id, np.arange(len(topic_id)), chunk_topic), row_len=row_len,
            topic_id=topic_id, topic_collection=[t[1] for t in topic_rows], topic_slug=[t[2] for t in topic_rows],
            n_rows=len(rows), total_tokens=int(lengths.sum()))
        return cls(stamp, arrays, [r[2] for r in rows], [t[3] or "" for t in topic_rows],
                   [t[4] or "" for t in topic_rows])

    # -- search --------------------------------------------------------------------------------
    def search(self, match: str, allowed: np.ndarray | None, weights: Sequence[float], *, limit: int,
               snippet_column: str) -> list[SearchHit]:
        """The best chunk of each allowed matching topic for a ``rules.fts_query`` expression,
        ranked by bm25 then (collection, slug), ``limit`` of them, with snippets.

        ``allowed``: a boolean mask over ``arrays.topic_id`` (``None``: every topic)."""
        weights = list(weights)[: len(COLUMNS)] or [1.0]
        column = COLUMNS.index(snippet_column) if snippet_column in COLUMNS else -1
        parsed = _fts_arrays.query_phrases(match)
        if parsed is None:
            return self._search_phrases(match, allowed, weights, limit, column)
        phrases, joiner = parsed
        out = []
        for r in _fts_arrays.rank(self.arrays, phrases, joiner, weights, allowed, limit):
            row = self._row(r.chunk_id)
            snippet = _fts_arrays.chunk_snippet(self.texts[row], phrases, column, MARKS, SNIPPET_TOKENS)
            out.append(self._hit(row, r.score, snippet))
        return out

    def _row(self, chunk_id: int) -> int:
        return int(np.searchsorted(self.arrays.row_chunk, chunk_id))

    def _hit(self, row: int, score: float, snippet: str) -> SearchHit:
        a = self.arrays
        t = int(a.row_topic[row])
        return SearchHit(int(a.topic_id[t]), int(a.row_chunk[row]), a.topic_collection[t], a.topic_slug[t],
                         self.topic_title[t], self.topic_breadcrumb[t], float(score), snippet)

    def _rows_with(self, token: str, prefix: bool) -> set[int]:
        lo, hi = self.arrays.term_range(token, prefix)
        start, stop = self.arrays.term_start[lo], self.arrays.term_start[hi]
        return set(self.arrays.post_row[start:stop].tolist())

    def _search_phrases(self, match: str, allowed: np.ndarray | None, weights: list[float], limit: int,
                        column: int) -> list[SearchHit]:
        """Any phrases (several tokens, or none), row by row: candidates from the postings, the
        instances from tokenising those rows again, ``rules.fts5.bm25`` per matching row."""
        a = self.arrays
        words, joiner = parse_match(match)
        phrases = [fts5.phrase(w.text, w.prefix) for w in words]
        if not phrases:
            return []
        tokenised: dict[int, list[list[str]]] = {}
        hits: list[dict[int, list[tuple[int, int]]]] = []
        for p in phrases:
            candidates: set[int] = set()
            for k, tok in enumerate(p.tokens):
                found = self._rows_with(tok, p.prefix and k == p.size - 1)
                candidates = found if k == 0 else candidates & found
            where: dict[int, list[tuple[int, int]]] = {}
            for row in sorted(candidates):
                if row not in tokenised:
                    tokenised[row] = [fts5.token_texts(fold(t)) for t in self.texts[row]]
                found_at = [(c, off) for c, col in enumerate(tokenised[row]) for off in fts5.phrase_offsets(p, col)]
                if found_at:
                    where[row] = found_at
            hits.append(where)
        rows = set(hits[0])
        for h in hits[1:]:
            rows = rows & set(h) if joiner == "AND" else rows | set(h)
        counts = [len(h) for h in hits]
        best: dict[int, tuple[float, int, list[fts5.Instance]]] = {}
        for row in rows:
            t = int(a.row_topic[row])
            if t < 0 or (allowed is not None and not allowed[t]):
                continue
            instances = sorted(fts5.Instance(c, off, i) for i, h in enumerate(hits) for c, off in h.get(row, ()))
            score = fts5.bm25(instances, len(phrases), weights, counts, int(a.row_len[row]), a.total_tokens,
                              a.n_rows)
            chunk = int(a.row_chunk[row])
            if t not in best or (score, chunk) < best[t][:2]:
                best[t] = (score, chunk, instances)
        ranked = sorted(best.items(), key=lambda kv: (kv[1][0], a.topic_collection[kv[0]], a.topic_slug[kv[0]]))
        sizes = [p.size for p in phrases]
        out = []
        for t, (score, chunk, instances) in ranked[: max(limit, 0)]:
            row = self._row(chunk)
            args = (self.texts[row], [len(c) for c in tokenised[row]], instances, sizes)
            snippet = (fts5.snippet(*args, column, *MARKS, SNIPPET_TOKENS)
                       or fts5.snippet(*args, -1, *MARKS, SNIPPET_TOKENS))
            out.append(self._hit(row, score, snippet))
        return out

