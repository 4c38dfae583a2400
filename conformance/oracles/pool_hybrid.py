"""doc_search hybrid restated from the two lists it fuses (spec/docpool/contract.md §6).

Reciprocal rank fusion, k = 60, of the full-text top 20 (weight 1.0) and the vector top 20
(weight 1.5), 1-based ranks, ``score`` the fused sum, best first; when full text finds nothing,
the vector ranking alone (its cosines), as deep as the call's limit. The lists are the target's
own fts and vector answers to the same query, so no model is needed here: what is judged is the
fusion, which the contract fixes whatever the embedding, and its order: score descending, equal
scores by collection, then slug (tools.toml ``ordering``; sums equal within ``TIE_TOLERANCE``
are equal: two sums of the same terms may differ in the last bit, while distinct sums of the
rule differ by far more). Not judged, because the contract leaves them open: which list's
snippet a hit shows (either), and whether a fused hit's ``method`` is ``fts+vector`` for every
hit or names the lists it came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

RRF_K = 60
TIE_TOLERANCE = 1e-9  # relative
DEPTH = 20
FTS_WEIGHT, VECTOR_WEIGHT = 1.0, 1.5

Key = tuple[Any, Any]  # (collection, slug)


@dataclass(frozen=True)
class FusedHit:
    key: Key
    score: float
    methods: frozenset[str]   # the method values the contract allows for this hit
    snippets: frozenset[str]  # the snippets it may show (the full-text one, the vector one)


def key_of(hit: dict[str, Any]) -> Key:
    return hit.get("collection"), hit.get("slug")


def expected_hybrid(fts: list[dict[str, Any]], vector: list[dict[str, Any]], limit: int) -> list[FusedHit]:
    """The hybrid answer from the fts answer (limit >= 20) and the vector answer (limit >= 20 and
    >= ``limit``), best first; equal scores in the order they were met (not judged)."""
    snippets: dict[Key, set[str]] = {}
    for hit in [*fts[:DEPTH], *vector[: max(DEPTH, limit)]]:
        snippets.setdefault(key_of(hit), set()).add(str(hit.get("snippet")))
    if not fts:
        return [FusedHit(key_of(h), float(h.get("score", 0.0)), frozenset({"vector"}),
                         frozenset(snippets[key_of(h)])) for h in vector[:limit]]
    scores: dict[Key, float] = {}
    lists: dict[Key, set[str]] = {}
    for hits, weight, name in ((fts[:DEPTH], FTS_WEIGHT, "fts"), (vector[:DEPTH], VECTOR_WEIGHT, "vector")):
        for rank, hit in enumerate(hits, start=1):
            scores[key_of(hit)] = scores.get(key_of(hit), 0.0) + weight / (RRF_K + rank)
            lists.setdefault(key_of(hit), set()).add(name)
    fused = [FusedHit(k, scores[k], frozenset({"fts+vector", "+".join(sorted(lists[k]))}), frozenset(snippets[k]))
             for k in sorted(scores, key=lambda k: -scores[k])]
    ordered = [hit for group in tie_groups(fused) for hit in sorted(group, key=lambda h: _order_key(h.key))]
    return ordered[:limit]


def _order_key(key: Key) -> tuple[str, str]:
    return str(key[0]), str(key[1])


def tie_groups(hits: list[FusedHit], rel_tol: float = TIE_TOLERANCE) -> list[list[FusedHit]]:
    """Runs of hits (best first) whose scores are equal within ``rel_tol``."""
    groups: list[list[FusedHit]] = []
    for hit in hits:
        if groups and abs(hit.score - groups[-1][0].score) <= rel_tol * max(abs(hit.score), 1e-300):
            groups[-1].append(hit)
        else:
            groups.append([hit])
    return groups
