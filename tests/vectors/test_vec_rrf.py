"""Reciprocal rank fusion as doc_search hybrid uses it: k=60, fts top 20 x 1.0, vector top 20 x 1.5."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from knowspec.impl.rules.rrf import hybrid_rank, rrf_scores


def test_hand_computed_fusion():
    fts = ["a", "b", "c"]
    vec = [("c", 0.9), ("d", 0.8), ("a", 0.7)]
    hits = hybrid_rank(fts, vec, 10)
    expected = {
        "a": 1 / 61 + 1.5 / 63,
        "b": 1 / 62,
        "c": 1 / 63 + 1.5 / 61,
        "d": 1.5 / 62,
    }
    assert [h.key for h in hits] == ["c", "a", "d", "b"]
    for h in hits:
        assert h.score == pytest.approx(expected[h.key], rel=1e-12)
        assert h.method == "fts+vector"
    assert (hits[0].fts_rank, hits[0].vector_rank) == (3, 1)
    assert (hits[3].fts_rank, hits[3].vector_rank) == (2, None)


def test_vector_only_rank_20_beats_fts_only_rank_1():
    fts = ["exact"]
    vec = [(f"v{i}", 0.5) for i in range(1, 21)]
    hits = hybrid_rank(fts, vec, 30)
    assert hits[-1].key == "exact"
    assert hits[-2].score == pytest.approx(1.5 / 80)


def test_only_top_20_of_each_list_take_part():
    fts = [f"f{i}" for i in range(1, 26)]
    vec = [(f"v{i}", 0.1) for i in range(1, 26)]
    keys = {h.key for h in hybrid_rank(fts, vec, 100)}
    assert keys == {f"f{i}" for i in range(1, 21)} | {f"v{i}" for i in range(1, 21)}


def test_empty_fts_falls_back_to_vector_scores():
    vec = [("x", 0.83), ("y", 0.71), ("z", 0.5)]
    hits = hybrid_rank([], vec, 2)
    assert [(h.key, h.score, h.method) for h in hits] == [("x", 0.83, "vector"), ("y", 0.71, "vector")]


def test_both_empty_gives_nothing():
    assert hybrid_rank([], [], 10) == []


def test_equal_scores_break_by_best_rank_then_appearance():
    # a: fts rank 2 only -> 1/62;  b: vector rank ... choose weights so scores tie exactly
    hits = hybrid_rank(["a", "b"], [], 10, vector_weight=1.0)
    assert [h.key for h in hits] == ["a", "b"]
    tie = hybrid_rank(["p"], [("q", 0.0)], 10, vector_weight=1.0)
    assert tie[0].score == tie[1].score
    assert [h.key for h in tie] == ["p", "q"]


def test_equal_scores_follow_the_callers_tie_key_first():
    """doc_search orders equal scores by collection, then slug (the contract), not by rank."""
    tie = hybrid_rank(["p"], [("q", 0.0)], 10, vector_weight=1.0, tie_key={"p": ("c", "z"), "q": ("c", "a")}.get)
    assert tie[0].score == tie[1].score and [h.key for h in tie] == ["q", "p"]


def test_duplicate_keys_count_once_at_their_best_rank():
    assert rrf_scores([(["a", "a", "b"], 1.0)], k=60) == {"a": 1 / 61, "b": 1 / 63}


keys = st.lists(st.sampled_from("abcdefghijklmnopqrstuvwxyz"), unique=True, max_size=26)


@given(fts=keys, vec=keys, limit=st.integers(1, 50))
def test_fusion_is_sorted_limited_and_follows_the_formula(fts, vec, limit):
    vec_hits = [(k, 1.0 - i / 100) for i, k in enumerate(vec)]
    hits = hybrid_rank(fts, vec_hits, limit)
    assert len(hits) <= limit
    assert all(hits[i].score >= hits[i + 1].score for i in range(len(hits) - 1))
    if fts:
        assert len(hits) == min(limit, len(set(fts[:20]) | set(vec[:20])))
        for h in hits:
            want = (1.0 / (60 + h.fts_rank) if h.fts_rank else 0.0) + (1.5 / (60 + h.vector_rank) if h.vector_rank else 0.0)
            assert h.score == pytest.approx(want, rel=1e-12)
    else:
        assert [h.key for h in hits] == vec[:20][:limit]
