"""search_concepts matching and ordering over plain folded records."""

from hypothesis import given, strategies as st

from knowspec.impl.errors import ToolError
from knowspec.impl.okf.search.concepts import (
    FIELD_RANKS,
    SearchableConcept,
    best_match,
    normalise_query,
    search,
)
from knowspec.impl.rules.text import case_fold

import pytest


def rec(cid, title="", description="", tags=(), body=""):
    return (cid, SearchableConcept.of(cid, title, description, tags, body))


def test_nfc_and_nfd_spellings_match_each_other():
    index = [rec("cafe", title="Café"), rec("second", body="x CAFE\u0301 y"), rec("third", title="café")]
    result = search(index, normalise_query("cafe\u0301"), 2)
    assert result.total == 3
    assert result.truncated is True
    assert result.hits == [("cafe", "title"), ("third", "title")]


def test_priority_then_id_order():
    index = [
        rec("body", body="a needle here"),
        rec("tag", tags=["needles"]),
        rec("description", description="Needle"),
        rec("title-b", title="NEEDLE"),
        rec("title-a", title="needle"),
        rec("needle"),
        rec("none", title="haystack"),
    ]
    result = search(index, normalise_query("needle"), 20)
    assert [h for h in result.hits] == [
        ("needle", "id"),
        ("title-a", "title"),
        ("title-b", "title"),
        ("description", "description"),
        ("tag", "tags"),
        ("body", "body"),
    ]
    assert result.total == 6 and result.truncated is False


def test_query_cannot_span_two_tags():
    concept = SearchableConcept.of("x", "", "", ["foo", "bar"], "")
    assert best_match(case_fold("foo\nbar"), concept) is None
    assert best_match(case_fold("FOO"), concept) == "tags"


def test_type_is_not_searched():
    assert search([rec("a")], normalise_query("Policy"), 5).total == 0


def test_blank_query_is_schema_validation():
    with pytest.raises(ToolError) as err:
        normalise_query(" \t\n")
    assert err.value.code == "schema_validation"
    assert err.value.message == "query must contain non-whitespace text"


FIELD_TEXT = st.text(alphabet="abAB\u0301éß ", max_size=6)


@given(
    st.lists(
        st.tuples(st.text(alphabet="abcé", min_size=1, max_size=4), FIELD_TEXT, FIELD_TEXT, st.lists(FIELD_TEXT, max_size=2), FIELD_TEXT),
        max_size=12,
        unique_by=lambda t: t[0],
    ),
    st.text(alphabet="abAé\u0301ß", min_size=1, max_size=3),
    st.integers(1, 100),
)
def test_hits_obey_the_contract_order_and_bounds(rows, query, limit):
    index = [rec(cid, t, d, tags, b) for cid, t, d, tags, b in rows]
    result = search(index, normalise_query(query), limit)
    assert len(result.hits) <= limit
    assert result.total >= len(result.hits)
    assert result.truncated == (result.total > len(result.hits))
    keys = [(-FIELD_RANKS[m], cid.encode()) for cid, m in result.hits]
    assert keys == sorted(keys)
    # every reported field really contains the folded query, and no better field does
    q = case_fold(query)
    by_id = dict(index)
    for cid, match in result.hits:
        assert best_match(q, by_id[cid]) == match
    assert search(index, normalise_query(query), limit) == result


from knowspec.impl.okf.search.concepts_index import ConceptSearchIndex  # noqa: E402

ANY_TEXT = st.text(alphabet="ab\x00é\u0301ßs€😀 ", max_size=12)


@given(
    st.lists(st.tuples(st.text(alphabet="abé", min_size=1, max_size=3), ANY_TEXT, ANY_TEXT,
                       st.lists(ANY_TEXT, max_size=3), st.text(alphabet="ab\x00é\u0301ßs€😀 ", max_size=60)),
             max_size=10, unique_by=lambda t: t[0]),
    st.text(alphabet="ab\x00éß€😀 ", min_size=1, max_size=4),
    st.integers(1, 100),
)
def test_fast_index_answers_exactly_like_the_reference_scan(rows, query, limit):
    entries = [rec(cid, t, d, tags, b) for cid, t, d, tags, b in rows]
    folded = case_fold(query)
    assert ConceptSearchIndex(entries).search(folded, limit) == search(entries, folded, limit)


def test_fast_index_finds_body_matches_past_trigram_filter():
    body = "x" * 5000 + " unity catalog " + "y" * 5000
    entries = [rec("a", body=body), rec("b", body="unity only"), rec("c", title="Catalog")]
    result = ConceptSearchIndex(entries).search(case_fold("Unity Catalog"), 20)
    assert result.hits == [("a", "body")]
