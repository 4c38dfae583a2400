"""Differential checks: the server's answers on generated bundles equal the independent oracles."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from knowspec.conformance.checks.common import advertised_only, fail, require_result, unsuccessful
from knowspec.conformance.checks.registry import CheckContext, check, tools_named
from knowspec.conformance.failures import CheckFailed
from knowspec.conformance.fixtures.model import Bundle
from knowspec.conformance.fixtures.strategies import (
    bundles, cafe_bundle, neighbors_bundle, queries_for, sources_bundle, wide_bundle,
)
from knowspec.conformance.oracles.neighbors import ALL_KINDS, expected_neighbors
from knowspec.conformance.oracles.search import expected_search

RULE_SEARCH = "spec/okf/contract/queries.md §2 (casefold+NFC substring; priority; id)"
RULE_NEIGHBORS = "spec/okf/contract/queries.md §3 (resolved links and relations; order)"


def _limit_range(ctx: CheckContext) -> tuple[int, int]:
    tool = ctx.require_tool()
    prop = {**tool.input_properties.get("limit", {}), **tool.limits.get("limit", {})}
    return int(prop.get("minimum", 1)), int(prop.get("maximum", 100))


def _call_on(ctx: CheckContext, bundle: Bundle, args: dict[str, Any], path: Any = None):
    path = path or ctx.bundles.path_of(bundle, fresh=True)
    full = ctx.fitted(ctx.require_tool().name, {"bundle_path": str(path), **args})
    outcome = ctx.call(full)
    require_result(outcome)
    return full, outcome


def _describe(bundle: Bundle) -> dict[str, Any]:
    from knowspec.conformance.fixtures.model import render_document

    return {c.path: render_document(c) for c in bundle.concepts}


def check_search(ctx: CheckContext, bundle: Bundle, query: str, limit: int, path: Any = None) -> None:
    args, outcome = _call_on(ctx, bundle, {"query": query, "limit": limit}, path)
    expected = expected_search(bundle, query, limit)
    why = unsuccessful(outcome)
    if why:
        fail(f"search_concepts: {why}; the oracle expects {expected.total} match(es)", _with_bundle(outcome, bundle))
    out = outcome.structured
    got = [(h.get("concept", {}).get("id"), h.get("match")) for h in out.get("hits", [])]
    problems = []
    if got != list(expected.hits):
        problems.append(f"hits {got} != expected {list(expected.hits)}")
    if out.get("total") != expected.total:
        problems.append(f"total {out.get('total')} != expected {expected.total}")
    if out.get("truncated") != expected.truncated:
        problems.append(f"truncated {out.get('truncated')} != expected {expected.truncated}")
    if "query" in out and out["query"] != query:
        problems.append("the query echo differs from the query sent")
    if problems:
        fail("; ".join(problems), _with_bundle(outcome, bundle))


def _with_bundle(outcome, bundle: Bundle):
    """Failures carry the bundle files so the smallest counterexample can be replayed."""
    from dataclasses import replace

    return replace(outcome, arguments={"arguments": outcome.arguments, "bundle_files": _describe(bundle)})


@check("differential_search", RULE_SEARCH, applies=advertised_only, relevant=tools_named("search_concepts"))
def differential_search(ctx: CheckContext) -> None:
    """search_concepts on generated bundles equals the oracle: hits, match, total, truncated."""
    lo, hi = _limit_range(ctx)
    fixed = [(cafe_bundle(), "cafe\u0301", 2), (wide_bundle(101), "needle", hi), (wide_bundle(101), "NEEDLE", lo),
             (Bundle("empty"), "needle", hi), (wide_bundle(1), "needle", lo)]
    for bundle, query, limit in fixed:
        check_search(ctx, bundle, query, limit)
    # several queries per written bundle: an answer must follow its own arguments, not a cached one
    strategy = bundles().flatmap(lambda b: st.tuples(
        st.just(b), st.lists(st.tuples(queries_for(b), st.integers(lo, hi)), min_size=1, max_size=3)))

    def test(case: tuple[Bundle, list[tuple[str, int]]]) -> None:
        bundle, calls = case
        path = ctx.bundles.path_of(bundle, fresh=True)
        for query, limit in calls:
            check_search(ctx, bundle, query, limit, path)

    ctx.run_property(strategy, test)


def check_neighbors(ctx: CheckContext, bundle: Bundle, concept_id: str, direction: str,
                    kinds: tuple[str, ...], limit: int, path: Any = None) -> None:
    args, outcome = _call_on(ctx, bundle, {"concept_id": concept_id, "direction": direction,
                                           "kinds": list(kinds), "limit": limit}, path)
    if concept_id not in bundle.ids:
        if not outcome.is_error or (outcome.structured or {}).get("code") != "concept_not_found":
            fail("an unknown concept must give concept_not_found", _with_bundle(outcome, bundle))
        return
    why = unsuccessful(outcome)
    if why:
        fail(f"get_neighbors: {why}", _with_bundle(outcome, bundle))
    expected = expected_neighbors(bundle, concept_id, direction, kinds, limit)
    out = outcome.structured
    got_edges = [(e.get("kind"), e.get("from"), e.get("to"), e.get("relation_type")) for e in out.get("edges", [])]
    got_sources = [(s.get("id"), s.get("resource"), s.get("title")) for s in out.get("sources", [])]
    problems = []
    if got_edges != list(expected.edges):
        problems.append(f"edges {got_edges} != expected {list(expected.edges)}")
    if out.get("total") != expected.total:
        problems.append(f"total {out.get('total')} != expected {expected.total}")
    if out.get("truncated") != (expected.total > len(expected.edges)):
        problems.append(f"truncated {out.get('truncated')} is wrong")
    if got_sources != list(expected.sources):
        problems.append(f"sources {got_sources} != expected {list(expected.sources)}")
    if (out.get("concept") or {}).get("id") != concept_id:
        problems.append("concept card is not the selected concept")
    if "direction" in out and out["direction"] != direction:
        problems.append(f"direction echo {out['direction']!r} != {direction!r}")
    if "kinds" in out and out["kinds"] != list(kinds):
        problems.append(f"kinds echo {out['kinds']} != {list(kinds)} (navigation, relation, source order)")
    if problems:
        raise CheckFailed("; ".join(problems), arguments={"arguments": args, "bundle_files": _describe(bundle)},
                          response=outcome.summary())


@st.composite
def _neighbor_cases(draw: st.DrawFn, lo: int, hi: int):
    """A bundle and one to three neighbour queries on it."""
    bundle = draw(bundles())
    ids = sorted(bundle.ids) or ["missing"]
    calls = []
    for _ in range(draw(st.integers(1, 3))):
        concept_id = draw(st.sampled_from(ids))
        direction = draw(st.sampled_from(("both", "in", "out")))
        chosen = draw(st.sets(st.sampled_from(ALL_KINDS), min_size=1))  # drawn once, not per kind
        kinds = tuple(k for k in ALL_KINDS if k in chosen)
        calls.append((concept_id, direction, kinds, draw(st.integers(lo, hi))))
    return bundle, calls


@check("differential_neighbors", RULE_NEIGHBORS, applies=advertised_only, relevant=tools_named("get_neighbors"))
def differential_neighbors(ctx: CheckContext) -> None:
    """get_neighbors on generated bundles equals the oracle: edges, order, total, sources."""
    lo, hi = _limit_range(ctx)
    check_neighbors(ctx, neighbors_bundle(), "a", "both", ALL_KINDS, hi)
    check_neighbors(ctx, neighbors_bundle(), "a", "in", ALL_KINDS, hi)
    check_neighbors(ctx, wide_bundle(101), "c001", "both", ALL_KINDS, lo)
    check_neighbors(ctx, sources_bundle(), "s", "out", ALL_KINDS, hi)

    def test(case: tuple[Bundle, list]) -> None:
        bundle, calls = case
        path = ctx.bundles.path_of(bundle, fresh=True)
        for call in calls:
            check_neighbors(ctx, bundle, *call, path=path)

    ctx.run_property(_neighbor_cases(lo, hi), test)
