"""Full-text scores, order and snippets of doc_search, compared with FTS5 on the suite's pool.

``oracle_doc_search`` judges which topics a word finds and that answers are sorted by their own
scores; a server ranking by any other formula passed it. This check asks SQLite FTS5 (the engine
spec/docpool/contract.md §6 names) on the suite's copy of the pool for the same queries
(``oracles/pool_fulltext.py``) and compares every hit: topic, order, bm25 score, snippet.
"""

from __future__ import annotations

from typing import Any

from knowspec.conformance.checks.common import fail, score_differs
from knowspec.conformance.checks.docpool_import import PoolRun, mcp_principals
from knowspec.conformance.checks.pool_oracles import _answer, _pool, for_tool
from knowspec.conformance.checks.registry import CheckContext, check, skip
from knowspec.conformance.oracles import pools as oracle
from knowspec.conformance.oracles.pool_fulltext import (
    ExpectedHit, common_words, expected_fts, fts5_available, recipe, topic_key,
)



def _not_comparable(run: PoolRun) -> str | None:
    """Why the target's answers need not be FTS5's on the suite's copy, or ``None``."""
    if run.mode != "fixture":
        # An import may land in a PostgreSQL pool (the seed scores those with ts_rank_cd) or in a
        # pool holding other collections, whose chunks count in bm25's statistics.
        return ("FTS5's numbers bind the suite's SQLite pool files as served: start the target on "
                "`knowspec conform fixture --out DIR` and pass --pool-fixture DIR")
    if run.source is None or not run.source.is_file():
        return "the suite's copy of the pool is gone"
    return fts5_available()


def probes(run: PoolRun, visible: list[Any]) -> list[tuple[dict[str, Any], str | None]]:
    """(doc_search arguments, collection filter) whose answers rank many topics differently."""
    fx = run.fixture
    assert fx is not None and run.source is not None
    common = common_words(fx, recipe(run.source, None).get("search_stopwords"))
    unique = [t.word for t in visible[:6]]
    out: list[tuple[dict[str, Any], str | None]] = [({"query": " ".join(unique), "limit": 5}, None)]
    if common:
        out += [({"query": common[0], "limit": 50}, None),
                ({"query": common[0], "limit": 7, "collection": fx.open_id}, fx.open_id),
                ({"query": " ".join(common[:2]), "limit": 20}, None),
                ({"query": f"{common[-1]} {unique[0] if unique else ''}".strip(), "limit": 10}, None),
                # a stopword of the general recipe and of the open collection's own: dropped by both
                ({"query": f"ve {common[1 % len(common)]}", "limit": 20}, None),
                ({"query": f"ve {common[1 % len(common)]}", "limit": 20, "collection": fx.open_id}, fx.open_id)]
    return out


def differences(got: list[Any], want: list[ExpectedHit]) -> list[str]:
    """What differs, hit by hit: topic and order, then score, then snippet."""
    keys = [(h.get("collection"), h.get("slug")) if isinstance(h, dict) else h for h in got]
    expected = [(w.collection, w.slug) for w in want]
    if keys != expected:
        return [f"topics in order {keys[:12]}, FTS5 ranks {expected[:12]}"]
    out = []
    for hit, w in zip(got, want):
        score = hit.get("score")
        if score_differs(score, w.score):
            out.append(f"{w.collection}/{w.slug}: score {score!r}, FTS5 bm25 {w.score!r}")
        if hit.get("snippet") != w.snippet:
            out.append(f"{w.collection}/{w.slug}: snippet {hit.get('snippet')!r}, FTS5 snippet() {w.snippet!r}")
    return out


@check("oracle_fts_ranking", "spec/docpool/contract.md §6 (fts: FTS5 bm25 with the pool's weights and statistics, "
       "best chunk per topic, (score, collection, slug), snippet(); AND then OR)", **for_tool("doc_search"))
def oracle_fts_ranking(ctx: CheckContext) -> None:
    """Each probe's hits are FTS5's on the suite's copy of the pool: same topics, order, scores, snippets."""
    run = _pool(ctx)
    why = _not_comparable(run)
    if why:
        skip(why)
    fx, principals = run.fixture, mcp_principals(ctx)
    assert fx is not None and run.source is not None
    visible = [t for t in fx.topics if oracle.visible(fx, t, principals)]
    seen = {topic_key(t) for t in visible}
    for args, collection in probes(run, visible):
        outcome, got = _answer(ctx, "doc_search", {**args, "mode": "fts"})
        want = expected_fts(run.source, fx, args["query"], seen, args["limit"], collection)
        found = differences(got if isinstance(got, list) else [], want)
        if found:
            fail(f"doc_search {args}: " + "; ".join(found[:4]), outcome)


@check("oracle_help_fts_ranking", "spec/docpool/contract.md §5-6 (help_search: doc_search fts over netsim-help; "
       "FTS5 bm25, order, snippet())", **for_tool("help_search", needs_help=True))
def oracle_help_fts_ranking(ctx: CheckContext) -> None:
    """help_search answers as FTS5 on the suite's help pool: same topics, order, scores, snippets."""
    run = _pool(ctx)
    hx = run.help
    assert hx is not None and run.source is not None
    db = run.source.with_name("help.db")
    if not db.is_file():
        skip("the suite's copy of the help pool is gone")
    why = fts5_available()
    if why:
        skip(why)
    everyone = {topic_key(t) for t in hx.topics}
    common = common_words(hx, recipe(db, None).get("search_stopwords"))
    queries = [(" ".join(t.word for t in hx.topics[:4]), 3), *((word, 50) for word in common[:2]),
               (f"ve {common[0]}" if common else "ve", 20)]
    for query, limit in queries:
        outcome, got = _answer(ctx, "help_search", {"query": query, "limit": limit})
        want = expected_fts(db, hx, query, everyone, limit)
        rows = [{**h, "collection": hx.open_id} if isinstance(h, dict) else h for h in got] if isinstance(got, list) else []
        found = differences(rows, want)
        if found:
            fail(f"help_search {query!r} limit {limit}: " + "; ".join(found[:4]), outcome)
