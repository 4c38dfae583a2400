"""search_sections rules: query terms, section cutting, BM25 scoring, snippets, locators."""

import math
from array import array
from collections import Counter

import pytest
from hypothesis import given, strategies as st

from knowspec.impl.errors import ToolError
from knowspec.impl.okf.search.sections import (
    MAX_INDEXED_TOKENS,
    SectionDoc,
    _narrowest,
    build_index,
    locator,
    parse_query,
    score_sections,
    search_result,
    section_text,
    snippet,
    split_sections,
)
from knowspec.impl.rules.bm25 import TermStat, bm25
from knowspec.impl.rules.text import words

BODIES: dict[str, tuple[str, int]] = {}  # what each doc() was cut from, for the hits' snippets


def doc(cid, body, headings=(), title="", start=1):
    BODIES[cid] = (body, start)
    return SectionDoc(cid, cid + ".md", title, "0" * 64, split_sections(body, start, headings))


def result_of(index, query, limit=5):
    return search_result(index, query, parse_query(query), limit, "f" * 64, BODIES.__getitem__)


def test_query_terms_fold_split_and_dedupe():
    assert parse_query("Jitter, DEADLINE jitter") == ["jitter", "deadline"]


def test_sharp_s_and_ffi_ligature_expand_when_folded():
    assert parse_query("Straße ﬃ") == ["strasse", "ffi"]
    index = build_index([doc("a", "office STRASSE"), doc("b", "strasse only")])
    hits = score_sections(index, parse_query("Straße ofﬁce"))
    assert [index.concept_id(h.position) for h in hits] == ["a"]


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
    result = result_of(index, "jitter deadline")
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
    assert [index.concept_id(h.position) for h in hits] == ["a", "b"]


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
    result = result_of(index, " ".join(query_words), limit)
    hits = result["hits"]
    assert len(hits) <= limit and result["total"] >= len(hits)
    assert result["truncated"] == (result["total"] > len(hits))
    keys = [(-h["score"], h["concept_id"].encode(), h["line_start"]) for h in hits]
    assert keys == sorted(keys)
    for h in hits:
        assert h["score"] >= 0
        words_in = set(parse_query(h["snippet"]))
        assert set(terms) <= words_in
    assert result_of(index, " ".join(query_words), limit) == result


def test_a_hit_cuts_its_section_from_the_body_as_split_sections_did():
    body = "intro\r\n\r\n# A\r\ntext a\r\n## B\r\nlast\r\n"
    for section in split_sections(body, 7, [(9, "A"), (11, "B")]):
        assert section_text(body.split("\n"), 7, section.line_start, section.line_end) == section.text


def reference_hits(docs, terms):
    """The contract's rule written out directly: every section holding every term, weighted tf
    and length (body x1, heading x3, title x2), BM25, then score desc, concept ID, first line."""
    sections = [(d, s) for d in docs for s in d.sections]
    counts = []
    for d, s in sections:
        body, heading, title = Counter(words(s.text)), Counter(words(s.heading)), Counter(words(d.title))
        tf = {t: body[t] + 3 * heading[t] + 2 * title[t] for t in body.keys() | heading.keys() | title.keys()}
        counts.append((tf, sum(body.values()) + 3 * sum(heading.values()) + 2 * sum(title.values())))
    avg = sum(n for _, n in counts) / len(counts) if counts and sum(n for _, n in counts) else 1.0
    df = {t: sum(t in tf for tf, _ in counts) for t in terms}
    hits = []
    for (d, s), (tf, n) in zip(sections, counts):
        if all(t in tf for t in terms):
            score = bm25([TermStat(tf[t], df[t]) for t in terms], n, avg, len(sections))
            hits.append((-score, d.concept_id.encode(), s.line_start, s.line_end, s.heading, s.text))
    return sorted(hits)


SECTION_WORDS = st.sampled_from(["alpha", "beta", "Gamma", "straße", "delta", "x1"])
LINES = st.lists(st.one_of(st.lists(SECTION_WORDS, max_size=5).map(" ".join),
                           st.tuples(st.integers(1, 3), SECTION_WORDS).map(lambda h: "#" * h[0] + " " + h[1])),
                 max_size=8)


@given(st.lists(st.tuples(LINES, st.lists(SECTION_WORDS, max_size=2)), min_size=1, max_size=6),
       st.lists(SECTION_WORDS, min_size=1, max_size=3), st.integers(0, 12), st.booleans())
def test_the_page_is_the_first_limit_of_the_rule_applied_to_every_section(files, query_words, limit, crlf):
    """The compact index (postings columns, the page picked by score, text cut again per hit)
    answers as the rule applied to every section in full does."""
    docs = []
    for i, (lines, title_words) in enumerate(files):
        body = ("\r\n" if crlf else "\n").join(lines)
        headings = [(n + 3, line.lstrip("#").strip()) for n, line in enumerate(lines) if line.startswith("#")]
        docs.append(doc(f"c{i:02d}", body, headings, " ".join(title_words), start=3))
    index = build_index(docs)
    terms = parse_query(" ".join(query_words))
    result = search_result(index, " ".join(query_words), terms, limit, "0" * 64, BODIES.__getitem__)
    want = reference_hits(docs, terms)
    assert result["total"] == len(want) and result["truncated"] == (len(want) > limit)
    got = [(-h["score"], h["concept_id"].encode(), h["line_start"], h["line_end"], h["heading"]) for h in result["hits"]]
    assert got == [w[:5] for w in want[:limit]]
    assert [h["snippet"] for h in result["hits"]] == [snippet(w[5], terms) for w in want[:limit]]


def test_the_index_holds_exactly_the_token_bound_and_fails_one_token_past_it():
    per_doc = 1000
    docs = [doc(f"c{i}", " ".join(["w"] * per_doc)) for i in range(MAX_INDEXED_TOKENS // per_doc)]
    assert len(build_index(docs)) == len(docs)
    with pytest.raises(ToolError) as err:
        build_index(docs + [doc("over", "w")])
    assert (err.value.code, err.value.message) == ("resource_limit", "section search exceeds bounds")


def test_a_term_frequency_past_two_bytes_is_kept_whole():
    docs = [doc("big", "w " * 70_000 + "v"), doc("small", "w v")]
    index = build_index(docs)
    assert index.tfs.typecode == "I"
    hits = result_of(index, "w v")["hits"]
    assert [(h["concept_id"], -h["score"]) for h in hits] == [(w[1].decode(), w[0]) for w in reference_hits(docs, ["w", "v"])]


def test_columns_take_two_bytes_an_item_when_every_value_fits():
    assert _narrowest(array("I", [0, 65_535])).typecode == "H"
    assert _narrowest(array("I", [65_536])) == array("I", [65_536])
    assert _narrowest(array("I")).typecode == "H"
