"""How ``benchmarks/docpool_vector.py`` times the handler after an idle core beside it at once."""

from __future__ import annotations

import pytest

from benchmark_modules import import_benchmark

docpool_vector = import_benchmark("docpool_vector")


class FakeHost:
    """A clock that only moves when asked to: a call costs 5 ms, or 7 ms on a core just back from idling."""

    def __init__(self) -> None:
        self.now, self.idled, self.calls = 0.0, False, []

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.idled = True

    def call(self, i: int) -> None:
        self.calls.append(i)
        self.now += 0.007 if self.idled else 0.005
        self.idled = False


def test_each_query_is_timed_after_the_idle_gap_and_again_at_once_the_gap_itself_never_timed():
    host = FakeHost()
    pairs = docpool_vector.idle_pairs(host.call, 3, 0.002, sleep=host.sleep, clock=lambda: host.now)
    assert host.calls == [0, 0, 1, 1, 2, 2]
    assert pairs["after_idle"] == pytest.approx([7.0] * 3)
    assert pairs["back_to_back"] == pytest.approx([5.0] * 3)


def test_what_remains_reports_the_idle_penalty_as_the_pairs_p50_difference():
    local = {"doc_search_vector_phases": {"total_p50_ms": 6.3, "embedding_p50_ms": 2.5, "ranking_p50_ms": 3.0,
                                          "rest_p50_ms": 0.8},
             "vector_rank_only": {"wall": {"p50_ms": 2.8}}, "int8_scans_only": {"wall": {"p50_ms": 1.8}},
             "doc_search_vector_handler_idle_pairs": {"gap_ms": 2.0, "after_idle": {"p50_ms": 7.9},
                                                      "back_to_back": {"p50_ms": 6.4}}}
    server = {"vector": {"p50_ms": 10.4}, "doc_collections": {"p50_ms": 2.3}}
    row = docpool_vector.remaining_profile({"server": server, "in_process": local})
    assert row["handler_after_idle_ms"] == 7.9 and row["handler_back_to_back_ms"] == 6.4
    assert row["idle_penalty_ms"] == pytest.approx(1.5)
    del local["doc_search_vector_handler_idle_pairs"]  # a result from before the pairs were timed
    assert "idle_penalty_ms" not in docpool_vector.remaining_profile({"server": server, "in_process": local})
