"""doc_search hybrid checked against the fusion of the target's own fts and vector answers.

Planned on doc_search with the suite's pool; skipped when the target answers vector search with
``embedding_unavailable`` (no model pack) or the pool holds no vectors. Each probe asks the same
query three times (fts limit 20, vector, hybrid) and compares hybrid with
``oracles/pool_hybrid.py``: topics and their order (equal scores by collection, then slug), fused scores,
the vector fallback when full text finds nothing, and method and snippet within what the contract
allows.
"""

from __future__ import annotations

from typing import Any

from knowspec.conformance.checks.common import fail, said, score_differs
from knowspec.conformance.checks.pool_oracles import _answer, _call, _pool, for_tool
from knowspec.conformance.checks.registry import CheckContext, check, skip
from knowspec.conformance.oracles import pools as oracle
from knowspec.conformance.oracles.pool_fulltext import common_words, recipe
from knowspec.conformance.oracles.pool_hybrid import DEPTH, FusedHit, expected_hybrid, key_of
from knowspec.conformance.checks.docpool_import import mcp_principals

NO_TEXT_MATCH = "zqxjvw"  # folds to itself and is no fixture word: full text finds nothing


def _vector_or_skip(ctx: CheckContext, query: str) -> None:
    outcome = _call(ctx, "doc_search", {"query": query, "mode": "vector", "limit": 1})
    if outcome.is_error and (outcome.structured or {}).get("code") == "embedding_unavailable":
        skip(f"the target has no embedding model ({said(outcome)}): hybrid needs its vector half")


def differences(got: list[Any], want: list[FusedHit]) -> list[str]:
    """What differs between ``got`` and the fusion ``want`` (already cut at the call's limit):
    the topics in order, then each one's score, method and snippet."""
    rows = [h for h in got if isinstance(h, dict)]
    if len(rows) != len(got) or [key_of(h) for h in rows] != [w.key for w in want]:
        return [f"topics in order {[key_of(h) for h in rows][:12]}, the fusion ranks {[w.key for w in want][:12]} "
                f"(scores {[round(w.score, 6) for w in want[:12]]}; equal scores by collection, then slug)"]
    out = []
    for hit, w in zip(rows, want):
        score = hit.get("score")
        if score_differs(score, w.score):
            out.append(f"{w.key}: score {score!r}, the fused sum {w.score!r}")
        if hit.get("method") not in w.methods:
            out.append(f"{w.key}: method {hit.get('method')!r}, expected one of {sorted(w.methods)}")
        if hit.get("snippet") not in w.snippets:
            out.append(f"{w.key}: snippet {hit.get('snippet')!r} is neither list's")
    return out


@check("oracle_hybrid_fusion", "spec/docpool/contract.md §6 (hybrid: RRF k = 60 of the fts top 20 x1.0 and the "
       "vector top 20 x1.5, score = the sum; vector alone when full text finds nothing)", **for_tool("doc_search"))
def oracle_hybrid_fusion(ctx: CheckContext) -> None:
    """hybrid = the reciprocal rank fusion of the same caller's fts and vector answers to the query."""
    run = _pool(ctx)
    fx = run.fixture
    assert fx is not None
    if not fx.vectors:
        skip("the suite's pool holds no vectors (fixture.json says none were added): hybrid ranks nothing to fuse")
    visible = [t for t in fx.topics if oracle.visible(fx, t, mcp_principals(ctx))]
    stop = recipe(run.source, None).get("search_stopwords") if run.source and run.source.is_file() else None
    common = common_words(fx, stop)
    queries = [(" ".join(t.word for t in visible[:6]), 10), (common[0] if common else visible[0].word, 30),
               (NO_TEXT_MATCH, 12)]
    _vector_or_skip(ctx, queries[0][0])
    for query, limit in queries:
        _, fts = _answer(ctx, "doc_search", {"query": query, "mode": "fts", "limit": DEPTH})
        _, vector = _answer(ctx, "doc_search", {"query": query, "mode": "vector", "limit": max(DEPTH, limit)})
        outcome, hybrid = _answer(ctx, "doc_search", {"query": query, "mode": "hybrid", "limit": limit})
        found = differences(hybrid if isinstance(hybrid, list) else [], expected_hybrid(fts, vector, limit))
        if found:
            fail(f"doc_search {query!r} hybrid limit {limit} (full text {len(fts)} hits, vector {len(vector)}): "
                 + "; ".join(found[:4]), outcome)
