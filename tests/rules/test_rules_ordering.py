"""Truncation and shared sort keys."""

from hypothesis import given, strategies as st

from knowspec.impl.rules.ordering import byte_key, edge_key, first_page_by_score, search_hit_key, section_hit_key, truncate


@given(st.lists(st.integers()), st.integers(0, 120))
def test_truncate_bounds_and_flags(items, limit):
    page, total, truncated = truncate(items, limit)
    assert len(page) <= limit
    assert total == len(items) >= len(page)
    assert truncated == (total > len(page))
    assert page == items[: len(page)]


def test_byte_key_orders_like_utf8_bytes():
    ids = ["é", "z", "a-b", "a", "a/b"]
    assert sorted(ids, key=byte_key) == ["a", "a-b", "a/b", "z", "é"]


def test_search_hits_rank_first_then_id():
    rows = [(1, "a"), (6, "z"), (5, "b"), (5, "a")]
    assert sorted(rows, key=lambda r: search_hit_key(*r)) == [(6, "z"), (5, "a"), (5, "b"), (1, "a")]


def test_edges_sort_navigation_before_relation_and_null_type_first():
    edges = [
        ("relation", "a", "b", "uses"),
        ("navigation", "b", "a", None),
        ("relation", "a", "b", "depends"),
        ("navigation", "a", "b", None),
    ]
    assert sorted(edges, key=lambda e: edge_key(*e)) == [
        ("navigation", "a", "b", None),
        ("navigation", "b", "a", None),
        ("relation", "a", "b", "depends"),
        ("relation", "a", "b", "uses"),
    ]


@given(st.lists(st.tuples(st.sampled_from([0.0, 0.5, 1.25, 2.0, 7.5]), st.sampled_from(["a", "b", "é", "z"]),
                          st.integers(1, 4))), st.integers(0, 12))
def test_first_page_by_score_is_the_first_limit_of_the_full_sort(hits, limit):
    def key(hit):
        return section_hit_key(*hit)

    assert first_page_by_score(hits, limit, lambda hit: hit[0], key) == truncate(sorted(hits, key=key), limit)
