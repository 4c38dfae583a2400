"""An in-memory full-text index that answers like the SQLite pool's ``doc$chunk_fts``.

Firebird has no FTS5, so its storage keeps this index in process memory: every chunk's folded
title / heading / body tokenised by ``rules.fts5.tokenize`` (unicode61), an inverted index
term -> {row: [(column, offset)]} and a sorted vocabulary for prefix phrases. Matching, ``bm25``
and ``snippet`` come from ``rules.fts5``, with the table-wide statistics FTS5 uses (row count,
total tokens, rows per phrase over ALL chunks, whatever the caller may see), so scores, order and
snippets equal SQLite's. Built once per pool and change stamp; read-only afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from knowspec.impl.rules import fts5
from knowspec.impl.rules.fold import fold
from knowspec.impl.rules.fts_query import parse_match

COLUMNS = ("title", "heading", "body")


@dataclass
class ChunkRow:
    chunk_id: int
    topic_id: int
    columns: tuple[list[str], ...]  # folded tokens per column
    texts: tuple[str, ...]          # the original column texts (snippets cut these)


@dataclass
class FtsIndex:
    """The index of one pool at one change stamp."""

    stamp: tuple
    rows: list[ChunkRow] = field(default_factory=list)
    postings: dict[str, dict[int, list[tuple[int, int]]]] = field(default_factory=dict)
    vocabulary: list[str] = field(default_factory=list)
    total_tokens: int = 0
    by_chunk: dict[int, int] = field(default_factory=dict)

    @classmethod
    def build(cls, stamp: tuple, chunks: Iterable[tuple[int, int, str, str, str]]) -> "FtsIndex":
        """Index ``(chunk_id, topic_id, title, heading, body)`` rows (original text; folded here)."""
        index = cls(stamp)
        for chunk_id, topic_id, *texts in chunks:
            originals = tuple(t or "" for t in texts)
            columns = tuple(fts5.token_texts(fold(t)) for t in originals)
            row = len(index.rows)
            index.rows.append(ChunkRow(int(chunk_id), int(topic_id), columns, originals))
            index.by_chunk[int(chunk_id)] = row
            for c, tokens in enumerate(columns):
                index.total_tokens += len(tokens)
                for off, tok in enumerate(tokens):
                    index.postings.setdefault(tok, {}).setdefault(row, []).append((c, off))
        index.vocabulary = sorted(index.postings)
        return index

    # -- matching ------------------------------------------------------------------------------
    def _phrase_hits(self, phrase: fts5.Phrase) -> dict[int, list[tuple[int, int]]]:
        """Rows holding ``phrase`` -> its (column, offset) instances there."""
        if not phrase.tokens:
            return {}
        first = phrase.tokens[0]
        if phrase.size == 1 and phrase.prefix:
            hits: dict[int, list[tuple[int, int]]] = {}
            for k in fts5.prefix_range(self.vocabulary, first):
                for row, where in self.postings[self.vocabulary[k]].items():
                    hits.setdefault(row, []).extend(where)
            return {row: sorted(where) for row, where in hits.items()}
        if phrase.size == 1:
            return {row: list(where) for row, where in self.postings.get(first, {}).items()}
        candidates = self.postings.get(first, {})  # a multi-token phrase's first token is exact
        out: dict[int, list[tuple[int, int]]] = {}
        for row in candidates:
            where = [(c, off) for c, col in enumerate(self.rows[row].columns)
                     for off in fts5.phrase_offsets(phrase, col)]
            if where:
                out[row] = where
        return out

    def search(self, match: str, allowed_chunks: set[int] | None, weights: Sequence[float]
               ) -> tuple[list[fts5.Phrase], dict[int, tuple[float, list[fts5.Instance]]]]:
        """Matching allowed chunks -> (bm25, instances) for a ``rules.fts_query`` expression."""
        words, joiner = parse_match(match)
        phrases = [fts5.phrase(w.text, w.prefix) for w in words]
        hits = [self._phrase_hits(p) for p in phrases]
        counts = [len(h) for h in hits]
        if not hits:
            return phrases, {}
        rows = set(hits[0])
        for h in hits[1:]:
            rows = rows & set(h) if joiner == "AND" else rows | set(h)
        out: dict[int, tuple[float, list[fts5.Instance]]] = {}
        n_rows = len(self.rows)
        for row in rows:
            chunk = self.rows[row]
            if allowed_chunks is not None and chunk.chunk_id not in allowed_chunks:
                continue
            instances = sorted(fts5.Instance(c, off, i) for i, h in enumerate(hits) for c, off in h.get(row, ()))
            row_tokens = sum(len(col) for col in chunk.columns)
            score = fts5.bm25(instances, len(phrases), weights, counts, row_tokens, self.total_tokens, n_rows)
            out[chunk.chunk_id] = (score, instances)
        return phrases, out

    def column_sizes(self, chunk_id: int) -> list[int]:
        row = self.by_chunk.get(chunk_id)
        return [len(c) for c in self.rows[row].columns] if row is not None else [0] * len(COLUMNS)
