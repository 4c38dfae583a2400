"""The fast vector paths answer exactly what the plain ones answer.

- the int8 sketch (``vectors/int8_scan``) only chooses which rows get scored in float32: ranking
  with it equals a full float32 scan (rows, order, scores), masks and ties included;
- allowed topics as a boolean mask (``allowed_slots``) equal set membership;
- the streaming loader (``from_streams`` over ``iter_vectors``) builds the matrices the row lists
  build, whatever the count it was given;
- the hand-written MatMulInteger model (the codes as its constant weight) is the one
  ``onnx.helper`` writes, its packed kernel's integer dot products are exact, and a kernel that
  saturates is refused.

No timing here: speed is measured by ``benchmarks/docpool_vector.py``.
"""

from __future__ import annotations

import os
from types import SimpleNamespace as Row

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from knowspec.impl.docpool.builder import build_pool
from knowspec.impl.docpool.recipe import import_collection
from knowspec.impl.docpool.storage.base import UNRESTRICTED, Access
from knowspec.impl.docpool.storage.sqlite import SqlitePool
from knowspec.impl.docpool.vectors import int8_scan, scoring
from knowspec.impl.docpool.vectors.scoring import (PoolVectors, encode_vector, exact_top, read_vector_stream,
                                                   top_rows, vector_rank)

needs_kernel = pytest.mark.skipif(int8_scan.int8_kernel() is None, reason="no onnxruntime int8 kernel")


def unit_rows(rng: np.random.Generator, n: int, dim: int, clustered: bool = True) -> np.ndarray:
    """Unit rows; ``clustered`` puts them near a few directions, like real embeddings (close scores)."""
    if clustered:
        centres = rng.standard_normal((4, dim))
        m = centres[rng.integers(0, 4, n)] + 0.3 * rng.standard_normal((n, dim))
    else:
        m = rng.standard_normal((n, dim))
    return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)


def random_pool(seed: int, n_topics: int, n_chunks: int, dim: int, *, sketch: bool | None,
                duplicates: bool = False) -> PoolVectors:
    rng = np.random.default_rng(seed)
    topics = unit_rows(rng, n_topics, dim)
    chunks = unit_rows(rng, n_chunks, dim)
    if duplicates and n_chunks > 4:  # exact ties across topics
        chunks[1::3] = chunks[0]
    topic_ids = np.sort(rng.choice(10 * n_topics + 10, n_topics, replace=False)).astype(np.int64)
    chunk_topics = topic_ids[rng.integers(0, n_topics, n_chunks)]
    return PoolVectors(dim=dim, topic_ids=topic_ids, topic_matrix=topics,
                       chunk_ids=np.arange(1000, 1000 + n_chunks, dtype=np.int64), chunk_topic_ids=chunk_topics,
                       chunk_matrix=chunks, sketch=sketch)


def plain_rank(pool: PoolVectors, q: np.ndarray, allowed, limit: int, top_k: int = 80):
    """The rule written the straightforward way: full float32 scans, set filtering, full sorts."""
    allowed_set = None if allowed is None else {int(t) for t in allowed}
    ok = (lambda tid: True) if allowed_set is None else (lambda tid: tid in allowed_set)
    cs = scoring.matrix_dot(pool.chunk_matrix, q)
    ts = scoring.matrix_dot(pool.topic_matrix, q)
    chunk_rows = sorted((r for r in range(len(cs)) if ok(int(pool.chunk_topic_ids[r]))),
                        key=lambda r: (-float(cs[r]), r))[:top_k]
    topic_rows = sorted((r for r in range(len(ts)) if ok(int(pool.topic_ids[r]))),
                        key=lambda r: (-float(ts[r]), r))[:top_k]
    best: dict[int, float] = {}
    for r in chunk_rows:
        tid = int(pool.chunk_topic_ids[r])
        best[tid] = max(best.get(tid, -np.inf), float(cs[r]))
    for r in topic_rows:
        tid = int(pool.topic_ids[r])
        best[tid] = max(best.get(tid, -np.inf), float(ts[r]) + scoring.TOPIC_BONUS)
    out = []
    for tid, score in sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]:
        rows = [r for r in range(len(cs)) if int(pool.chunk_topic_ids[r]) == tid]
        row = min(rows, key=lambda r: (-float(cs[r]), r)) if rows else None
        out.append((tid, score, None if row is None else int(pool.chunk_ids[row])))
    return out


def hits(pool, q, allowed, limit, top_k=80):
    return [(h.topic_id, h.score, h.chunk_id) for h in vector_rank(pool, q, allowed, limit, top_k=top_k)]


# -- the sketch changes nothing ---------------------------------------------------------------

@needs_kernel
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n_chunks=st.integers(0, 400), n_topics=st.integers(1, 60),
       dim=st.sampled_from([3, 8, 32]), limit=st.integers(1, 30), top_k=st.sampled_from([1, 5, 80]),
       share=st.sampled_from([None, 0.1, 0.5, 0.9]), duplicates=st.booleans())
def test_sketch_ranks_exactly_like_the_plain_rule(seed, n_chunks, n_topics, dim, limit, top_k, share, duplicates):
    with_sketch = random_pool(seed, n_topics, n_chunks, dim, sketch=True, duplicates=duplicates)
    without = random_pool(seed, n_topics, n_chunks, dim, sketch=False, duplicates=duplicates)
    assert (with_sketch.chunk_sketch is not None) == (n_chunks > 0)
    rng = np.random.default_rng(seed + 1)
    q = unit_rows(rng, 1, dim)[0]
    allowed = None
    if share is not None:
        allowed = [int(t) for t in with_sketch.topic_ids if rng.random() < share] + [999_999]  # unknown id: ignored
    want = plain_rank(without, q, allowed, limit, top_k)
    assert hits(with_sketch, q, allowed, limit, top_k) == want
    assert hits(without, q, allowed, limit, top_k) == want


@needs_kernel
def test_sketch_on_a_large_clustered_pool_equals_the_full_scan():
    pool = random_pool(7, 300, 20_000, 64, sketch=None)
    plain = random_pool(7, 300, 20_000, 64, sketch=False)
    assert pool.chunk_sketch is not None and plain.chunk_sketch is None  # automatic above SKETCH_MIN_ROWS
    rng = np.random.default_rng(8)
    for q in list(unit_rows(rng, 5, 64)) + [pool.chunk_matrix[17].copy()]:  # a query equal to a row too
        for allowed in (None, pool.topic_ids[::2], pool.topic_ids[:5]):
            assert hits(pool, q, allowed, 20) == hits(plain, q, allowed, 20)


@needs_kernel
@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 300), k=st.integers(1, 90), masked=st.booleans())
def test_candidates_hold_the_true_top_k(seed, n, k, masked):
    rng = np.random.default_rng(seed)
    matrix = unit_rows(rng, n, 16)
    q = unit_rows(rng, 1, 16)[0]
    mask = rng.random(n) < 0.5 if masked else None
    rows = int8_scan.candidate_rows(int8_scan.build_sketch(matrix, int8_scan.int8_kernel(), block=7), q, mask, k)
    want = top_rows(scoring.matrix_dot(matrix, q), mask, k)
    assert set(want.tolist()) <= set(rows.tolist())
    assert list(rows) == sorted(rows)
    if mask is not None:
        assert mask[rows].all()


def every_interval_candidates(sketch: int8_scan.Int8Sketch, q: np.ndarray, mask, k: int) -> np.ndarray:
    """The candidate rule computed over every row's float64 interval: rows whose upper end
    reaches the k-th best lower end among the allowed rows (a row with a non-finite value: always)."""
    codes = int8_scan.quantize_query(q)
    return int8_scan.interval_rows(sketch, codes, int8_scan.combined_dots(sketch, codes), mask, k)


@needs_kernel
@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 400), k=st.integers(1, 120), masked=st.booleans(),
       broken=st.integers(0, 3), duplicates=st.booleans())
def test_candidates_are_the_rule_over_every_rows_interval(seed, n, k, masked, broken, duplicates):
    rng = np.random.default_rng(seed)
    matrix = unit_rows(rng, n, 24)
    if duplicates:
        matrix[n // 2:] = matrix[: n - n // 2]  # tied centres and intervals
    for row in rng.integers(0, n, broken):
        matrix[row, 0] = np.nan  # a broken row: unbounded interval
    q = unit_rows(rng, 1, 24)[0]
    mask = rng.random(n) < 0.6 if masked else None
    sketch = int8_scan.build_sketch(matrix, int8_scan.int8_kernel(), block=13)
    got = int8_scan.candidate_rows(sketch, q, mask, k)
    assert got.tolist() == every_interval_candidates(sketch, q, mask, k).tolist()


@needs_kernel
@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), copies=st.integers(2, 60), bases=st.integers(1, 6), ulps=st.integers(0, 3),
       k=st.integers(1, 90), masked=st.booleans(), query_is_a_row=st.booleans())
def test_float32_pass_keeps_the_rule_on_rows_a_few_ulps_apart(seed, copies, bases, ulps, k, masked, query_is_a_row):
    """Rows whose float32 first-pass values tie or round across the cut (copies of a few rows,
    each scaled by a few float32 steps): the rows kept are still the float64 rule's, and the
    top k is the full scan's."""
    rng = np.random.default_rng(seed)
    base = unit_rows(rng, bases, 24)
    matrix = np.repeat(base, copies, axis=0)
    steps = rng.integers(-ulps, ulps + 1, len(matrix)).astype(np.float32)
    matrix = (matrix * (1 + steps * np.float32(2.0 ** -23))[:, None]).astype(np.float32)
    q = matrix[int(rng.integers(0, len(matrix)))].copy() if query_is_a_row else unit_rows(rng, 1, 24)[0]
    mask = rng.random(len(matrix)) < 0.7 if masked else None
    sketch = int8_scan.build_sketch(matrix, int8_scan.int8_kernel(), block=11)
    got = int8_scan.candidate_rows(sketch, q, mask, k)
    assert got.tolist() == every_interval_candidates(sketch, q, mask, k).tolist()
    want = top_rows(scoring.matrix_dot(matrix, q), mask, k)
    rows, scores = exact_top(matrix, sketch, q, mask, k)
    assert rows.tolist() == want.tolist()
    np.testing.assert_array_equal(scores, scoring.matrix_dot(matrix, q)[want])


@needs_kernel
@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(20, 600), k=st.integers(1, 60), exact_share=st.floats(0.05, 0.95),
       masked=st.booleans(), spread=st.sampled_from([0.05, 0.3, 1.0]))
def test_rows_with_very_different_radii_keep_the_rule(seed, n, k, exact_share, masked, spread):
    """Rows on the int8 grid (radius ~0) mixed with rows off it (wide radius): the k-th best
    lower end can belong to a row whose centre is far below the k-th best centre, and the rows
    kept are still the float64 rule's."""
    rng = np.random.default_rng(seed)
    centre = unit_rows(rng, 1, 16)[0]
    matrix = centre + spread * rng.standard_normal((n, 16)).astype(np.float32)
    on_grid = rng.random(n) < exact_share
    top = np.abs(matrix).max(axis=1, keepdims=True) / 127
    matrix[on_grid] = (np.rint(matrix / top) * top)[on_grid]
    matrix = matrix.astype(np.float32)
    q = unit_rows(rng, 1, 16)[0] if rng.random() < 0.5 else centre
    mask = rng.random(n) < 0.6 if masked else None
    sketch = int8_scan.build_sketch(matrix, int8_scan.int8_kernel(), block=17)
    assert int8_scan.candidate_rows(sketch, q, mask, k).tolist() == every_interval_candidates(sketch, q, mask, k).tolist()


@needs_kernel
@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(30, 600), k=st.integers(1, 40), masked=st.booleans(),
       duplicates=st.booleans(), spread=st.sampled_from([0.02, 0.3, 1.0]))
def test_settling_on_the_first_k_scores_keeps_the_full_scans_top_k(seed, n, k, masked, duplicates, spread):
    """The candidates left once the k best centres are scored hold the full scan's top k, ties
    at the cut included, and ranking over them gives the full scan's rows and scores."""
    rng = np.random.default_rng(seed)
    centre = unit_rows(rng, 1, 16)[0]
    matrix = (centre + spread * rng.standard_normal((n, 16))).astype(np.float32)
    if duplicates:
        matrix[1::2] = matrix[0]  # many rows tied with each other, at or near the cut
    q = centre if rng.random() < 0.5 else unit_rows(rng, 1, 16)[0]
    mask = rng.random(n) < 0.7 if masked else None
    sketch = int8_scan.build_sketch(matrix, int8_scan.int8_kernel(), block=29)
    found = int8_scan.candidates(sketch, q, mask, k)
    full = scoring.matrix_dot(matrix, q)
    want = top_rows(full, mask, k)
    settled = scoring.settled_rows(matrix, q, found, k)
    assert set(want.tolist()) <= set(settled.tolist()) <= set(found.rows.tolist())
    cut = full[want].min() if len(want) else np.inf
    allowed = np.ones(n, bool) if mask is None else mask
    assert set(np.flatnonzero(allowed & (full == cut)).tolist()) <= set(settled.tolist())  # every tie at the cut
    rows, scores = exact_top(matrix, sketch, q, mask, k)
    assert rows.tolist() == want.tolist()
    np.testing.assert_array_equal(scores, full[want])


@settings(max_examples=300, deadline=None)
@given(x=st.floats(allow_nan=False))
def test_float32_cuts_never_exceed_their_float64_value(x):
    """A float32 array compared with the cut keeps every row at or above the float64 value."""
    cut = int8_scan._at_most(x)
    assert cut.dtype == np.float32 and float(cut) <= x
    assert float(cut) == float(np.finfo(np.float32).max) or float(np.nextafter(cut, np.float32(np.inf))) > x


@settings(max_examples=200, deadline=None)
@given(dim=st.integers(1, 140_000))
def test_the_combined_code_dots_fit_an_int32_at_the_largest_shift(dim):
    most = int8_scan.QUERY_LEVELS * int8_scan.ROW_LEVELS * dim
    j = int8_scan.max_shift_bits(dim)
    if j < 0:
        assert 2 * most > int8_scan.INT32_MAX
    else:
        assert most * (2 ** j + 1) <= int8_scan.INT32_MAX < most * (2 ** (j + 1) + 1)


@needs_kernel
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), dim=st.sampled_from([1, 7, 384, 1024, 3000]), spiky=st.booleans())
def test_combined_code_dots_are_exact_at_the_extremes(seed, dim, spiky):
    """Rows of extreme codes against queries whose residual is zero (the largest shift) or
    spiky: the int32 combination equals the int64 one, and the intervals hold the float64 dots."""
    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([-1.0, 1.0]), size=dim)
    matrix = np.stack([signs, -signs, rng.choice(np.array([-1.0, 1.0]), size=dim), rng.standard_normal(dim)])
    matrix = (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)).astype(np.float32)
    q = signs.astype(np.float32) / np.float32(np.sqrt(dim))
    if spiky:
        q = q.copy()
        q[0] = 5.0
        q /= np.linalg.norm(q)
    sketch = int8_scan.build_sketch(matrix, int8_scan.int8_kernel())
    codes = int8_scan.quantize_query(q)
    q8 = codes.shifted.astype(np.int64) - int8_scan.QUERY_SHIFT
    v8 = np.clip(np.rint(matrix.astype(np.float64) / sketch.scale[:, None].astype(np.float64)), -127, 127).astype(np.int64)
    want = v8 @ (q8[0] * 2 ** codes.shift + q8[1])
    np.testing.assert_array_equal(int8_scan.combined_dots(sketch, codes).astype(np.int64), want)
    centre, radius = int8_scan.interval(sketch, codes, int8_scan.combined_dots(sketch, codes), slice(None))
    exact = matrix.astype(np.float64) @ q.astype(np.float64)
    assert (np.abs(exact - centre) <= radius).all()


@needs_kernel
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 200), dim=st.integers(1, 70))
def test_the_packed_kernel_gives_exact_integer_dot_products(seed, n, dim):
    rng = np.random.default_rng(seed)
    codes = rng.integers(-int8_scan.ROW_LEVELS, int8_scan.ROW_LEVELS + 1, size=(dim, n)).astype(np.int8)
    codes[:, 0] = rng.choice([-int8_scan.ROW_LEVELS, int8_scan.ROW_LEVELS], size=dim)  # extreme codes too
    shifted = rng.integers(1, 2 * int8_scan.QUERY_LEVELS + 2, size=(2, dim)).astype(np.uint8)
    got = int8_scan.int8_kernel()(codes)(shifted)
    np.testing.assert_array_equal(got, (shifted.astype(np.int64) - int8_scan.QUERY_SHIFT) @ codes.astype(np.int64))


@needs_kernel
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n_chunks=st.integers(1, 300), ulps=st.integers(1, 4), limit=st.integers(1, 20),
       top_k=st.sampled_from([1, 3, 80]))
def test_rows_a_few_ulps_apart_rank_exactly_like_the_plain_rule(seed, n_chunks, ulps, limit, top_k):
    """Near-ties the int8 codes cannot tell apart: the float32 rescoring decides, as a full scan does."""
    rng = np.random.default_rng(seed)
    base = unit_rows(rng, 1, 32)[0]
    chunks = np.tile(base, (n_chunks, 1))
    for row in range(n_chunks):  # each row moves a few float32 steps in a few components
        at = rng.integers(0, 32, 3)
        chunks[row, at] += (rng.integers(-ulps, ulps + 1, 3) * np.spacing(chunks[row, at])).astype(np.float32)
    topic_ids, topics = np.arange(1, 11, dtype=np.int64), unit_rows(rng, 10, 32)
    make = lambda sketch: PoolVectors(dim=32, topic_ids=topic_ids, topic_matrix=topics,  # noqa: E731
                                      chunk_ids=np.arange(n_chunks, dtype=np.int64) + 100,
                                      chunk_topic_ids=topic_ids[np.arange(n_chunks) % 10], chunk_matrix=chunks,
                                      sketch=sketch)
    with_sketch, without = make(True), make(False)
    for q in (base, unit_rows(rng, 1, 32)[0]):
        want = plain_rank(without, q, None, limit, top_k)
        assert hits(with_sketch, q, None, limit, top_k) == want


@needs_kernel
@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 10_000), share=st.sampled_from([None, 0.3, 0.8]), limit=st.integers(1, 40))
def test_an_automatic_sketch_ranks_like_the_full_scan(seed, share, limit):
    """Above ``SKETCH_MIN_ROWS`` the sketch is made without being asked, and changes nothing."""
    n = scoring.SKETCH_MIN_ROWS + 500
    pool = random_pool(seed, 400, n, 24, sketch=None)
    plain = random_pool(seed, 400, n, 24, sketch=False)
    assert pool.chunk_sketch is not None and pool.topic_sketch is None  # 400 topics: a float32 scan
    rng = np.random.default_rng(seed + 1)
    allowed = None if share is None else [int(t) for t in pool.topic_ids if rng.random() < share]
    for q in (unit_rows(rng, 1, 24)[0], pool.chunk_matrix[int(rng.integers(0, n))].copy()):
        assert hits(pool, q, allowed, limit) == plain_rank(plain, q, allowed, limit)


@needs_kernel
def test_concurrent_queries_on_a_sketched_pool_rank_as_serial_ones():
    from concurrent.futures import ThreadPoolExecutor

    pool = random_pool(13, 300, scoring.SKETCH_MIN_ROWS + 100, 16, sketch=None)
    assert pool.chunk_sketch is not None
    queries = list(unit_rows(np.random.default_rng(14), 16, 16))
    serial = [hits(pool, q, None, 10) for q in queries]
    with ThreadPoolExecutor(4) as threads:
        together = list(threads.map(lambda q: hits(pool, q, None, 10), queries * 3))
    assert together == serial * 3


@pytest.mark.parametrize("sketch", [False, True])
def test_topics_with_equal_scores_rank_by_topic_id(sketch):
    if sketch and int8_scan.int8_kernel() is None:
        pytest.skip("no onnxruntime int8 kernel")
    same = np.array([0.6, 0.8, 0.0, 0.0], np.float32)
    pool = PoolVectors(dim=4, topic_ids=np.array([10, 20, 30, 40], np.int64),
                       topic_matrix=np.tile(np.array([0.0, 0.0, 1.0, 0.0], np.float32), (4, 1)),
                       chunk_ids=np.array([5, 6, 7, 8], np.int64), chunk_topic_ids=np.array([30, 10, 40, 20], np.int64),
                       chunk_matrix=np.tile(same, (4, 1)), sketch=sketch)
    got = hits(pool, np.array([1.0, 0.0, 0.0, 0.0], np.float32), None, 3)
    assert [(tid, chunk) for tid, _, chunk in got] == [(10, 6), (20, 8), (30, 5)]
    assert len({score for _, score, _ in got}) == 1


@needs_kernel
def test_odd_rows_and_queries_fall_back_safely():
    rng = np.random.default_rng(3)
    matrix = unit_rows(rng, 50, 8)
    matrix[4] = 0.0  # a zero row
    matrix[9, 2] = np.nan  # a broken row is always scored exactly
    sketch = int8_scan.build_sketch(matrix, int8_scan.int8_kernel())
    assert np.isinf(sketch.err[9]) and sketch.scale[4] == 1.0
    rows = int8_scan.candidate_rows(sketch, unit_rows(rng, 1, 8)[0], None, 3)
    assert 9 in rows
    assert int8_scan.candidate_rows(sketch, np.zeros(8, np.float32), None, 3) is None
    got_rows, got_scores = exact_top(matrix, sketch, np.zeros(8, np.float32), None, 3)  # zero query: full scan
    assert len(got_rows) == 3


def test_without_the_kernel_the_sketch_is_skipped_and_results_stay(monkeypatch):
    q = unit_rows(np.random.default_rng(4), 1, 8)[0]
    want = hits(random_pool(5, 20, 300, 8, sketch=False), q, None, 10)
    monkeypatch.setattr(int8_scan, "_kernel", [None])
    pool = random_pool(5, 20, 300, 8, sketch=True)
    assert pool.chunk_sketch is None and pool.topic_sketch is None
    assert hits(pool, q, None, 10) == want


def test_a_saturating_kernel_is_refused():
    def saturating(codes):  # int16 pair sums, as AVX2's vpmaddubsw would with 8-bit queries
        def scan(shifted):
            a, b = shifted.astype(np.int64), codes.astype(np.int64)
            pairs = a[:, 0::2, None] * b[None, 0::2] + a[:, 1::2, None] * b[None, 1::2]
            return np.clip(pairs, -32768, 32767).sum(axis=1) // 2  # and wrong besides
        return scan

    def exact(codes):  # the query's shift undone by the kernel's zero point
        return lambda shifted: (shifted.astype(np.int64) - int8_scan.QUERY_SHIFT) @ codes.astype(np.int64)

    assert int8_scan._probe(exact)
    assert not int8_scan._probe(saturating)


def test_matmul_integer_model_is_what_onnx_helper_writes():
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    codes = (np.arange(3 * 200).reshape(3, 200) % 255 - 127).astype(np.int8)
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["q", "codes", "q_zero_point"], ["s"])], "int8_scan",
        [helper.make_tensor_value_info("q", TensorProto.UINT8, ["m", 3])],
        [helper.make_tensor_value_info("s", TensorProto.INT32, ["m", 200])],
        initializer=[numpy_helper.from_array(codes, "codes"),
                     numpy_helper.from_array(np.array(int8_scan.QUERY_SHIFT, np.uint8), "q_zero_point")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    model.ClearField("producer_name")
    assert int8_scan.matmul_integer_model(codes) == model.SerializeToString()
    onnx.checker.check_model(onnx.load_from_string(int8_scan.matmul_integer_model(codes)))



class _RecordingRuntime:
    """onnxruntime with ``InferenceSession`` recording what each session was opened from."""

    def __init__(self, ort):
        self.opened: list[object] = []
        self.SessionOptions = ort.SessionOptions

        def session(path_or_bytes, *args, **kwargs):
            self.opened.append(path_or_bytes)
            return ort.InferenceSession(path_or_bytes, *args, **kwargs)

        self.InferenceSession = session


def _scan_codes():
    rng = np.random.default_rng(7)
    codes = rng.integers(-int8_scan.ROW_LEVELS, int8_scan.ROW_LEVELS + 1, size=(24, 300)).astype(np.int8)
    shifted = rng.integers(1, 2 * int8_scan.QUERY_LEVELS + 2, size=(2, 24)).astype(np.uint8)
    return codes, shifted, (shifted.astype(np.int64) - int8_scan.QUERY_SHIFT) @ codes.astype(np.int64)


@needs_kernel
def test_the_scan_session_is_opened_from_a_file_then_removed_not_from_bytes_it_would_keep():
    ort = pytest.importorskip("onnxruntime")
    runtime = _RecordingRuntime(ort)
    codes, shifted, want = _scan_codes()
    session = int8_scan.scan_session(runtime, codes, ort.SessionOptions())
    [opened] = runtime.opened
    assert isinstance(opened, str) and not os.path.exists(opened) and not os.path.exists(os.path.dirname(opened))
    np.testing.assert_array_equal(session.run(None, {"q": shifted})[0], want)


@needs_kernel
def test_the_scan_session_is_made_from_bytes_where_no_temporary_file_can_be_written(monkeypatch):
    ort = pytest.importorskip("onnxruntime")
    runtime = _RecordingRuntime(ort)

    def no_folder(*args, **kwargs):
        raise PermissionError("read-only temporary folder")

    monkeypatch.setattr(int8_scan.tempfile, "TemporaryDirectory", no_folder)
    codes, shifted, want = _scan_codes()
    session = int8_scan.scan_session(runtime, codes, ort.SessionOptions())
    assert [type(opened) for opened in runtime.opened] == [bytes]
    np.testing.assert_array_equal(session.run(None, {"q": shifted})[0], want)


def test_the_model_parts_hold_the_codes_without_a_copy():
    codes, _, _ = _scan_codes()
    parts = int8_scan.matmul_integer_model_parts(codes)
    assert b"".join(parts) == int8_scan.matmul_integer_model(codes)
    assert np.shares_memory(np.frombuffer(parts[1], dtype=np.int8), codes)

# -- masks instead of sets ------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(ids=st.lists(st.integers(-5, 60), max_size=40, unique=True),
       chunk_topics=st.lists(st.integers(-5, 60), max_size=40),
       allowed=st.one_of(st.sets(st.integers(-10, 70)), st.lists(st.integers(-10, 70))))
def test_allowed_slots_equal_set_membership(ids, chunk_topics, allowed):
    ids = sorted(ids)
    pool = PoolVectors(dim=2, topic_ids=np.array(ids, np.int64), topic_matrix=np.zeros((len(ids), 2), np.float32),
                       chunk_ids=np.arange(len(chunk_topics), dtype=np.int64),
                       chunk_topic_ids=np.array(chunk_topics, np.int64),
                       chunk_matrix=np.zeros((len(chunk_topics), 2), np.float32), sketch=False)
    slots = pool.allowed_slots(allowed)
    allowed_set = set(allowed)
    assert slots[pool.topic_slot].tolist() == [t in allowed_set for t in ids]
    assert slots[pool.chunk_slot].tolist() == [t in allowed_set for t in chunk_topics]
    np.testing.assert_array_equal(pool.allowed_slots(np.array(sorted(allowed_set), np.int64)), slots)


# -- the streaming loader ---------------------------------------------------------------------

def rows_of(pool: PoolVectors, which: str) -> list[Row]:
    if which == "topic":
        return [Row(topic_id=int(t), chunk_id=None, vec=encode_vector(v)) for t, v in zip(pool.topic_ids, pool.topic_matrix)]
    return [Row(topic_id=int(t), chunk_id=int(c), vec=encode_vector(v))
            for c, t, v in zip(pool.chunk_ids, pool.chunk_topic_ids, pool.chunk_matrix)]


def same_vectors(a: PoolVectors, b: PoolVectors) -> None:
    assert a.dim == b.dim
    for name in ("topic_ids", "topic_matrix", "chunk_ids", "chunk_topic_ids", "chunk_matrix"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 1000), n_topics=st.integers(0, 30), n_chunks=st.integers(0, 70),
       topic_skew=st.integers(-40, 40), chunk_skew=st.integers(-80, 80))
def test_streams_build_what_row_lists_build_whatever_the_count(seed, n_topics, n_chunks, topic_skew, chunk_skew):
    source = random_pool(seed, max(n_topics, 1), n_chunks, 6, sketch=False)
    topics, chunks = rows_of(source, "topic")[:n_topics], rows_of(source, "chunk")
    whole = PoolVectors.from_vector_rows(topics, chunks, 6, sketch=False)
    streamed = PoolVectors.from_streams((max(0, n_topics + topic_skew), iter(topics)),
                                        (max(0, n_chunks + chunk_skew), iter(chunks)), default_dim=6, sketch=False)
    same_vectors(streamed, whole)


def test_stream_takes_its_dimension_from_the_first_blob_and_refuses_a_wrong_one():
    rows = [Row(topic_id=1, chunk_id=5, vec=encode_vector(np.ones(3))), Row(topic_id=1, chunk_id=6, vec=b"\x00" * 8)]
    with pytest.raises(ValueError, match="vector 1 has 8 bytes, expected 12"):
        read_vector_stream(2, iter(rows), None, with_chunks=True)
    dim, topic_ids, chunk_ids, matrix = read_vector_stream(5, iter(rows[:1]), None, with_chunks=True)
    assert (dim, topic_ids.tolist(), chunk_ids.tolist(), matrix.shape) == (3, [1], [5], (1, 3))
    empty = PoolVectors.from_streams((0, iter(())), (3, iter(())), default_dim=4)
    assert empty.dim == 4 and empty.chunk_matrix.shape == (0, 4) and empty.topic_matrix.shape == (0, 4)
    assert hits(empty, np.ones(4, np.float32) / 2, None, 5) == []


@pytest.fixture(scope="module")
def sqlite_pool(tmp_path_factory):
    """A pool with two collections, one ACL-restricted, and vectors on every topic and chunk."""
    import sqlite3

    root = tmp_path_factory.mktemp("speedpaths")
    for name, erisim in (("acik", "herkes"), ("kapali", "kisitli")):
        folder = root / name
        folder.mkdir()
        for i in range(12):
            acl = "acl: [patron]\n" if i % 3 == 0 else ""
            body = "\n\n".join(f"## Bölüm {j}\n\nmetin {name} {i} {j} " * 3 for j in range(1 + i % 4))
            (folder / f"{name}-{i:02d}.md").write_text(f"---\nslug: {name}-{i:02d}\ntitle: {name} {i}\n{acl}---\n{body}\n", "utf-8")
        build_pool(folder, root / f"{name}.db", name, erisim=erisim)
    pool_file = root / "pool.db"
    for name in ("acik", "kapali"):
        import_collection(pool_file, root / f"{name}.db", name)
    rng = np.random.default_rng(11)
    with sqlite3.connect(pool_file) as con:
        for table, key in (("doc$topic_vec", "topic_id"), ("doc$chunk_vec", "chunk_id")):
            source = "doc$topic" if table == "doc$topic_vec" else "doc$chunk"
            ids = [r[0] for r in con.execute(f'select id from "{source}" order by id')]
            con.executemany(f'insert into "{table}"({key}, vec) values (?, ?)',
                            [(i, encode_vector(v)) for i, v in zip(ids, unit_rows(rng, len(ids), 12))])
    return pool_file


@pytest.mark.parametrize("access", [UNRESTRICTED, Access(frozenset({"patron", "*"})), Access(frozenset({"*"}))])
def test_sqlite_stream_equals_its_row_lists(sqlite_pool, access):
    with SqlitePool(sqlite_pool) as pool:
        lists = {w: pool.vectors(w, access) for w in ("topic", "chunk")}
        assert {w: pool.vector_count(w, access) for w in lists} == {w: len(r) for w, r in lists.items()}
        assert {w: list(pool.iter_vectors(w, access)) for w in lists} == lists
        streamed = PoolVectors.from_streams(*((pool.vector_count(w, access), pool.iter_vectors(w, access))
                                              for w in ("topic", "chunk")))
    assert lists["chunk"] and [r.chunk_id for r in lists["chunk"]] == sorted(r.chunk_id for r in lists["chunk"])
    same_vectors(streamed, PoolVectors.from_vector_rows(lists["topic"], lists["chunk"], 12))


def test_restricted_streams_hold_only_allowed_topics(sqlite_pool):
    with SqlitePool(sqlite_pool) as pool:
        everyone = Access(frozenset({"*"}))
        allowed = set(pool.topic_ids(everyone))
        rows = list(pool.iter_vectors("chunk", everyone))
        assert rows and {r.topic_id for r in rows} <= allowed
        assert pool.vector_count("chunk", everyone) < pool.vector_count("chunk", UNRESTRICTED)


@needs_kernel
def test_a_sketched_query_runs_on_the_calling_thread_alone():
    """No fan-out to helper threads: on busy cores a split scan lost to one thread."""
    import threading

    from knowspec.impl import runtime as process

    with process.activated():  # a fresh runtime: none of its helper threads exists yet
        pool = random_pool(17, 50, scoring.SKETCH_MIN_ROWS + 10, 16, sketch=None)
        plain = random_pool(17, 50, scoring.SKETCH_MIN_ROWS + 10, 16, sketch=False)
        q = unit_rows(np.random.default_rng(18), 1, 16)[0]
        before = {t.ident for t in threading.enumerate()}
        assert hits(pool, q, None, 10) == hits(plain, q, None, 10)
        assert {t.ident for t in threading.enumerate()} <= before
