"""doc_search / help_search ranking: full text, vector and hybrid (seed 001, "doc_search in detail").

This is the one search layer: storages only return data (postings, rows, vectors) and it ranks.
``search_pool`` is the entry point. Full text builds the MATCH with ``rules.fts_query`` (AND
first, OR when AND finds nothing) and ranks the storage's postings with ``fulltext.search``, the
same way for every storage (no storage ranks full text itself). Vector mode embeds the query with the pool's model pack
(``vectors.embedder.query_vector``: ``embedding model not found`` / ``embedding runtime not
found``), reads the pool's vectors once per process (``vectors.scoring.cached_pool_vectors``,
refreshed when the storage's change stamp moves) and ranks with ``vectors.scoring.vector_rank``
over the topics the caller may see *and* that pass the collection / module filters, so the
filters act before the top-80 cut. Hybrid fuses both lists with ``rules.rrf.hybrid_rank``;
its vector half (embedding and, once the matrices are loaded, ranking) runs on a worker thread
while full text ranks on the calling one, which alone reads the storage; full text cuts the
snippets of only the hits the fusion answers with (a snippet costs more than ranking a hit).

One call reads its pool's recipes, change stamp and allowed topic ids once (``PoolReads``),
whatever the mode and however many full-text passes it makes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from knowspec.impl import runtime as process
from knowspec.impl.context import CallContext
from knowspec.impl.docpool.fulltext.search import PhraseScan, SnippetChoice, search_hits
from knowspec.impl.docpool.storage.base import UNRESTRICTED, Access, PoolStorage, SearchHit
from knowspec.impl.errors import ToolError, diagnostic
from knowspec.impl.rules.fts_query import build_fts_query, parse_stopwords

DEFAULT_WEIGHTS = (10.0, 5.0, 1.0)
HYBRID_TOP = 20          # each list's depth in the fusion (rules.rrf)


@dataclass(frozen=True)
class RankedTopic:
    """One search result before it is rendered (``method``: fts | vector | fts+vector)."""

    topic_id: int
    collection: str
    slug: str
    title: str
    breadcrumb: str
    snippet: str
    score: float
    method: str


def recipe(meta: dict[str, dict[str, str]], name: str, collection: str | None = None) -> str | None:
    """A ``doc$meta`` value: the collection's own row, else the general recipe (collection '')."""
    if collection and name in meta.get(collection, {}):
        return meta[collection][name]
    return meta.get("", {}).get(name)


MAX_WEIGHT = 1e9  # a weight past this (or not a number: nan, inf) makes the recipe the default


def parse_weights(raw: str | None) -> tuple[float, ...]:
    """``search_bm25_weights`` ("10, 5, 1"): one weight per FTS column; the default when any is
    not a number within ``MAX_WEIGHT``: an imported recipe of ``nan`` or ``1e309`` made every
    score nan or infinite, and every search of the pool fail."""
    try:
        weights = tuple(float(w) for w in (raw or "").replace(";", ",").split(",") if w.strip())
    except ValueError:
        weights = ()
    if not all(abs(w) <= MAX_WEIGHT for w in weights):  # also false for nan
        weights = ()
    return weights or DEFAULT_WEIGHTS


MAX_CACHED_ALLOWED_TOPICS = 64


def allowed_topics_cache(runtime: process.Runtime) -> process.Cache:
    """The ids of the topics a search may return, per pool, access and filters (collection,
    linked entity), kept while the pool's change stamp holds: every import bumps it, and ACLs,
    collections and links change only by imports. Reading them took 3.5 ms per call for 5k of
    10k topics (a scan of the topic table); the budget counts the arrays' bytes."""
    return runtime.cache("docpool.allowed_topics", max_entries=MAX_CACHED_ALLOWED_TOPICS, sizeof=lambda ids: ids.nbytes)


class PoolReads:
    """What one search call reads of its pool, each at most once: the recipes (``meta``), the
    change stamp and the ids of the topics it may return (access, collection, linked entity;
    from ``allowed_topics_cache`` while the stamp holds)."""

    def __init__(self, pool: PoolStorage, access: Access, collection: str | None = None,
                 linked_to: tuple[str, str] | None = None) -> None:
        self.pool, self.access, self.collection, self.linked_to = pool, access, collection, linked_to
        self._meta: dict[str, dict[str, str]] | None = None
        self._stamp: tuple | None = None
        self._ids: np.ndarray | None = None

    @property
    def meta(self) -> dict[str, dict[str, str]]:
        if self._meta is None:
            self._meta = self.pool.meta()
        return self._meta

    @property
    def stamp(self) -> tuple:
        if self._stamp is None:
            self._stamp = self.pool.change_stamp()
        return self._stamp

    def allowed_ids(self) -> np.ndarray:
        """Ascending int64 ids, read-only (the array is shared by the calls the cache answers).
        Kept for the stamp only when the stamp still holds after the read: ids read while an
        import committed belong to no stamp, and are this call's alone."""
        if self._ids is None:
            key = (*_pool_key(self.pool), self.access, self.collection, self.linked_to)
            cache = allowed_topics_cache(process.current())
            ids = cache.peek(key, self.stamp)
            if ids is None:
                ids = self._read_allowed_ids()
                if self.pool.change_stamp() == self.stamp:
                    cache.put(key, self.stamp, ids)
            self._ids = ids
        return self._ids

    def _read_allowed_ids(self) -> np.ndarray:
        ids = np.asarray(self.pool.topic_ids(self.access, collection=self.collection, linked_to=self.linked_to),
                         dtype=np.int64)
        ids.flags.writeable = False
        return ids

    @property
    def filtered(self) -> bool:
        """Whether some topics are excluded (an ACL, a collection or an entity link)."""
        return not self.access.unrestricted or self.collection is not None or self.linked_to is not None


def fts_ranked(pool: PoolStorage, query: str, access: Access, *, limit: int,
               collection: str | None = None, linked_to: tuple[str, str] | None = None,
               reads: PoolReads | None = None, snippets_for: SnippetChoice | None = None,
               check_cancelled: Callable[[], None] = lambda: None) -> list[RankedTopic]:
    """Full-text results: AND of the words, else OR; bm25 ascending (smaller = better).
    ``snippets_for``: which hits get their snippets cut; ``check_cancelled``: raises once the
    call is cancelled (``fulltext.search.search_hits``)."""
    reads = reads or PoolReads(pool, access, collection, linked_to)
    meta = reads.meta
    stop = parse_stopwords(recipe(meta, "search_stopwords", collection))
    built = build_fts_query(query, stop)
    if built is None:
        return []
    kwargs: dict[str, Any] = dict(
        limit=limit, weights=parse_weights(recipe(meta, "search_bm25_weights", collection)),
        snippet_column=recipe(meta, "chunk_fts_snippet_column", collection) or "body",
        collection=collection, linked_to=linked_to, stamp=reads.stamp, topic_ids=reads.allowed_ids,
        snippets_for=snippets_for, phrase_scan=PhraseScan(check_cancelled))
    hits = search_hits(pool, built.all_words, access, **kwargs)
    if not hits and built.any_word:
        check_cancelled()
        hits = search_hits(pool, built.any_word, access, **kwargs)
    return [_from_fts(h) for h in hits]


def _from_fts(h: SearchHit) -> RankedTopic:
    return RankedTopic(h.topic_id, h.collection, h.slug, h.title, h.breadcrumb, h.snippet, h.score, "fts")


def _query_embedder(ctx: CallContext, reads: PoolReads, query: str) -> Callable[[], Any]:
    """A call that embeds ``query`` with the pool's pack (prefix, model and dimension read now, so
    the call itself touches no storage and may run on another thread)."""
    try:
        from knowspec.impl.docpool.vectors.embedder import query_vector
    except ImportError as exc:  # the vector layer is absent from this build
        raise ToolError("embedding_unavailable", "embedding model not found") from exc
    meta, collection = reads.meta, reads.collection
    dim = recipe(meta, "vec_dim", collection)
    prefix = recipe(meta, "vec_query_prefix", collection) or ""
    model = recipe(meta, "vec_model", collection)
    return lambda: query_vector(ctx.settings.model_dir, query, prefix=prefix, pool_model=model,
                                pool_dim=int(dim) if dim else None)


def _vector_ranked(ctx: CallContext, reads: PoolReads, embed: Callable[[], Any], *, limit: int) -> list[RankedTopic]:
    """Vector results over allowed topics: the plug-in point of ``docpool.vectors``.

    ``embed()`` gives the query vector (``_query_embedder``: ``embedding model not found`` /
    ``embedding runtime not found`` when the pack or ONNX Runtime is missing); the pool's
    matrices are streamed from the storage into preallocated arrays once per process and cached
    until the storage's change stamp moves (an import).
    """
    q = embed()
    ctx.check_cancelled("doc_search")
    vectors = _pool_vectors(ctx, reads, default_dim=len(q))
    return _rendered(reads, _vector_hits(ctx, reads, vectors, q, reads.allowed_ids() if reads.filtered else None, limit))


def _pool_key(pool: PoolStorage) -> tuple[str, str]:
    """Which pool a per-pool cache entry (vectors, allowed topics) belongs to."""
    return (type(pool).__name__, pool.location)


def _approximate(ctx: CallContext) -> bool:
    """The operator's opt-in to the approximate index (``vectors/approximate.py``); never the default."""
    return process.of(ctx).settings.vector_index == "approximate"


def _pool_vectors(ctx: CallContext, reads: PoolReads, *, default_dim: int) -> Any:
    """The pool's ``PoolVectors`` at its current stamp, loaded on a miss (``default_dim``: an
    empty pool's). Reads the storage, so it runs on the caller's thread."""
    from knowspec.impl.docpool.vectors.scoring import PoolVectors, cached_pool_vectors

    pool = reads.pool
    sketch = False if _approximate(ctx) else None  # the approximate index re-scores in float32 alone

    def load() -> PoolVectors:
        return PoolVectors.from_streams(
            (pool.vector_count("topic", UNRESTRICTED), pool.iter_vectors("topic", UNRESTRICTED)),
            (pool.vector_count("chunk", UNRESTRICTED), pool.iter_vectors("chunk", UNRESTRICTED)),
            default_dim=default_dim, sketch=sketch)

    return cached_pool_vectors(_pool_key(pool), reads.stamp, load)


def _vector_hits(ctx: CallContext, reads: PoolReads, vectors: Any, q: Any, allowed: np.ndarray | None,
                 limit: int) -> list[Any]:
    """``vector_rank`` (or the approximate index's rank) after checking the query's dimension;
    touches no storage (``reads`` only names the pool and its stamp), so it may run on another thread."""
    from knowspec.impl.docpool.vectors.scoring import vector_rank

    if vectors.dim != len(q):
        raise ToolError("embedding_unavailable", "embedding model does not match the pool",
                        diagnostics=[diagnostic("embedding_unavailable", f"the pool's vectors have dimension "
                                                f"{vectors.dim}, the model gives {len(q)}")])
    ctx.check_cancelled("doc_search")
    if _approximate(ctx):  # candidates re-scored exactly in float32, then the seed's rule
        from knowspec.impl.docpool.vectors.approximate import approximate_rank

        return approximate_rank(_pool_key(reads.pool), reads.stamp, vectors, q, allowed, limit,
                                process.of(ctx).settings.vector_candidates)
    return vector_rank(vectors, q, allowed, limit)


def _rendered(reads: PoolReads, hits: list[Any]) -> list[RankedTopic]:
    """Ranked vector hits with their topics' rows and snippets, read from the storage now: a hit
    whose topic the caller may not read now, or whose chunk now belongs to another topic (the
    vectors were loaded before an import renumbered them), is left out, never shown."""
    from knowspec.impl.docpool.vectors.scoring import vector_snippet

    pool = reads.pool
    # A topic's body is read only as the snippet of a hit without a chunk vector.
    topics = pool.topics_by_id([h.topic_id for h in hits], reads.access,
                               with_body=any(h.chunk_id is None for h in hits))
    texts = pool.chunk_texts([h.chunk_id for h in hits if h.chunk_id is not None], reads.access)
    out = []
    for h in hits:
        t = topics.get(h.topic_id)
        if t is None:
            continue
        if h.chunk_id is not None:  # its chunk, read with its topic: the same topic as read above
            chunk = texts.get(h.chunk_id)
            if chunk is None or chunk[:3] != (h.topic_id, t.collection, t.slug):
                continue
            text = chunk[3]
        else:
            text = t.description or t.body_md
        out.append(RankedTopic(h.topic_id, t.collection, t.slug, t.title, t.breadcrumb,
                               vector_snippet(text), h.score, "vector"))
    return out


def _hybrid_ranked(ctx: CallContext, reads: PoolReads, query: str, limit: int) -> list[RankedTopic]:
    """Hybrid: the vector half (embedding, then ranking when the pool's matrices are loaded) on a
    worker thread while full text ranks on this one; ONNX Runtime and numpy's scans release the
    GIL. The worker touches no storage: the matrices and the allowed ids are read here first.
    The vector list is ranked as deep as either outcome of full text needs and cut after it
    (a ranking's first n are the ranking to depth n).

    Measured against this order at 100k chunks: embedding first on this thread, then ranking on
    the worker beside full text, was slower (p50 17.5 vs 16.1 ms through the server, more CPU):
    the embedding is one long run without the GIL, while the ranking's many short numpy calls
    each wait for the GIL that full text holds."""
    executor = process.of(ctx).executor("embed", 2)
    embed = _query_embedder(ctx, reads, query)
    from knowspec.impl.docpool.vectors.scoring import loaded_pool_vectors

    vectors = loaded_pool_vectors(_pool_key(reads.pool), reads.stamp)
    allowed = reads.allowed_ids() if reads.filtered else None
    if vectors is not None:
        ranking = executor.submit(lambda: _vector_hits(ctx, reads, vectors, embed(), allowed, max(HYBRID_TOP, limit)))
    else:  # the matrices load (from storage, on this thread) once the query is embedded
        ranking = executor.submit(embed)
    rendered: dict[int, list[RankedTopic]] = {}

    def vector_ranked(depth: int) -> list[RankedTopic]:
        """The vector list to ``depth``, rendered (read from the storage, on this thread) once."""
        if depth not in rendered:
            if vectors is not None:
                hits = ranking.result()[:depth]
            else:
                q = ranking.result()
                ctx.check_cancelled("doc_search")
                hits = _vector_hits(ctx, reads, _pool_vectors(ctx, reads, default_dim=len(q)), q, allowed, depth)
            rendered[depth] = _rendered(reads, hits)
        return rendered[depth]

    def kept_by_fusion(fts_hits: list[Any]) -> set[int]:
        """The chunks of the full-text hits the fusion answers with: only their snippets are cut."""
        if not fts_hits:
            return set()
        kept = {f.key for f in _fused(fts_hits, vector_ranked(HYBRID_TOP), limit, HYBRID_TOP)}
        return {h.chunk_id for h in fts_hits if h.topic_id in kept}

    fts = fts_ranked(reads.pool, query, reads.access, limit=HYBRID_TOP, collection=reads.collection,
                     linked_to=reads.linked_to, reads=reads, snippets_for=kept_by_fusion,
                     check_cancelled=lambda: ctx.check_cancelled("doc_search"))
    # Full text found nothing: the answer is the vector ranking alone, as deep as ``limit``.
    depth = HYBRID_TOP if fts else limit
    return fuse(fts, vector_ranked(depth), limit, depth)


def _fused(fts: list[Any], vec: list[RankedTopic], limit: int, depth: int) -> list[Any]:
    """``rules.rrf.hybrid_rank`` of the full-text hits and the vector list (each with
    ``topic_id``, ``collection``, ``slug``); equal sums by collection, then slug."""
    from knowspec.impl.rules.rrf import hybrid_rank

    names = {h.topic_id: (h.collection, h.slug) for h in [*vec, *fts]}
    return hybrid_rank([h.topic_id for h in fts], [(r.topic_id, r.score) for r in vec], limit, depth=depth,
                       tie_key=names.__getitem__)


def fuse(fts: list[RankedTopic], vec: list[RankedTopic], limit: int, depth: int = HYBRID_TOP) -> list[RankedTopic]:
    """Hybrid: weighted reciprocal rank fusion (``rules.rrf``); vector alone when full text is empty."""
    by_id = {r.topic_id: r for r in vec}
    by_id.update({r.topic_id: r for r in fts})  # the full-text snippet wins
    fused = _fused(fts, vec, limit, depth)
    return [RankedTopic(f.key, by_id[f.key].collection, by_id[f.key].slug, by_id[f.key].title,
                        by_id[f.key].breadcrumb, by_id[f.key].snippet, f.score, f.method) for f in fused]


def search_pool(ctx: CallContext, pool: PoolStorage, query: str, access: Access, *, mode: str = "fts",
                limit: int = 10, collection: str | None = None,
                linked_to: tuple[str, str] | None = None) -> list[RankedTopic]:
    """Search one pool in ``mode`` (fts | vector | hybrid) over the topics ``access`` allows."""
    ctx.check_cancelled("doc_search")
    reads = PoolReads(pool, access, collection, linked_to)
    if mode == "fts":
        return fts_ranked(pool, query, access, limit=limit, collection=collection, linked_to=linked_to, reads=reads,
                          check_cancelled=lambda: ctx.check_cancelled("doc_search"))
    if mode == "vector":
        embed = _query_embedder(ctx, reads, query)
        return _vector_ranked(ctx, reads, embed, limit=limit)
    if mode == "hybrid":
        return _hybrid_ranked(ctx, reads, query, limit)
    raise ToolError("invalid_request", f"unknown search mode {mode!r}: fts, vector or hybrid")
