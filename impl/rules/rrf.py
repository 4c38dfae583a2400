"""Weighted reciprocal rank fusion, and the doc_search ``hybrid`` rule built on it.

Seed rule (doc_search ``hybrid``): fuse the full-text top 20 (weight 1.0) and the vector top 20
(weight 1.5) with k = 60; a result's score is its RRF sum ``sum(weight / (k + rank))`` with
1-based ranks; when full text finds nothing, the vector ranking is used alone (its scores stay
cosines). ``method`` is ``fts+vector`` for a fused list and ``vector`` for the fallback.

Equal fused scores are ordered by the caller's ``tie_key`` (doc_search: collection, then slug,
as the contract orders equal scores), then by the best (smallest) rank the key reached in any
list and first appearance (full-text list first), so the order never depends on hashing.

Note on the weights: with k = 60 an FTS-only rank-1 hit scores 1/61 ~ 0.0164 while a
vector-only hit at rank 20 scores 1.5/80 ~ 0.0188, so every vector-only hit in the vector
top 20 outranks every FTS-only hit. That is what the seed specifies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, Hashable, Sequence, TypeVar

RRF_K = 60
HYBRID_DEPTH = 20
FTS_WEIGHT = 1.0
VECTOR_WEIGHT = 1.5

K = TypeVar("K", bound=Hashable)  # a ranked key: a topic id for doc_search


@dataclass(frozen=True)
class FusedHit(Generic[K]):
    key: K
    score: float
    method: str                 # "fts+vector" (fused) or "vector" (fallback)
    fts_rank: int | None        # 1-based rank in the full-text list, if present
    vector_rank: int | None     # 1-based rank in the vector list, if present


def rrf_scores(ranked_lists: Sequence[tuple[Sequence[K], float]], k: int = RRF_K) -> dict[K, float]:
    """``{key: sum over lists of weight / (k + rank)}``; a key repeated in one list counts once (best rank)."""
    scores: dict[K, float] = {}
    for keys, weight in ranked_lists:
        seen: set = set()
        for rank, key in enumerate(keys, start=1):
            if key in seen:
                continue
            seen.add(key)
            scores[key] = scores.get(key, 0.0) + weight / (k + rank)
    return scores


def _first_ranks(keys: Sequence[K]) -> dict[K, int]:
    ranks: dict[K, int] = {}
    for rank, key in enumerate(keys, start=1):
        ranks.setdefault(key, rank)
    return ranks


def hybrid_rank(
    fts_ranked: Sequence[K],
    vector_ranked: Sequence[tuple[K, float]],
    limit: int,
    *,
    depth: int = HYBRID_DEPTH,
    k: int = RRF_K,
    fts_weight: float = FTS_WEIGHT,
    vector_weight: float = VECTOR_WEIGHT,
    tie_key: Callable[[K], Any] | None = None,
) -> list[FusedHit[K]]:
    """Fuse full-text keys (best first) with ``(key, cosine)`` vector hits (best first).

    Only the first ``depth`` of each list take part. At most ``limit`` hits are returned.
    """
    vector_top = list(vector_ranked[:depth])
    vector_keys = [key for key, _ in vector_top]
    vector_ranks = _first_ranks(vector_keys)
    fts_top = list(fts_ranked[:depth])
    if not fts_top:
        hits: list[FusedHit[K]] = []
        seen: set[K] = set()
        for rank, (key, score) in enumerate(vector_top, start=1):
            if key not in seen:
                seen.add(key)
                hits.append(FusedHit(key, float(score), "vector", None, rank))
        return hits[:limit]
    fts_ranks = _first_ranks(fts_top)
    scores = rrf_scores([(fts_top, fts_weight), (vector_keys, vector_weight)], k)
    appearance = {key: i for i, key in enumerate(dict.fromkeys([*fts_top, *vector_keys]))}
    inf = float("inf")

    def best_rank(key) -> float:
        return min(fts_ranks.get(key, inf), vector_ranks.get(key, inf))

    tie = tie_key or (lambda key: ())
    order = sorted(scores, key=lambda key: (-scores[key], tie(key), best_rank(key), appearance[key]))
    return [
        FusedHit(key, scores[key], "fts+vector", fts_ranks.get(key), vector_ranks.get(key))
        for key in order[:limit]
    ]
