"""Full-text search for every storage: storages give postings, this module ranks them.

A storage hands over its index (``PoolStorage.fulltext_index``: ``reader.FtsIndex``) or ``None``
when its own engine ranks (PostgreSQL's ``ts_rank_cd``; SQLite's FTS5 while the arrays are being
read). With an index, ``search_hits`` ranks here (``rank``), cuts snippets (``snippet``) and reads
only the returned topics' titles and chunk texts from the storage (none at all when the index
keeps them, as Firebird's does); anything the arrays cannot answer exactly goes to the storage's
``search_fts`` (FTS5 stays the reference on SQLite).
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from knowspec.impl.docpool.fulltext.reader import COLUMNS, FtsArrays, FtsIndex
from knowspec.impl.docpool.fulltext.rank import query_phrases, rank, rank_phrases
from knowspec.impl.docpool.fulltext.snippet import chunk_snippet, column_index, phrase_snippet
from knowspec.impl.docpool.storage.base import UNRESTRICTED, Access, PoolStorage, SearchHit


def allowed_topics(arrays: FtsArrays, access: Access, collection: str | None,
                   linked_to: tuple[str, str] | None, topic_ids: Callable[[], Sequence[int]]) -> np.ndarray | None:
    """The topics a search may return, as a mask over ``arrays.topic_id`` (``None``: all). An
    unrestricted caller's collection is known from the arrays; ACLs and entity links come from
    ``topic_ids()`` (the storage's ``topic_ids``, read once per call by the caller)."""
    if access.unrestricted and linked_to is None:
        return None if collection is None else arrays.collection_mask(collection)
    return np.isin(arrays.topic_id, np.asarray(list(topic_ids()), dtype=np.int64))


def search_hits(pool: PoolStorage, match: str, access: Access, *, limit: int, weights: Sequence[float],
                snippet_column: str, collection: str | None = None, linked_to: tuple[str, str] | None = None,
                stamp: tuple | None = None, topic_ids: Callable[[], Sequence[int]] | None = None) -> list[SearchHit]:
    """The best chunk per allowed topic for ``match`` (a ``rules.fts_query`` expression), ranked
    by score then (collection, slug), at most ``limit``, with snippets (``PoolStorage.search_fts``'s
    contract). ``stamp`` / ``topic_ids``: the pool's change stamp and allowed topic ids when the
    caller already has them (one read per call)."""
    index = pool.fulltext_index(pool.change_stamp() if stamp is None else stamp)
    hits = None
    if index is not None:
        ids = topic_ids or (lambda: pool.topic_ids(access, collection=collection, linked_to=linked_to))
        hits = index_hits(pool, index, match, access, limit=limit, weights=weights, snippet_column=snippet_column,
                       collection=collection, linked_to=linked_to, topic_ids=ids)
    if hits is None:
        hits = pool.search_fts(match, access, limit=limit, weights=weights, snippet_column=snippet_column,
                               collection=collection, linked_to=linked_to)
    return hits


def index_hits(pool: PoolStorage, index: FtsIndex, match: str, access: Access, *, limit: int,
               weights: Sequence[float], snippet_column: str, collection: str | None = None,
               linked_to: tuple[str, str] | None = None,
               topic_ids: Callable[[], Sequence[int]] | None = None) -> list[SearchHit] | None:
    """Hits ranked from ``index`` (``search_hits``' contract); ``None``: the storage's engine must
    answer (a word FTS5 splits and no kept texts, or the pool changed under the arrays)."""
    if topic_ids is None:
        topic_ids = lambda: pool.topic_ids(access, collection=collection, linked_to=linked_to)  # noqa: E731
    parsed = query_phrases(match)
    if parsed is None and index.texts is None:
        return None  # a word unicode61 splits: only FTS5 itself (or kept texts) can find the phrase
    weights = list(weights)[: len(COLUMNS)] or [1.0]
    column = column_index(snippet_column)
    allowed = allowed_topics(index.arrays, access, collection, linked_to, topic_ids)
    if parsed is None:
        assert index.texts is not None
        return [_kept_hit(index, r.row, r.score, phrase_snippet(index.texts[r.row], r.column_sizes, r.instances,
                                                                 r.phrase_sizes, column))
                for r in rank_phrases(index.arrays, index.texts, match, allowed, weights, limit)]
    phrases, joiner = parsed
    ranked = rank(index.arrays, phrases, joiner, weights, allowed, limit)
    if index.texts is not None:
        rows = [index.row(r.chunk_id) for r in ranked]
        return [_kept_hit(index, row, r.score, chunk_snippet(index.texts[row], phrases, column))
                for row, r in zip(rows, ranked)]
    topics = pool.topics_by_id([r.topic_id for r in ranked], UNRESTRICTED)
    chunks = pool.chunk_columns([r.chunk_id for r in ranked])
    out = []
    for r in ranked:
        t, texts = topics.get(r.topic_id), chunks.get(r.chunk_id)
        if t is None or texts is None:  # the pool changed under the arrays: let its engine answer
            return None
        out.append(SearchHit(r.topic_id, r.chunk_id, t.collection, t.slug, t.title, t.breadcrumb, r.score,
                             chunk_snippet([x or "" for x in texts], phrases, column)))
    return out


def _kept_hit(index: FtsIndex, row: int, score: float, snippet: str) -> SearchHit:
    """A hit from an index that keeps its texts and topic titles (no storage read)."""
    a = index.arrays
    t = int(a.row_topic[row])
    assert index.topic_title is not None and index.topic_breadcrumb is not None
    return SearchHit(int(a.topic_id[t]), int(a.row_chunk[row]), a.topic_collection[t], a.topic_slug[t],
                     index.topic_title[t], index.topic_breadcrumb[t], float(score), snippet)
