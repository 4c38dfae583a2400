"""A prefix's postings summed per row (``fulltext.rank.summed_per_row``): the rows and float64 sums
of one count per column over every row of the pool, to the bit (the ranking's bm25 is pinned
to FTS5's elsewhere, ``test_parity_fts5``)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from knowspec.impl.docpool.fulltext.rank import summed_per_row


def summed_over_every_row(rows: np.ndarray, tf: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The reference: a count per column over all ``n`` rows, then the rows with any instance."""
    dense = [np.bincount(rows, weights=tf[:, c], minlength=n) for c in range(tf.shape[1])]
    held = np.flatnonzero(np.logical_or.reduce([d > 0 for d in dense]))
    return held, np.stack([d[held] for d in dense], axis=1)


@st.composite
def prefix_postings(draw):
    """Postings of a few terms (each: ascending distinct rows) back to back, with per-column counts."""
    n = draw(st.integers(1, 300))
    terms = draw(st.lists(st.sets(st.integers(0, n - 1), max_size=60), min_size=1, max_size=6))
    rows = np.array([r for term in terms for r in sorted(term)], dtype=np.int32)
    counts = draw(st.lists(st.tuples(*[st.integers(0, 70_000)] * 3), min_size=len(rows), max_size=len(rows)))
    tf = np.array(counts, dtype=np.uint16 if all(c < 2**16 for row in counts for c in row) else np.int32).reshape(-1, 3)
    return rows, tf, n


@settings(max_examples=200, deadline=None)
@given(prefix_postings())
def test_the_rows_and_sums_are_a_count_over_every_row(postings):
    rows, tf, n = postings
    got_rows, got_sums = summed_per_row(rows, tf, n)
    want_rows, want_sums = summed_over_every_row(rows, tf, n)
    assert np.array_equal(got_rows, want_rows)
    assert got_sums.shape == want_sums.shape and np.array_equal(got_sums, want_sums)
    assert got_sums.dtype == np.float64  # (the reference's empty answer is int64: no value to differ)


def test_rows_come_ascending_once_each_however_the_terms_interleave():
    rows = np.array([5, 9, 2, 5, 7, 9, 1], dtype=np.int32)
    tf = np.array([[1, 0, 0], [0, 2, 0], [1, 1, 1], [3, 0, 0], [0, 0, 1], [1, 0, 0], [0, 0, 0]], dtype=np.uint16)
    held, sums = summed_per_row(rows, tf, 10)
    assert held.tolist() == [2, 5, 7, 9]  # row 1's posting holds no instance
    assert sums.tolist() == [[1, 1, 1], [4, 0, 0], [0, 0, 1], [1, 2, 0]]
