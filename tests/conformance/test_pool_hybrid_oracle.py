"""oracle_hybrid_fusion: doc_search hybrid against the fusion of the target's own fts and vector lists."""

from __future__ import annotations


import pytest

from knowspec.conformance.checks.pool_hybrid import differences
from knowspec.conformance.config import RunConfig
from knowspec.conformance.mutants.killrate import kill_rate
from knowspec.conformance.oracles.pool_hybrid import expected_hybrid
from pool_target import served_fixture


def _hit(slug: str, score: float, snippet: str = "s", method: str = "fts") -> dict:
    return {"collection": "c", "slug": slug, "score": score, "snippet": snippet, "method": method}


def test_fusion_sums_weighted_reciprocal_ranks_of_both_top_20s():
    fts = [_hit("a", -3.0), _hit("b", -2.0)]
    vector = [_hit("b", 0.9, "vb", "vector"), _hit("c", 0.8, "vc", "vector")]
    fused = expected_hybrid(fts, vector, 10)
    assert [f.key[1] for f in fused] == ["b", "c", "a"]  # 1/62 + 1.5/61, then 1.5/62, then 1/61
    assert fused[0].score == pytest.approx(1 / 62 + 1.5 / 61) and fused[2].score == pytest.approx(1 / 61)
    assert fused[0].methods == {"fts+vector"} and fused[1].methods == {"fts+vector", "vector"}
    assert fused[0].snippets == {"s", "vb"}


def test_only_the_top_20_of_each_list_take_part():
    fts = [_hit(f"f{i:02d}", -float(30 - i)) for i in range(25)]
    assert [f.key[1] for f in expected_hybrid(fts, [], 50)] == [f"f{i:02d}" for i in range(20)]
    fused = expected_hybrid(fts, [_hit("v", 0.5, method="vector")], 50)
    assert len(fused) == 21 and "f24" not in {f.key[1] for f in fused}


def test_full_text_finding_nothing_answers_the_vector_list_as_deep_as_the_limit():
    vector = [_hit(f"v{i:02d}", 1 - i / 100, method="vector") for i in range(30)]
    fused = expected_hybrid([], vector, 25)
    assert [f.key[1] for f in fused] == [f"v{i:02d}" for i in range(25)]
    assert fused[3].score == vector[3]["score"] and fused[3].methods == {"vector"}


def _ranked_at(slug: str, rank: int, length: int, method: str) -> list[dict]:
    """A list of ``length`` filler hits with ``slug`` at 1-based ``rank``."""
    hits = [_hit(f"{method}{i:02d}", -float(length - i), method=method) for i in range(length)]
    hits[rank - 1] = _hit(slug, hits[rank - 1]["score"], method=method)
    return hits


def test_equal_fused_sums_come_by_collection_then_slug():
    """fts 10 + vector 10 and fts 17 + vector 6 both sum to 1/28: the contract orders equal
    scores by collection, then slug, whatever rank brought them."""
    fts = _ranked_at("zeta", 10, 17, "fts")
    fts[16] = _hit("alpha", fts[16]["score"])
    vector = _ranked_at("alpha", 6, 10, "vector")
    vector[9] = _hit("zeta", vector[9]["score"], method="vector")
    fused = expected_hybrid(fts, vector, 40)
    tied = [f.key[1] for f in fused if abs(f.score - 1 / 28) < 1e-12]
    assert tied == ["alpha", "zeta"]
    got = [dict(_hit(f.key[1], f.score, next(iter(f.snippets))), method="fts+vector") for f in fused]
    assert differences(got, fused) == []
    swapped = [*got]
    i, j = [k for k, h in enumerate(got) if h["slug"] in ("alpha", "zeta")]
    swapped[i], swapped[j] = got[j], got[i]
    assert differences(swapped, fused) != []


HYBRID_MUTANTS = ["doc_search_hybrid_scores_scaled", "doc_search_hybrid_top_two_swapped"]


@pytest.mark.slow
def test_hybrid_mutants_are_killed_while_the_real_server_passes(tmp_path):
    """Sorted, schema-valid hybrid answers whose sums or topics are not the fusion of the two lists."""
    fixture, server = served_fixture(tmp_path, vectors=True)
    base = RunConfig(target="", family="docpool", tools=("doc_search",), checks=("oracle_hybrid_fusion",),
                     pool_fixture=fixture.directory, max_examples=2)
    results = list(kill_rate(base, server, HYBRID_MUTANTS))
    assert results[0].name == "identity" and results[0].killed_by == () and not results[0].unreachable
    assert {r.name: r.killed_by for r in results[1:]} == dict.fromkeys(HYBRID_MUTANTS,
                                                                      ("oracle_hybrid_fusion[doc_search]",))
