"""The optional approximate vector index (``vectors/approximate.py``): its answers are the seed's
rule over the rows it proposes, every score exact; with every row a candidate it is the exact rule;
it is never the default, and asking for it without the ``ann`` extra is one clear error.

Most tests drive the re-scoring with a stand-in graph (a fixed proposal), so they run without
usearch; the tests of the real graph skip with one reason when the extra is not installed.
"""

from __future__ import annotations

import dataclasses
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_vector_search import _ctx, _search, fixed_query, settings as pool_settings  # noqa: F401 - fixtures
from test_vector_speed_paths import plain_rank, random_pool, unit_rows

from knowspec.impl import runtime as process
from knowspec.impl.docpool.vectors import approximate
from knowspec.impl.docpool.vectors.approximate import ApproximateIndex, MatrixIndex, candidate_rows
from knowspec.impl.docpool.vectors.scoring import PoolVectors, pool_vector_cache
from knowspec.impl.errors import ToolError

needs_ann = pytest.mark.skipif(not approximate.available(), reason="the 'ann' extra (usearch) is not installed")


def proposing(rows: np.ndarray, calls: list[int] | None = None) -> MatrixIndex:
    """A stand-in graph that proposes ``rows`` (nearest first), at most ``count`` of them."""
    def propose(q: np.ndarray, count: int) -> np.ndarray:
        if calls is not None:
            calls.append(count)
        return rows[:count]

    return MatrixIndex(propose, 0, 0.0)


def sub_pool(pool: PoolVectors, chunk_rows: np.ndarray, topic_rows: np.ndarray) -> PoolVectors:
    """The pool holding only the given rows (ascending, so ties keep their order)."""
    return PoolVectors(dim=pool.dim, topic_ids=pool.topic_ids[topic_rows], topic_matrix=pool.topic_matrix[topic_rows],
                       chunk_ids=pool.chunk_ids[chunk_rows], chunk_topic_ids=pool.chunk_topic_ids[chunk_rows],
                       chunk_matrix=pool.chunk_matrix[chunk_rows], sketch=False)


def scored(hits) -> list[tuple[int, float]]:
    return [(h.topic_id, h.score) for h in hits]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n_chunks=st.integers(0, 300), n_topics=st.integers(1, 120),
       dim=st.sampled_from([3, 8, 32]), limit=st.integers(1, 30), share=st.sampled_from([None, 0.1, 0.5, 0.9]),
       duplicates=st.booleans(), extra=st.integers(0, 50))
def test_every_row_a_candidate_ranks_exactly_like_the_plain_rule(seed, n_chunks, n_topics, dim, limit, share,
                                                                  duplicates, extra):
    pool = random_pool(seed, n_topics, n_chunks, dim, sketch=False, duplicates=duplicates)
    rng = np.random.default_rng(seed + 1)
    # the stand-in graph proposes rows in a shuffled order: re-scoring must restore the rule's order
    index = ApproximateIndex(pool, proposing(rng.permutation(n_chunks)), proposing(rng.permutation(n_topics)))
    q = unit_rows(rng, 1, dim)[0]
    allowed = None if share is None else [int(t) for t in pool.topic_ids if rng.random() < share]
    got = index.rank(q, allowed, limit, candidates=max(n_chunks, n_topics) + extra)
    assert [(h.topic_id, h.score, h.chunk_id) for h in got] == plain_rank(pool, q, allowed, limit)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n_chunks=st.integers(120, 300), n_topics=st.integers(100, 160),
       dim=st.sampled_from([3, 8, 32]), limit=st.integers(1, 40), duplicates=st.booleans(), data=st.data())
def test_an_answer_is_the_exact_rule_over_the_proposed_rows(seed, n_chunks, n_topics, dim, limit, duplicates, data):
    pool = random_pool(seed, n_topics, n_chunks, dim, sketch=False, duplicates=duplicates)
    rng = np.random.default_rng(seed + 2)
    chunk_pick = rng.permutation(n_chunks)[:data.draw(st.integers(80, n_chunks - 1))]
    topic_pick = rng.permutation(n_topics)[:data.draw(st.integers(80, n_topics - 1))]
    index = ApproximateIndex(pool, proposing(chunk_pick), proposing(topic_pick))
    q = unit_rows(rng, 1, dim)[0]
    count = data.draw(st.integers(80, min(n_chunks, n_topics) - 1))  # below both: the graph is asked
    got = index.rank(q, None, limit, candidates=count)
    want = plain_rank(sub_pool(pool, np.sort(chunk_pick[:count]), np.sort(topic_pick[:count])), q, None, limit)
    assert scored(got) == [(tid, score) for tid, score, _ in want]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n_chunks=st.integers(100, 300), n_topics=st.integers(1, 60),
       limit=st.integers(1, 30), share=st.sampled_from([0.3, 0.6, 0.9]), count=st.integers(80, 99))
def test_filtered_answers_are_allowed_exactly_scored_and_in_rule_order(seed, n_chunks, n_topics, limit, share, count):
    pool = random_pool(seed, n_topics, n_chunks, 8, sketch=False)
    rng = np.random.default_rng(seed + 3)
    index = ApproximateIndex(pool, proposing(rng.permutation(n_chunks)), None)
    q = unit_rows(rng, 1, 8)[0]
    allowed = {int(t) for t in pool.topic_ids if rng.random() < share}
    got = index.rank(q, allowed, limit, candidates=count)
    keys = [(-h.score, h.topic_id) for h in got]
    assert keys == sorted(keys) and len({h.topic_id for h in got}) == len(got)
    chunk_scores = pool.chunk_matrix @ q
    for h in got:
        assert h.topic_id in allowed
        own = np.concatenate([chunk_scores[pool.chunk_topic_ids == h.topic_id].astype(np.float64),
                              pool.topic_matrix[pool.topic_ids == h.topic_id] @ q + 0.02])
        assert np.isclose(own, h.score, rtol=0, atol=1e-6).any()  # the exact score of one of its rows
        assert h.score <= own.max() + 1e-6                          # never above its best row


def test_tied_candidates_keep_the_lower_row_first_whatever_the_graph_order():
    n = 200
    pool = PoolVectors(dim=2, topic_ids=np.arange(n, dtype=np.int64), topic_matrix=np.zeros((n, 2), np.float32),
                       chunk_ids=np.arange(n, dtype=np.int64), chunk_topic_ids=np.arange(n, dtype=np.int64),
                       chunk_matrix=np.tile(np.array([[0.6, 0.8]], np.float32), (n, 1)), sketch=False)
    index = ApproximateIndex(pool, proposing(np.arange(n)[::-1]), None)  # rows 199, 198, ... 50
    got = index.rank(np.array([1, 0], np.float32), None, 30, candidates=150)
    assert [h.topic_id for h in got] == list(range(50, 80))  # every score ties: lower topic ids, from rows 50..129


def test_a_filter_that_drops_the_candidates_widens_the_search():
    n, k = 1000, 80
    mask = np.zeros(n, dtype=bool)
    mask[700:] = True                         # the graph's first 700 proposals are all forbidden
    calls: list[int] = []
    rows = candidate_rows(proposing(np.arange(n), calls), n, np.ones(3, np.float32), mask, k, count=100)
    assert calls == [100, 200, 400, 800]
    assert np.array_equal(rows, np.arange(700, 800))


def test_few_allowed_rows_are_all_scored_without_the_graph():
    n = 1000
    mask = np.zeros(n, dtype=bool)
    mask[::5] = True
    calls: list[int] = []
    rows = candidate_rows(proposing(np.arange(n), calls), n, np.ones(3, np.float32), mask, 80, count=100)
    assert calls == [] and np.array_equal(rows, np.arange(0, n, 5))


# -- the setting -------------------------------------------------------------------------------

def test_the_default_setting_is_exact():
    assert process.RuntimeSettings().vector_index == "exact"
    assert process.RuntimeSettings.from_environment().vector_index == "exact"


def test_default_doc_search_never_builds_an_index(pool_settings, fixed_query, monkeypatch):
    monkeypatch.setattr(ApproximateIndex, "build", classmethod(lambda *a, **k: pytest.fail("index built")))
    assert _search(_ctx(pool_settings))


def _approximate_runtime(candidates: int = 80) -> process.Runtime:
    return process.Runtime(dataclasses.replace(process.RuntimeSettings(), vector_index="approximate",
                                               vector_candidates=candidates))


def test_asking_for_the_index_without_the_extra_is_embedding_unavailable(pool_settings, fixed_query, monkeypatch):
    monkeypatch.setitem(sys.modules, "usearch", None)
    monkeypatch.setitem(sys.modules, "usearch.index", None)
    with process.activated(_approximate_runtime()):
        with pytest.raises(ToolError) as err:
            _search(_ctx(pool_settings))
    assert (err.value.code, err.value.message) == ("embedding_unavailable", "embedding runtime not found")
    assert "pip install 'knowspec[ann]'" in err.value.diagnostics[0]["message"]


def test_serve_refuses_the_setting_without_the_extra(capsys, monkeypatch):
    from knowspec.impl.cli import main

    monkeypatch.setitem(sys.modules, "usearch", None)
    monkeypatch.setitem(sys.modules, "usearch.index", None)
    assert main(["serve", "--stdio", "--vector-index", "approximate"]) == 2
    assert capsys.readouterr().err.strip() == (
        "knowspec: the approximate vector index needs the 'ann' extra: pip install 'knowspec[ann]'")


def test_serve_without_the_options_stays_exact():
    from knowspec.impl.cli import _runtime_settings, build_parser

    chosen = _runtime_settings(build_parser().parse_args(["serve", "--stdio"]))
    assert (chosen.vector_index, chosen.vector_candidates) == ("exact", 500)


@needs_ann
def test_serve_options_choose_the_index_and_its_candidates():
    from knowspec.impl.cli import _runtime_settings, build_parser

    args = build_parser().parse_args(["serve", "--stdio", "--vector-index", "approximate", "--vector-candidates", "900"])
    chosen = _runtime_settings(args)
    assert (chosen.vector_index, chosen.vector_candidates) == ("approximate", 900)


# -- the real graph (usearch) ------------------------------------------------------------------

@needs_ann
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), n_chunks=st.integers(1, 200), n_topics=st.integers(1, 60),
       limit=st.integers(1, 20), share=st.sampled_from([None, 0.5]))
def test_a_graph_with_every_row_a_candidate_ranks_exactly(seed, n_chunks, n_topics, limit, share):
    pool = random_pool(seed, n_topics, n_chunks, 16, sketch=False)
    index = ApproximateIndex.build(pool, threads=1, min_rows=1)
    rng = np.random.default_rng(seed + 4)
    q = unit_rows(rng, 1, 16)[0]
    allowed = None if share is None else [int(t) for t in pool.topic_ids if rng.random() < share]
    got = index.rank(q, allowed, limit, candidates=max(n_chunks, n_topics, 80))
    assert [(h.topic_id, h.score, h.chunk_id) for h in got] == plain_rank(pool, q, allowed, limit)


@needs_ann
def test_the_graph_finds_nearly_all_of_the_exact_top_10():
    pool = random_pool(11, 500, 8000, 32, sketch=False)
    index = ApproximateIndex.build(pool, threads=1)
    assert index.chunk_index is not None and index.topic_index is None  # topics below INDEX_MIN_ROWS
    rng = np.random.default_rng(12)
    found = 0
    for q in unit_rows(rng, 20, 32):
        want = {t for t, _, _ in plain_rank(pool, q, None, 10)}
        found += len(want & {h.topic_id for h in index.rank(q, None, 10, candidates=400)})
    assert found / 200 >= 0.9


def _index_builds() -> list:
    cache = process.current().caches.get("docpool.vector_index")
    return [] if cache is None else [cache.peek(key) for key in cache.keys()]


def test_the_exact_rule_answers_while_the_graph_builds(pool_settings, fixed_query, monkeypatch):
    exact = _search(_ctx(pool_settings, "patron"))
    release = threading.Event()
    monkeypatch.setattr(approximate, "usearch_index_module", lambda: None)  # no graph library needed
    monkeypatch.setattr(ApproximateIndex, "build", classmethod(lambda cls, v: release.wait(30) and cls(v, None, None)))
    with process.activated(_approximate_runtime()):
        assert _search(_ctx(pool_settings, "patron")) == exact
        (build,) = _index_builds()
        assert not build.done()
        release.set()
        assert build.result(timeout=30).vectors is not None


def test_a_failed_build_answers_exactly_and_is_tried_again(pool_settings, fixed_query, monkeypatch):
    exact = _search(_ctx(pool_settings, "patron"))
    go, attempts = threading.Event(), []

    def failing(cls, vectors):
        attempts.append(1)
        go.wait(30)
        raise MemoryError("no room for the graph")

    monkeypatch.setattr(approximate, "usearch_index_module", lambda: None)
    monkeypatch.setattr(ApproximateIndex, "build", classmethod(failing))
    with process.activated(_approximate_runtime()):
        _search(_ctx(pool_settings, "patron"))                   # starts the build
        (build,) = _index_builds()
        go.set()
        assert isinstance(build.exception(timeout=30), MemoryError)
        assert _search(_ctx(pool_settings, "patron")) == exact   # answered exactly, the failed build dropped
        assert _index_builds() == []
        go.clear()
        _search(_ctx(pool_settings, "patron"))                   # a new build
        (again,) = _index_builds()
        go.set()
        assert again is not build and isinstance(again.exception(timeout=30), MemoryError)
    assert len(attempts) == 2


@needs_ann
def test_approximate_doc_search_on_a_small_pool_equals_the_exact_one(pool_settings, fixed_query, monkeypatch):
    exact = {user: _search(_ctx(pool_settings, user)) for user in (None, "patron")}
    monkeypatch.setattr(approximate, "INDEX_MIN_ROWS", 1)
    ranked = []
    monkeypatch.setattr(ApproximateIndex, "rank", lambda self, *a, _rank=ApproximateIndex.rank: ranked.append(
        self.chunk_index) or _rank(self, *a))
    with process.activated(_approximate_runtime(80)):
        _search(_ctx(pool_settings))                     # starts the build
        (build,) = _index_builds()
        assert build.result(timeout=60).chunk_index is not None
        ranked.clear()                                   # (a quick build may have answered the first call)
        for user, want in exact.items():
            assert _search(_ctx(pool_settings, user)) == want
        assert len(ranked) == 2 and all(graph is not None for graph in ranked)  # the graph answered both
        assert pool_vector_cache(process.current()).peek(process.current().caches["docpool.vector_index"]
                                                         .keys()[0]).chunk_sketch is None  # no int8 copy
