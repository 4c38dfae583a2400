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


@given(ROWS, st.sampled_from([list, set, tuple, iter]))
def test_few_rows_set_one_by_one_make_the_bitmap_the_numeral_makes(case, container):
    n_rows, rows = case
    rows = rows if n_rows else []
    by_numeral = _with_share(0, lambda: rb.of_rows(container(rows), n_rows))
    one_by_one = _with_share(1 << 30, lambda: rb.of_rows(container(rows), n_rows))
    assert by_numeral == one_by_one == sum(1 << row for row in set(rows))


@given(ROWS)
def test_few_rows_read_from_the_bytes_are_the_rows_the_numeral_gives(case):
    n_rows, rows = case
    bitmap = rb.of_rows(rows if n_rows else [], n_rows)
    from_numeral = _with_share(0, lambda: list(rb.rows(bitmap)))
    from_bytes = _with_share(1 << 30, lambda: list(rb.rows(bitmap)))
    assert from_numeral == from_bytes == sorted(set(rows if n_rows else []))


def _with_share(share, make):
    kept = rb.SPARSE_SHARE
    rb.SPARSE_SHARE = share
    try:
        return make()
    finally:
        rb.SPARSE_SHARE = kept
