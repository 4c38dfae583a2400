"""Row sets as integer bitmaps: a list of rows and its bitmap say the same thing both ways."""

from __future__ import annotations

from hypothesis import given, strategies as st

from knowspec.impl.okf.search import row_bitmaps as rb

ROWS = st.integers(0, 300).flatmap(lambda n: st.tuples(st.just(n), st.lists(st.integers(0, max(n - 1, 0)), max_size=40)))


@given(ROWS)
def test_a_bitmap_gives_back_its_rows_ascending_without_repeats(case):
    n_rows, rows = case
    rows = rows if n_rows else []
    bitmap = rb.of_rows(rows, n_rows)
    assert list(rb.rows(bitmap)) == sorted(set(rows))
    assert bitmap.bit_count() == len(set(rows))


@given(ROWS, st.integers(0, 50))
def test_first_rows_are_the_lowest_rows(case, count):
    n_rows, rows = case
    rows = rows if n_rows else []
    assert rb.first_rows(rb.of_rows(rows, n_rows), count) == sorted(set(rows))[:count]


@given(ROWS)
def test_a_bitmap_round_trips_through_its_bytes(case):
    n_rows, rows = case
    rows = rows if n_rows else []
    bitmap = rb.of_rows(rows, n_rows)
    data = rb.to_bytes(bitmap, n_rows)
    assert len(data) == (n_rows + 7) // 8 and rb.of_bytes(data) == bitmap
    assert bitmap & ~rb.every_row(n_rows) == 0
