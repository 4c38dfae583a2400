"""The code-width benchmark's model of a sketch (``benchmarks/vector_code_widths.py``): the rows it
counts hold the exact top k, and coarser codes or left-out dimensions count more of them (the
shipped sketch's own count is measured beside it by the benchmark)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from vector_code_widths import bits, candidates_per_query, coded_rows, reaching_rows  # noqa: E402


def unit_rows(seed: int, n: int, dim: int) -> np.ndarray:
    m = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_bits_cover_the_codes():
    assert [bits(levels) for levels in (127, 63, 31, 15, 7)] == [8, 7, 6, 5, 4]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), levels=st.sampled_from([127, 31, 7]), k=st.integers(1, 30))
def test_the_rows_counted_hold_the_exact_top_k(seed, levels, k):
    matrix = unit_rows(seed, 300, 16)
    q = unit_rows(seed + 1, 1, 16)[0].astype(np.float64)
    coded, err = coded_rows(matrix, levels)
    kept = reaching_rows((coded.astype(np.float64) @ q), np.linalg.norm(q) * err, k)
    exact = matrix.astype(np.float64) @ q
    assert set(np.argsort(-exact)[:k]) <= set(kept.tolist())


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), levels=st.sampled_from([127, 31, 7]), k=st.integers(1, 30))
def test_centred_rows_counted_hold_the_exact_top_k(seed, levels, k):
    # q.m is the same for every row: ranking the centred rows' intervals ranks the rows
    matrix = unit_rows(seed, 300, 16) + unit_rows(seed + 2, 1, 16)  # rows sharing a mean, as e5's do
    q = unit_rows(seed + 1, 1, 16)[0].astype(np.float64)
    coded, err = coded_rows(matrix - matrix.mean(axis=0), levels)
    kept = reaching_rows((coded.astype(np.float64) @ q), np.linalg.norm(q) * err, k)
    exact = matrix.astype(np.float64) @ q
    assert set(np.argsort(-exact)[:k]) <= set(kept.tolist())


def test_the_rounding_loss_is_what_the_code_misses():
    matrix = unit_rows(7, 50, 24)
    coded, err = coded_rows(matrix, 15)
    assert np.allclose(err, np.linalg.norm(matrix.astype(np.float64) - coded, axis=1), rtol=1e-5, atol=1e-7)
    assert (np.abs(coded) <= np.abs(matrix).max(axis=1, keepdims=True) + 1e-6).all()


def test_fewer_levels_leave_more_rows_to_score():
    matrix, queries = unit_rows(3, 2000, 32), unit_rows(4, 5, 32).astype(np.float64)
    counts = [sum(candidates_per_query(*coded_rows(matrix, levels), queries, k=10)) for levels in (127, 15)]
    assert counts[0] < counts[1]


def test_left_out_dimensions_widen_every_interval():
    matrix, queries = unit_rows(5, 1000, 32), unit_rows(6, 4, 32).astype(np.float64)
    coded, err = coded_rows(np.ascontiguousarray(matrix[:, :16]), 127)
    rest = (np.linalg.norm(matrix[:, 16:].astype(np.float64), axis=1), np.linalg.norm(queries[:, 16:], axis=1))
    with_rest = candidates_per_query(coded, err, queries[:, :16], k=10, rest=rest)
    full = candidates_per_query(*coded_rows(matrix, 127), queries, k=10)
    assert all(a >= b for a, b in zip(with_rest, full))
