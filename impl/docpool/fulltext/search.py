"""Full-text search for every storage: storages give data, this module alone ranks.

Every storage hands over its postings (``PoolStorage.fulltext_index``: ``reader.FtsIndex``):
SQLite its FTS5 index read into arrays, PostgreSQL and Firebird an index of their chunk rows
kept in memory. ``search_hits`` ranks them here with FTS5's ``bm25()`` rule (``rank``), cuts
snippets with FTS5's ``snippet()`` rule (``snippet``) and reads from the storage only what the
index does not keep (the returned topics' titles and chunk texts, and for a word unicode61 splits
the candidate rows' texts). So the same pool ranks the same on every backend: same topics,
order, scores and snippets; no storage runs ranking SQL.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Collection, Mapping, Sequence

import numpy as np

from knowspec.impl.docpool.fulltext.reader import COLUMNS, FtsArrays, FtsIndex, PackedTexts
from knowspec.impl.docpool.fulltext.rank import PhraseRows, RankedRow, query_phrases, rank, rank_phrases
from knowspec.impl.docpool.fulltext.snippet import chunk_snippet, column_index, phrase_snippet
from knowspec.impl.docpool.storage.base import UNRESTRICTED, Access, PoolStorage, SearchHit
from knowspec.impl.rules.fts5 import Phrase

# The ranked hits (snippets not cut yet) -> the chunk ids whose snippets the caller will show.
SnippetChoice = Callable[[list[SearchHit]], Collection[int]]


@dataclass
class PhraseScan:
    """What the phrase passes of one search call share: its cancellation check (it raises once
    the call is cancelled), and the phrases found in the postings of one stamp, so that the OR
    pass after an empty AND pass reads no candidate row again."""

    check_cancelled: Callable[[], None] = lambda: None
    stamp: tuple | None = None
    found: dict[Phrase, PhraseRows] = field(default_factory=dict)

    def known(self, stamp: tuple) -> dict[Phrase, PhraseRows]:
        """The phrases found at ``stamp`` so far (none once the call moved on to a newer stamp)."""
        if self.stamp != stamp:
            self.stamp, self.found = stamp, {}
        return self.found


def allowed_topics(arrays: FtsArrays, access: Access, collection: str | None,
                   linked_to: tuple[str, str] | None, topic_ids: Callable[[], Sequence[int]]) -> np.ndarray | None:
    """The topics a search may return, as a mask over ``arrays.topic_id`` (``None``: all). An
    unrestricted caller's collection is known from the arrays; ACLs and entity links come from
    ``topic_ids()`` (the storage's ``topic_ids``, read once per call by the caller)."""
    if access.unrestricted and linked_to is None:
        return None if collection is None else arrays.collection_mask(collection)
    return np.isin(arrays.topic_id, np.asarray(topic_ids(), dtype=np.int64))


def search_hits(pool: PoolStorage, match: str, access: Access, *, limit: int, weights: Sequence[float],
                snippet_column: str, collection: str | None = None, linked_to: tuple[str, str] | None = None,
                stamp: tuple | None = None, topic_ids: Callable[[], Sequence[int]] | None = None,
                snippets_for: SnippetChoice | None = None, phrase_scan: PhraseScan | None = None) -> list[SearchHit]:
    """The best chunk per allowed topic for ``match`` (a ``rules.fts_query`` expression: quoted
    folded words, ``*`` for prefixes, joined by AND or OR), ranked by bm25 ascending then
    (collection, slug), at most ``limit``, with snippets. ``linked_to`` keeps only topics linked
    to that (kind, key) entity. ``stamp`` / ``topic_ids``: the pool's change stamp and allowed
    topic ids when the caller already has them (one read per call). ``snippets_for``: given the
    ranked hits, the chunk ids whose snippets are cut (the others keep ``""``): a hybrid search
    shows only the hits its fusion keeps, and a snippet costs more than ranking a hit.
    ``phrase_scan``: what this call's passes share on the row-by-row phrase path (whose cost
    grows with the rows its words occur in): the call's cancellation check, the phrases found.

    When the storage no longer holds a ranked topic or chunk (an import landed after the
    postings were read), the search runs once more over the postings of the new stamp."""
    stamp = pool.change_stamp() if stamp is None else stamp
    ids = topic_ids or (lambda: pool.topic_ids(access, collection=collection, linked_to=linked_to))

    def ranked(at: tuple, stale_ok: bool) -> list[SearchHit] | None:
        return index_hits(pool, pool.fulltext_index(at), match, access, limit=limit, weights=weights,
                          snippet_column=snippet_column, collection=collection, linked_to=linked_to,
                          topic_ids=ids, stale_ok=stale_ok, snippets_for=snippets_for,
                          phrase_scan=phrase_scan)

    try:
        hits = ranked(stamp, False)
    except LookupError:  # a persisted part changed under this request (a SQLite import committed)
        hits = None
    if hits is None:
        hits = ranked(pool.change_stamp(), True)
    assert hits is not None  # stale_ok never gives None
    return hits


def index_hits(pool: PoolStorage, index: FtsIndex, match: str, access: Access, *, limit: int,
               weights: Sequence[float], snippet_column: str, collection: str | None = None,
               linked_to: tuple[str, str] | None = None,
               topic_ids: Callable[[], Sequence[int]] | None = None, stale_ok: bool = False,
               snippets_for: SnippetChoice | None = None,
               phrase_scan: PhraseScan | None = None) -> list[SearchHit] | None:
    """Hits ranked from ``index`` (``search_hits``' contract). ``None``: a ranked topic or chunk
    is gone from the storage (the index is older than the pool); with ``stale_ok`` such hits are
    left out instead."""
    if topic_ids is None:
        topic_ids = lambda: pool.topic_ids(access, collection=collection, linked_to=linked_to)  # noqa: E731
    weights = list(weights)[: len(COLUMNS)] or [1.0]
    column = column_index(snippet_column)
    allowed = allowed_topics(index.arrays, access, collection, linked_to, topic_ids)
    parsed = query_phrases(match)
    if parsed is None:  # a word unicode61 splits: phrases found row by row in the candidates' texts
        # Every candidate's text, whoever asks: the phrase's statistics count all rows, as FTS5's
        # do; what is shown is checked against the caller's ACL in ``_hits``.
        scan = phrase_scan or PhraseScan()
        found = rank_phrases(index.arrays, _row_texts(pool, index, UNRESTRICTED), match, allowed, weights, limit,
                             known=scan.known(index.stamp), check_cancelled=scan.check_cancelled)
        return _hits(pool, index, found, lambda r: phrase_snippet(r.texts, r.column_sizes, r.instances,
                                                                   r.phrase_sizes, column), access, stale_ok,
                     snippets_for)
    phrases, joiner = parsed
    index.prefetch_postings(phrases)  # a persisted index not read yet: its terms' postings in one go
    ranked = [(index.row(r.chunk_id), r.score) for r in rank(index.arrays, phrases, joiner, weights, allowed, limit)]
    if index.texts is not None:
        texts: Mapping[int, Sequence[str]] = _kept_texts(index.texts, [row for row, _ in ranked])
    else:
        texts = _row_texts(pool, index, access)([row for row, _ in ranked])
    rows = [RankedRow(row, score, [], [], [], tuple(texts[row])) for row, score in ranked if row in texts]
    if len(rows) < len(ranked) and not stale_ok:
        return None
    return _hits(pool, index, rows, lambda r: chunk_snippet(r.texts, phrases, column), access, stale_ok, snippets_for)


def _row_texts(pool: PoolStorage, index: FtsIndex, access: Access) -> Callable[[list[int]], Mapping[int, Sequence[str]]]:
    """Original texts of index rows: kept by the index, else read from the storage by chunk id."""
    if index.texts is not None:
        kept = index.texts
        return lambda rows: _kept_texts(kept, rows)
    a = index.arrays
    chunk_of = a.row_chunk

    def read(rows: list[int]) -> Mapping[int, Sequence[str]]:
        """Rows whose chunk the storage holds, in one read, under a topic ``access`` allows and
        with the id, collection and slug the index names for it; any other row is left out as
        stale (the index predates an import that renumbered chunks and topics alike)."""
        found = pool.chunk_columns([int(chunk_of[r]) for r in rows], access)
        out = {}
        for r in rows:
            row = found.get(int(chunk_of[r]))
            t = a.row_topic[r]
            if row is not None and row[:3] == (int(a.topic_id[t]), a.topic_collection[t], a.topic_slug[t]):
                out[r] = tuple(x or "" for x in row[3:])
        return out
    return read


def _kept_texts(texts: Sequence[tuple[str, str, str]], rows: list[int]) -> dict[int, tuple[str, str, str]]:
    """The index's own texts of ``rows`` (a persisted index reads the parts they lie in at once)."""
    if isinstance(texts, PackedTexts):
        texts.prefetch(rows)
    return {r: texts[r] for r in rows}


def _hits(pool: PoolStorage, index: FtsIndex, rows: list[RankedRow], snippet: Callable[[RankedRow], str],
          access: Access, stale_ok: bool, snippets_for: SnippetChoice | None = None) -> list[SearchHit] | None:
    """``SearchHit`` per ranked row, checked against the storage now: its topic must be one the
    caller may read, with the collection and slug the index names (the index, or the allowed
    ids it was filtered by, may come from before an import renumbered the topics: such a hit
    is stale, never shown). Titles from that read; snippets cut for every hit, or for those
    ``snippets_for`` chooses."""
    if not rows:
        return []
    a = index.arrays
    topic_of = [int(a.row_topic[r.row]) for r in rows]
    read = pool.topics_by_id([int(a.topic_id[t]) for t in topic_of], access, with_body=False)
    titles = {}
    for t in topic_of:
        now = read.get(int(a.topic_id[t]))
        if now is not None and (now.collection, now.slug) == (a.topic_collection[t], a.topic_slug[t]):
            titles[t] = (now.title, now.breadcrumb)
    out, kept = [], []
    for r, t in zip(rows, topic_of):
        if t not in titles:
            if not stale_ok:
                return None
            continue
        kept.append(r)
        out.append(SearchHit(int(a.topic_id[t]), int(a.row_chunk[r.row]), a.topic_collection[t], a.topic_slug[t],
                             titles[t][0], titles[t][1], float(r.score)))
    chosen = None if snippets_for is None else set(snippets_for(list(out)))
    return [replace(h, snippet=snippet(r)) if chosen is None or h.chunk_id in chosen else h for h, r in zip(out, kept)]
