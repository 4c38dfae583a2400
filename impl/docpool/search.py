"""doc_search / help_search ranking: full text, vector and hybrid (seed 001, "doc_search in detail").

``search_pool`` is the one entry point. Full text builds the MATCH with ``rules.fts_query`` (AND
first, OR when AND finds nothing) and asks the storage for the best chunk per allowed topic,
ranked by ``bm25`` with the pool's weights. Vector mode embeds the query with the pool's model
pack (``vectors.embedder.query_vector``: ``embedding model not found`` / ``embedding runtime not
found``), reads the pool's vectors once per process (``vectors.scoring.cached_pool_vectors``,
refreshed when the storage's change stamp moves) and ranks with ``vectors.scoring.vector_rank``
over the topics the caller may see *and* that pass the collection / module filters, so the
filters act before the top-80 cut. Hybrid fuses both lists with ``rules.rrf.hybrid_rank``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from knowspec.impl import runtime as process
from knowspec.impl.context import CallContext
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


def parse_weights(raw: str | None) -> tuple[float, ...]:
    """``search_bm25_weights`` ("10, 5, 1"): one weight per FTS column."""
    try:
        weights = tuple(float(w) for w in (raw or "").replace(";", ",").split(",") if w.strip())
    except ValueError:
        weights = ()
    return weights or DEFAULT_WEIGHTS


def fts_ranked(pool: PoolStorage, query: str, access: Access, *, limit: int,
               collection: str | None = None, linked_to: tuple[str, str] | None = None) -> list[RankedTopic]:
    """Full-text results: AND of the words, else OR; bm25 ascending (smaller = better)."""
    meta = pool.meta()
    stop = parse_stopwords(recipe(meta, "search_stopwords", collection))
    built = build_fts_query(query, stop)
    if built is None:
        return []
    kwargs: dict[str, Any] = dict(
        limit=limit, weights=parse_weights(recipe(meta, "search_bm25_weights", collection)),
        snippet_column=recipe(meta, "chunk_fts_snippet_column", collection) or "body",
        collection=collection, linked_to=linked_to)
    hits = pool.search_fts(built.all_words, access, **kwargs)
    if not hits and built.any_word:
        hits = pool.search_fts(built.any_word, access, **kwargs)
    return [_from_fts(h) for h in hits]


def _from_fts(h: SearchHit) -> RankedTopic:
    return RankedTopic(h.topic_id, h.collection, h.slug, h.title, h.breadcrumb, h.snippet, h.score, "fts")


def _query_embedder(ctx: CallContext, pool: PoolStorage, query: str, collection: str | None) -> Callable[[], Any]:
    """A call that embeds ``query`` with the pool's pack (prefix, model and dimension read now, so
    the call itself touches no storage and may run on another thread)."""
    try:
        from knowspec.impl.docpool.vectors.embedder import query_vector
    except ImportError as exc:  # the vector layer is absent from this build
        raise ToolError("embedding_unavailable", "embedding model not found") from exc
    meta = pool.meta()
    dim = recipe(meta, "vec_dim", collection)
    prefix = recipe(meta, "vec_query_prefix", collection) or ""
    model = recipe(meta, "vec_model", collection)
    return lambda: query_vector(ctx.settings.model_dir, query, prefix=prefix, pool_model=model,
                                pool_dim=int(dim) if dim else None)


def _vector_ranked(ctx: CallContext, pool: PoolStorage, embed: Callable[[], Any], access: Access, *, limit: int,
                   collection: str | None, linked_to: tuple[str, str] | None) -> list[RankedTopic]:
    """Vector results over allowed topics: the plug-in point of ``docpool.vectors``.

    ``embed()`` gives the query vector (``_query_embedder``: ``embedding model not found`` /
    ``embedding runtime not found`` when the pack or ONNX Runtime is missing); the pool's
    matrices are streamed from the storage into preallocated arrays once per process and cached
    until the storage's change stamp moves (an import).
    """
    from knowspec.impl.docpool.vectors.scoring import PoolVectors, cached_pool_vectors, vector_rank, vector_snippet

    q = embed()
    ctx.check_cancelled("doc_search")

    def load() -> "PoolVectors":
        return PoolVectors.from_streams(
            (pool.vector_count("topic", UNRESTRICTED), pool.iter_vectors("topic", UNRESTRICTED)),
            (pool.vector_count("chunk", UNRESTRICTED), pool.iter_vectors("chunk", UNRESTRICTED)),
            default_dim=len(q))

    vectors = cached_pool_vectors((type(pool).__name__, pool.location), pool.change_stamp(), load)
    if vectors.dim != len(q):
        raise ToolError("embedding_unavailable", "embedding model does not match the pool",
                        diagnostics=[diagnostic("embedding_unavailable", f"the pool's vectors have dimension "
                                                f"{vectors.dim}, the model gives {len(q)}")])
    ctx.check_cancelled("doc_search")
    allowed = None
    if not access.unrestricted or collection is not None or linked_to is not None:
        allowed = pool.topic_ids(access, collection=collection, linked_to=linked_to)
    hits = vector_rank(vectors, q, allowed, limit)
    topics = pool.topics_by_id([h.topic_id for h in hits], access)
    texts = pool.chunk_texts([h.chunk_id for h in hits if h.chunk_id is not None])
    out = []
    for h in hits:
        t = topics.get(h.topic_id)
        if t is None:
            continue
        text = texts.get(h.chunk_id, "") if h.chunk_id is not None else (t.description or t.body_md)
        out.append(RankedTopic(h.topic_id, t.collection, t.slug, t.title, t.breadcrumb,
                               vector_snippet(text), h.score, "vector"))
    return out


def fuse(fts: list[RankedTopic], vec: list[RankedTopic], limit: int, depth: int = HYBRID_TOP) -> list[RankedTopic]:
    """Hybrid: weighted reciprocal rank fusion (``rules.rrf``); vector alone when full text is empty."""
    from knowspec.impl.rules.rrf import hybrid_rank

    by_id = {r.topic_id: r for r in vec}
    by_id.update({r.topic_id: r for r in fts})  # the full-text snippet wins
    fused = hybrid_rank([r.topic_id for r in fts], [(r.topic_id, r.score) for r in vec], limit, depth=depth)
    return [RankedTopic(f.key, by_id[f.key].collection, by_id[f.key].slug, by_id[f.key].title,
                        by_id[f.key].breadcrumb, by_id[f.key].snippet, f.score, f.method) for f in fused]


def search_pool(ctx: CallContext, pool: PoolStorage, query: str, access: Access, *, mode: str = "fts",
                limit: int = 10, collection: str | None = None,
                linked_to: tuple[str, str] | None = None) -> list[RankedTopic]:
    """Search one pool in ``mode`` (fts | vector | hybrid) over the topics ``access`` allows."""
    ctx.check_cancelled("doc_search")
    if mode == "fts":
        return fts_ranked(pool, query, access, limit=limit, collection=collection, linked_to=linked_to)
    if mode == "vector":
        embed = _query_embedder(ctx, pool, query, collection)
        return _vector_ranked(ctx, pool, embed, access, limit=limit, collection=collection, linked_to=linked_to)
    if mode == "hybrid":
        # The query is embedded on a worker thread (ONNX Runtime releases the GIL) while full text
        # ranks on this one; the vector ranking then runs once, as deep as the fusion needs.
        embedding = process.of(ctx).executor("embed", 2).submit(_query_embedder(ctx, pool, query, collection))
        fts = fts_ranked(pool, query, access, limit=HYBRID_TOP, collection=collection, linked_to=linked_to)
        # Full text found nothing: the answer is the vector ranking alone, as deep as ``limit``.
        depth = HYBRID_TOP if fts else limit
        vec = _vector_ranked(ctx, pool, embedding.result, access, limit=depth, collection=collection,
                             linked_to=linked_to)
        return fuse(fts, vec, limit, depth)
    raise ToolError("invalid_request", f"unknown search mode {mode!r}: fts, vector or hybrid")
