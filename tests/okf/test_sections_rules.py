"""search_sections rules: query terms, section cutting, BM25 scoring, snippets, locators."""

import math

import pytest
from hypothesis import given, strategies as st

from knowspec.impl.errors import ToolError
from knowspec.impl.okf.search.sections import (
    SectionDoc,
    build_index,
    locator,
    parse_query,
    score_sections,
    search_result,
    snippet,
    split_sections,
)


def doc(cid, body, headings=(), title="", start=1):
    return SectionDoc(cid, cid + ".md", title, "0" * 64, split_sections(body, start, headings))


def test_query_terms_fold_split_and_dedupe():
    assert parse_query("Jitter, DEADLINE jitter") == ["jitter", "deadline"]


def test_sharp_s_and_ffi_ligature_expand_when_folded():
    assert parse_query("Straße ﬃ") == ["strasse", "ffi"]
    index = build_index([doc("a", "office STRASSE"), doc("b", "strasse only")])
    hits = score_sections(index, parse_query("Straße ofﬁce"))
    assert [index.sections[h.position].concept_id for h in hits] == ["a"]


def test_query_without_letters_or_numbers_is_rejected():
    with pytest.raises(ToolError) as err:
        parse_query("-- !!")
    assert err.value.code == "schema_validation"
    assert err.value.message == "query must contain Unicode letters or numbers"


def test_too_many_terms_is_resource_limit():
    parse_query(" ".join(f"t{i}" for i in range(32)))
    with pytest.raises(ToolError) as err:
        parse_query(" ".join(f"t{i}" for i in range(33)))
    assert (err.value.code, err.value.message) == ("resource_limit", "query exceeds term bounds")


def test_contract_example_lines_four_to_five():
    # file: ---\ntype: Note\n---\n# Retry\nDeadline permits jitter.\n  (body starts on line 4)
    sections = split_sections("# Retry\nDeadline permits jitter.", 4, [(4, "Retry")])
    assert [(s.heading, s.line_start, s.line_end, s.text) for s in sections] == [
        ("Retry", 4, 5, "# Retry\nDeadline permits jitter.")
    ]


def test_preamble_and_heading_sections_blank_ones_dropped():
    body = "intro\n\n# A\ntext a\n\n## B\n\n# C\nlast"
    sections = split_sections(body, 10, [(12, "A"), (15, "B"), (17, "C")])
    assert [(s.heading, s.line_start, s.line_end) for s in sections] == [
        ("", 10, 11),
        ("A", 12, 14),
        ("B", 15, 16),
        ("C", 17, 18),
    ]
    assert sections[0].text == "intro\n"
    blank = split_sections("\n\n# A\nx", 1, [(3, "A")])
    assert [s.heading for s in blank] == ["A"]


def test_crlf_section_excludes_the_trailing_crlf():
    sections = split_sections("# A\r\nx\r\n# B\r\ny", 1, [(1, "A"), (3, "B")])
    assert [s.text for s in sections] == ["# A\r\nx", "# B\r\ny"]


def test_and_of_terms_and_bm25_value():
    index = build_index([doc("a", "# Retry\nDeadline permits jitter.", [(1, "Retry")]), doc("b", "jitter alone")])
    result = search_result(index, "jitter deadline", parse_query("jitter deadline"), 5, "f" * 64)
    assert result["total"] == 1 and result["truncated"] is False
    hit = result["hits"][0]
    assert (hit["concept_id"], hit["line_start"], hit["line_end"]) == ("a", 1, 2)
    assert hit["locator"] == "a.md#L1-L2"
    assert hit["matched_terms"] == ["jitter", "deadline"]
    # by hand: N=2; jitter df=2, deadline df=1; lengths a: 4 body + 1 heading*3 = 7, b: 2; avg 4.5
    def part(tf, df, ln):
        return math.log(1 + (2 - df + 0.5) / (df + 0.5)) * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * ln / 4.5))
    assert math.isclose(hit["score"], part(1, 2, 7) + part(1, 1, 7))


def test_heading_and_title_weights_raise_the_score():
    index = build_index([
        doc("a", "# cache\nbody words here", [(1, "cache")]),
        doc("b", "# other\nbody cache here", [(1, "other")]),
    ])
    hits = score_sections(index, ["cache"])
    assert [index.sections[h.position].concept_id for h in hits] == ["a", "b"]


def test_snippet_starts_80_runes_before_first_term_and_keeps_512():
    text = "x" * 200 + " Straße " + "y" * 1000
    snip = snippet(text, ["strasse"])
    assert snip.startswith("x" * 79 + " Straße")
    assert len(snip) == 512
    assert snippet("short text", ["absent"]) == "short text"


def test_locator_escapes_like_go_escaped_path():
    assert locator("notes/my file.md", 4, 9) == "notes/my%20file.md#L4-L9"
    assert locator("тест.md", 1, 1) == "%D1%82%D0%B5%D1%81%D1%82.md#L1-L1"


WORDS = st.sampled_from(["alpha", "beta", "gamma", "Delta", "straße"])


@given(
    st.lists(st.lists(WORDS, min_size=1, max_size=8), min_size=1, max_size=8),
    st.lists(WORDS, min_size=1, max_size=3),
    st.integers(1, 100),
)
def test_results_sorted_bounded_and_all_terms_matched(bodies, query_words, limit):
    index = build_index([doc(f"c{i}", " ".join(b)) for i, b in enumerate(bodies)])
    terms = parse_query(" ".join(query_words))
    result = search_result(index, " ".join(query_words), terms, limit, "0" * 64)
    hits = result["hits"]
    assert len(hits) <= limit and result["total"] >= len(hits)
    assert result["truncated"] == (result["total"] > len(hits))
    keys = [(-h["score"], h["concept_id"].encode(), h["line_start"]) for h in hits]
    assert keys == sorted(keys)
    for h in hits:
        assert h["score"] >= 0
        words_in = set(parse_query(h["snippet"]))
        assert set(terms) <= words_in
    assert search_result(index, " ".join(query_words), terms, limit, "0" * 64) == result
