"""BM25 arithmetic: the OKF section formula and SQLite FTS5's variant."""

import math

from hypothesis import given, strategies as st

from knowspec.impl.rules.bm25 import (
    TermStat,
    average_length,
    bm25,
    fts5_bm25,
    idf_fts5,
    idf_plus_one,
    term_weight,
    weighted_tf,
)


def test_single_term_matches_the_written_formula():
    n, df, tf, length, avg = 10, 2, 3.0, 12.0, 8.0
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    expected = idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / avg))
    assert math.isclose(bm25([TermStat(tf, df)], length, avg, n), expected)


def test_zero_tf_contributes_nothing():
    assert bm25([TermStat(0, 3)], 5, 5, 10) == 0.0


def test_fts5_idf_is_floored_for_common_terms():
    assert idf_fts5(4, 4) == 1e-6
    assert idf_fts5(100, 1) > 0


def test_fts5_score_is_negated_and_weights_columns():
    light = fts5_bm25([[1, 0]], [1.0, 10.0], [1], 10, 10.0, 100)
    heavy = fts5_bm25([[0, 1]], [1.0, 10.0], [1], 10, 10.0, 100)
    assert heavy < light < 0


def test_weighted_tf_uses_field_weights():
    assert weighted_tf({"body": 2, "heading": 1, "title": 1}, {"body": 1, "heading": 3, "title": 2}) == 7


def test_average_length_of_nothing_is_one():
    assert average_length([]) == 1.0
    assert average_length([0, 0]) == 1.0
    assert average_length([2, 4]) == 3.0


@given(st.integers(1, 1000), st.data())
def test_idf_plus_one_is_positive_and_decreasing_in_df(n, data):
    df1 = data.draw(st.integers(0, n))
    df2 = data.draw(st.integers(df1, n))
    assert idf_plus_one(n, df1) >= idf_plus_one(n, df2) > 0


@given(st.floats(0.1, 100), st.floats(0.1, 100), st.floats(0.1, 100))
def test_term_weight_is_bounded_by_k1_plus_one(tf, length, avg):
    assert 0 < term_weight(tf, length, avg) < 2.2


@given(st.floats(0.1, 50), st.floats(0.1, 50), st.floats(1, 100), st.floats(1, 100))
def test_longer_documents_score_lower(tf, extra, length, avg):
    assert term_weight(tf, length + extra, avg) < term_weight(tf, length, avg)
