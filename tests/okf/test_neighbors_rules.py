"""get_neighbors edge selection, ordering and source rules over plain edges."""

import pytest
from hypothesis import given, strategies as st

from knowspec.impl.errors import ToolError
from knowspec.impl.okf.graph.neighbors import (
    Edge,
    EdgeIndex,
    SourceEntry,
    neighbourhood,
    normalise_kinds,
    select_sources,
)


def nav(a, b):
    return Edge("navigation", a, b, None, a, b)


def rel(a, b, typ, to_ref=None, from_ref=None):
    return Edge("relation", from_ref or a, to_ref or b, typ, a, b)


EXAMPLE = EdgeIndex.of([nav("a", "b"), nav("b", "a"), rel("b", "a", "uses", to_ref="a#section")])
DOC = [SourceEntry("doc", "https://example.com/doc", "")]
ALL = ["navigation", "relation", "source"]


def test_contract_example_both():
    n = neighbourhood(EXAMPLE, "a", "both", ALL, 20, DOC)
    assert [(e.kind, e.source, e.target, e.relation_type) for e in n.edges] == [
        ("navigation", "a", "b", None),
        ("navigation", "b", "a", None),
        ("relation", "b", "a#section", "uses"),
    ]
    assert n.total == 3 and not n.truncated
    assert n.sources == DOC


def test_contract_example_in_has_no_sources():
    n = neighbourhood(EXAMPLE, "a", "in", ALL, 20, DOC)
    assert n.total == 2
    assert n.sources == []


def test_out_only_keeps_leaving_edges():
    n = neighbourhood(EXAMPLE, "a", "out", ALL, 20, DOC)
    assert [(e.source, e.target) for e in n.edges] == [("a", "b")]


def test_self_edge_counted_once_for_both_and_present_for_in():
    index = EdgeIndex.of([nav("a", "a")])
    assert neighbourhood(index, "a", "both", ALL, 20, []).total == 1
    assert neighbourhood(index, "a", "in", ALL, 20, []).total == 1
    assert neighbourhood(index, "a", "out", ALL, 20, []).total == 1


def test_duplicates_are_not_collapsed():
    index = EdgeIndex.of([nav("a", "b"), nav("a", "b")])
    assert neighbourhood(index, "a", "out", ALL, 20, []).total == 2


def test_kinds_filter_and_echo_order():
    assert normalise_kinds(["source", "navigation"]) == ["navigation", "source"]
    assert normalise_kinds(list(reversed(ALL))) == ALL
    n = neighbourhood(EXAMPLE, "a", "both", ["relation"], 20, DOC)
    assert [e.kind for e in n.edges] == ["relation"] and n.sources == []


def test_sources_sorted_and_capped():
    many = [SourceEntry(f"s{i:03d}", "r", "") for i in range(101)]
    with pytest.raises(ToolError) as err:
        select_sources(many, "out", ALL)
    assert err.value.code == "resource_limit"
    got = select_sources([SourceEntry("b", "x", ""), SourceEntry("a", "z", ""), SourceEntry("a", "y", "t")], "both", ALL)
    assert [(s.id, s.resource) for s in got] == [("a", "y"), ("a", "z"), ("b", "x")]


def test_candidate_cap_rejects_huge_neighbourhoods():
    index = EdgeIndex.of([nav("hub", f"n{i}") for i in range(100_001)])
    with pytest.raises(ToolError) as err:
        neighbourhood(index, "hub", "out", ALL, 20, [])
    assert err.value.code == "resource_limit"


NAMES = st.sampled_from(["a", "b", "c", "a#x", "b/c"])


@given(
    st.lists(st.tuples(st.sampled_from(["navigation", "relation"]), NAMES, NAMES, st.sampled_from([None, "uses", "dep"])), max_size=30),
    st.sampled_from(["in", "out", "both"]),
    st.integers(1, 100),
)
def test_edges_sorted_bounded_and_touching_the_concept(raw, direction, limit):
    edges = [Edge(k, s, t, None if k == "navigation" else (r or "uses"), s, t) for k, s, t, r in raw]
    n = neighbourhood(EdgeIndex.of(edges), "a", direction, ALL, limit, [])
    assert len(n.edges) <= limit and n.total >= len(n.edges)
    assert n.truncated == (n.total > len(n.edges))
    keys = [e.sort_key() for e in n.edges]
    assert keys == sorted(keys)
    for e in n.edges:
        if direction == "out":
            assert e.source_id == "a"
        elif direction == "in":
            assert e.target_id == "a"
        else:
            assert "a" in (e.source_id, e.target_id)


_ids = st.sampled_from(["a", "b", "c"])


@given(st.lists(st.tuples(st.booleans(), _ids, _ids), max_size=12), _ids,
       st.sampled_from(["out", "in", "both"]), st.lists(st.sampled_from(ALL), min_size=1, max_size=3))
def test_navigation_edges_kept_as_ids_select_like_their_records(edges, concept, direction, kinds):
    from knowspec.impl.okf.graph.neighbors import select_edges

    records = [nav(a, b) if is_nav else rel(a, b, "uses") for is_nav, a, b in edges]
    compact = EdgeIndex()
    for is_nav, a, b in edges:
        compact.outgoing[a].append(b if is_nav else rel(a, b, "uses"))
        compact.incoming[b].append(a if is_nav else rel(a, b, "uses"))
    assert select_edges(compact, concept, direction, kinds) == select_edges(EdgeIndex.of(records), concept, direction, kinds)
