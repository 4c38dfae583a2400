"""``reader.postings`` turns token instances into the arrays every full-text ranker reads: the
same arrays as counting each (term, row, column) by hand, whatever the instances' order and
integer widths (the index builders feed it int32 ids to keep an import's memory down)."""

from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import given, settings, strategies as st

from knowspec.impl.docpool.fulltext.reader import COLUMNS, postings

N_COLS = len(COLUMNS)


def counted(term: list[int], row: list[int], col: list[int], n_terms: int, n_rows: int):
    """The arrays written out from a Counter: pairs by (term, row), columns counted apart."""
    cells = Counter(zip(term, row, col))
    pairs = sorted({(t, r) for t, r, _ in cells})
    post_tf = np.zeros((len(pairs), N_COLS), dtype=np.int64)
    for k, (t, r) in enumerate(pairs):
        for c in range(N_COLS):
            post_tf[k, c] = cells[(t, r, c)]
    term_start = np.searchsorted(np.array([t for t, _ in pairs], dtype=np.int64), np.arange(n_terms + 1))
    row_len = np.bincount(np.array(row, dtype=np.int64), minlength=n_rows).astype(np.float64)
    return term_start, np.array([r for _, r in pairs], dtype=np.int64), post_tf, row_len


instances = st.integers(1, 6).flatmap(lambda n_terms: st.integers(1, 5).flatmap(lambda n_rows: st.tuples(
    st.just(n_terms), st.just(n_rows),
    st.lists(st.tuples(st.integers(0, n_terms - 1), st.integers(0, n_rows - 1), st.integers(0, N_COLS - 1)),
             max_size=60))))


@settings(max_examples=200, deadline=None)
@given(case=instances, ordered=st.booleans(), width=st.sampled_from([np.int32, np.int64]))
def test_postings_count_every_term_row_and_column_like_a_counter(case, ordered, width):
    n_terms, n_rows, triples = case
    if ordered:
        triples = sorted(triples)
    term = np.array([t for t, _, _ in triples], dtype=width)
    row = np.array([r for _, r, _ in triples], dtype=width)
    col = np.array([c for _, _, c in triples], dtype=width)
    got = postings(term, row, col, n_terms, n_rows, ordered=ordered)  # ordered: the caller sorted them
    want = counted(term.tolist(), row.tolist(), col.tolist(), n_terms, n_rows)
    assert got[0].tolist() == want[0].tolist()
    assert got[1].dtype == np.int32 and got[1].tolist() == want[1].tolist()
    assert got[2].dtype == np.uint16 and got[2].tolist() == want[2].tolist()
    assert got[3].tolist() == want[3].tolist()


def test_a_column_counted_past_uint16_keeps_its_count_in_int32():
    many = 2 ** 16 + 3
    term = np.zeros(many + 1, dtype=np.int32)
    row = np.zeros(many + 1, dtype=np.int32)
    col = np.array([0] * many + [N_COLS - 1], dtype=np.int32)
    _, post_row, post_tf, row_len = postings(term, row, col, 1, 1)
    assert post_tf.dtype == np.int32
    assert post_tf.tolist() == [[many] + [0] * (N_COLS - 2) + [1]]
    assert post_row.tolist() == [0] and row_len.tolist() == [many + 1]
