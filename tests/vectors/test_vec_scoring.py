"""Vector scoring: the seed's max(chunk top 80, topic top 80 + 0.02) rule, the ACL mask before
the cut, the BLOB layout and the pool matrix cache."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from knowspec.impl import runtime as process
from knowspec.impl.docpool.vectors.scoring import (
    TOPIC_BONUS, PoolVectors, decode_vectors, encode_vector, encode_vectors,
    pool_vector_cache, top_rows, vector_rank, vector_snippet)


def unit(*xs) -> np.ndarray:
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def pool(topics: dict[int, np.ndarray], chunks: list[tuple[int, int, np.ndarray]], dim: int = 3) -> PoolVectors:
    return PoolVectors.from_rows(
        [(tid, encode_vector(v)) for tid, v in topics.items()],
        [(cid, tid, encode_vector(v)) for cid, tid, v in chunks], dim)


Q = unit(1, 0, 0)


def test_score_is_max_of_chunk_and_topic_plus_bonus():
    p = pool({1: unit(1, 1, 0), 2: unit(0, 1, 0)},
             [(10, 1, unit(1, 0.2, 0)), (20, 2, unit(1, 0.1, 0))])
    hits = {h.topic_id: h for h in vector_rank(p, Q, None, 10)}
    chunk1, topic1 = float(unit(1, 0.2, 0) @ Q), float(unit(1, 1, 0) @ Q)
    assert hits[1].score == pytest.approx(max(chunk1, topic1 + TOPIC_BONUS), abs=1e-6)
    assert hits[2].score == pytest.approx(float(unit(1, 0.1, 0) @ Q), abs=1e-6)


def test_topic_vector_wins_with_bonus_when_it_is_the_best_signal():
    p = pool({1: unit(1, 0, 0)}, [(10, 1, unit(0, 1, 0))])
    (hit,) = vector_rank(p, Q, None, 10)
    assert hit.score == pytest.approx(1.0 + TOPIC_BONUS, abs=1e-6)
    assert hit.chunk_id == 10  # the snippet still comes from the topic's best chunk


def test_best_chunk_is_the_topics_highest_scoring_chunk():
    p = pool({}, [(10, 1, unit(0, 1, 0)), (11, 1, unit(1, 0.1, 0)), (12, 1, unit(1, 1, 0))])
    (hit,) = vector_rank(p, Q, None, 10)
    assert hit.chunk_id == 11


def test_forbidden_topic_never_appears_and_does_not_push_allowed_out():
    # 80 chunks of forbidden topic 99 all beat every chunk of the allowed topics. Were the mask
    # applied after the top-80 cut, no allowed topic would survive.
    forbidden = [(1000 + i, 99, unit(1, 0.001 * i, 0)) for i in range(80)]
    allowed = [(1, 1, unit(1, 1, 0)), (2, 2, unit(1, 2, 0))]
    p = pool({99: unit(1, 0, 0), 1: unit(0, 0, 1), 2: unit(0, 0, 1)}, forbidden + allowed)
    hits = vector_rank(p, Q, {1, 2}, 10)
    assert [h.topic_id for h in hits] == [1, 2]
    assert all(h.chunk_id in (1, 2) for h in hits)


def test_no_allowed_topics_gives_no_hits():
    p = pool({1: unit(1, 0, 0)}, [(10, 1, unit(1, 0, 0))])
    assert vector_rank(p, Q, set(), 10) == []


def test_only_the_top_80_chunks_count():
    # 80 chunks of topic 1 fill the chunk top 80; topic 2's chunk (rank 81) is not scored,
    # and topic 2 has no topic vector, so it does not appear.
    chunks = [(i, 1, unit(1, 0.001 * i, 0)) for i in range(80)] + [(500, 2, unit(1, 0.5, 0))]
    hits = vector_rank(pool({}, chunks), Q, None, 10)
    assert [h.topic_id for h in hits] == [1]


def test_ties_break_by_topic_id():
    p = pool({}, [(10, 7, unit(1, 1, 0)), (11, 3, unit(1, 1, 0)), (12, 5, unit(1, 1, 0))])
    assert [h.topic_id for h in vector_rank(p, Q, None, 10)] == [3, 5, 7]


def test_query_of_wrong_dimension_is_rejected():
    with pytest.raises(ValueError):
        vector_rank(pool({1: unit(1, 0, 0)}, []), np.ones(4, np.float32), None, 5)


vectors = st.lists(st.tuples(st.integers(0, 9), st.floats(-1, 1), st.floats(-1, 1), st.floats(0.01, 1)),
                   min_size=1, max_size=60)


@settings(max_examples=80, deadline=None)
@given(chunks=vectors, topics=vectors, limit=st.integers(1, 12),
       allowed=st.one_of(st.none(), st.sets(st.integers(0, 9))))
def test_ranking_is_sorted_limited_and_allowed(chunks, topics, limit, allowed):
    p = pool({tid: unit(a, b, c) for tid, a, b, c in topics},
             [(i, tid, unit(a, b, c)) for i, (tid, a, b, c) in enumerate(chunks)])
    q = unit(0.3, -0.2, 0.9)
    hits = vector_rank(p, q, allowed, limit, top_k=5)
    assert len(hits) <= limit
    assert len({h.topic_id for h in hits}) == len(hits)
    assert all(hits[i].score >= hits[i + 1].score for i in range(len(hits) - 1))
    if allowed is not None:
        assert {h.topic_id for h in hits} <= allowed
    for h in hits:  # every score is one of the two signals the rule allows
        cs = [float(unit(a, b, c) @ q) for tid, a, b, c in chunks if tid == h.topic_id]
        ts = [float(unit(a, b, c) @ q) + TOPIC_BONUS for tid, a, b, c in topics if tid == h.topic_id]
        assert any(abs(h.score - s) < 1e-5 for s in cs + ts)


@given(st.lists(st.floats(-10, 10), min_size=0, max_size=40), st.integers(1, 10))
def test_top_rows_returns_best_allowed_rows_in_order(values, k):
    scores = np.array(values, dtype=np.float32)
    mask = np.arange(len(values)) % 3 != 0
    rows = top_rows(scores, mask, k)
    assert len(rows) == min(k, int(mask.sum()))
    assert all(mask[rows])
    assert list(scores[rows]) == sorted(scores[rows], reverse=True)
    if len(rows):
        assert scores[mask].max() == scores[rows[0]]


def test_blob_layout_is_little_endian_float32_without_header():
    blob = encode_vector(np.array([1.0, -2.0, 0.5], dtype=np.float32))
    assert blob == b"\x00\x00\x80\x3f" + b"\x00\x00\x00\xc0" + b"\x00\x00\x00\x3f"


@given(st.lists(st.lists(st.floats(-1e3, 1e3, width=32), min_size=4, max_size=4), max_size=6))
def test_encode_decode_round_trip(rows):
    matrix = np.array(rows, dtype=np.float32).reshape(-1, 4)
    np.testing.assert_array_equal(decode_vectors(encode_vectors(matrix), 4), matrix)


def test_blob_of_wrong_size_is_an_error():
    with pytest.raises(ValueError, match="expected 16"):
        decode_vectors([b"\x00" * 12], 4)


def test_snippet_is_first_200_characters():
    text = "ğ" * 150 + "x" * 100
    assert vector_snippet(text) == "ğ" * 150 + "x" * 50
    assert vector_snippet("short") == "short"


def test_cache_reuses_until_the_change_stamp_moves():
    cache, loads = pool_vector_cache(process.Runtime()), []

    def loader():
        loads.append(1)
        return pool({1: unit(1, 0, 0)}, [])

    first = cache.get(("db", "pool.db"), 1, loader)
    assert cache.get(("db", "pool.db"), 1, loader) is first
    assert cache.get(("db", "pool.db"), 2, loader) is not first
    cache.get(("other", "x.db"), 1, loader)
    assert len(loads) == 3


def test_storage_rows_build_the_same_matrices():
    from types import SimpleNamespace as Row

    topic_rows = [Row(topic_id=1, chunk_id=None, vec=encode_vector(unit(1, 0, 0)))]
    chunk_rows = [Row(topic_id=1, chunk_id=10, vec=encode_vector(unit(0, 1, 0)))]
    a = PoolVectors.from_vector_rows(topic_rows, chunk_rows, 3)
    b = pool({1: unit(1, 0, 0)}, [(10, 1, unit(0, 1, 0))])
    assert a.chunk_ids.tolist() == b.chunk_ids.tolist() == [10]
    np.testing.assert_array_equal(a.topic_matrix, b.topic_matrix)
    np.testing.assert_array_equal(a.chunk_matrix, b.chunk_matrix)
