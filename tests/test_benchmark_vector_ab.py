"""The order ``benchmarks/docpool_vector_ab.py`` asks its servers in, and which calls it counts."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, strategies as st

from benchmark_modules import import_benchmark

ab = import_benchmark("docpool_vector_ab")


def test_one_at_a_time_every_query_goes_to_every_server_in_turn_the_order_flipping_each_query():
    asked = list(ab.schedule(2, ["vector", "hybrid"], calls=2, rounds=1))
    assert asked == [(0, "vector", 0, True), (1, "vector", 0, True), (0, "hybrid", 0, True), (1, "hybrid", 0, True),
                     (1, "vector", 1, True), (0, "vector", 1, True), (1, "hybrid", 1, True), (0, "hybrid", 1, True)]


def test_in_blocks_a_server_answers_the_blocks_queries_in_a_row_and_its_first_is_not_counted():
    asked = list(ab.schedule(2, ["vector"], calls=5, rounds=1, block=3))
    assert asked == [(0, "vector", 0, False), (0, "vector", 1, True), (0, "vector", 2, True),
                     (1, "vector", 0, False), (1, "vector", 1, True), (1, "vector", 2, True),
                     (1, "vector", 3, False), (1, "vector", 4, True),
                     (0, "vector", 3, False), (0, "vector", 4, True)]


@given(servers=st.integers(1, 3), calls=st.integers(1, 30), rounds=st.integers(1, 3), block=st.integers(1, 8))
def test_every_server_is_asked_every_query_of_every_mode_once_a_round(servers, calls, rounds, block):
    modes = ["vector", "hybrid"]
    asked = list(ab.schedule(servers, modes, calls, rounds, block))
    assert Counter((s, m, q) for s, m, q, _ in asked) == {(s, m, q): rounds for s in range(servers)
                                                          for m in modes for q in range(calls)}
    blocks = -(-calls // block)
    counted = Counter((s, m) for s, m, _, kept in asked if kept)
    assert set(counted.values()) == {rounds * (calls if block == 1 else calls - blocks)} - {0}
