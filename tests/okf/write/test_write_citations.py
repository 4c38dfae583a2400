"""The pure ``# Citations`` conversion: entry grammar, mapping resolution, byte-exact rewrite."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from knowspec.impl.okf.parsing.markdown import analyse_body
from knowspec.impl.okf.write.citations import CitationBlocked, convert, find_section


def test_entry_forms_are_parsed_with_their_projection():
    body = ("a.[1]\n\n# Citations\n\n[1] [One](https://one.test)\n- [2] <https://two.test>\n"
            "* https://three.test\n[4] [Four](https://four.test \"Tip\")\n")
    section = find_section(body)
    got = [(e.number, e.title, e.resource, e.link_title, e.raw) for e in section.entries]
    assert got == [(1, "One", "https://one.test", "", "[1] [One](https://one.test)"),
                   (2, "", "https://two.test", "", "- [2] <https://two.test>"),
                   (0, "", "https://three.test", "", "* https://three.test"),
                   (4, "Four", "https://four.test", "Tip", '[4] [Four](https://four.test "Tip")')]
    data = body.encode()
    assert all(data[e.start:e.end].decode().strip() == e.raw for e in section.entries)


def test_ordered_list_numbers_are_presentation_not_citation_numbers():
    body = "x ^[a.md]\n\n# Citations\n\n1. [a.md](/references/a.md)\n"
    (entry,) = find_section(body).entries
    assert (entry.number, entry.raw, entry.resource) == (0, "1. [a.md](/references/a.md)", "/references/a.md")
    with pytest.raises(CitationBlocked) as err:
        convert(body, [{"source_id": "a", "legacy_number": 1}])
    assert err.value.code == "unmatched_citation_mapping"
    out = convert(body, [{"source_id": "a", "legacy_entry": "1. [a.md](/references/a.md)"}])
    assert out.body == "x ^[a.md]\n\n[^a]: [a.md](/references/a.md)\n"


def test_body_without_a_section_is_untouched_unless_mapped():
    assert convert("plain text [1]\n", []) is None
    with pytest.raises(CitationBlocked) as err:
        convert("plain text\n", [{"source_id": "a", "legacy_number": 1}])
    assert err.value.code == "missing_citations_section"


def test_unnumbered_entry_is_selected_by_its_exact_text():
    body = "x\n\n# Citations\n\n- [Doc](https://doc.test)\n"
    out = convert(body, [{"source_id": "doc", "legacy_entry": "- [Doc](https://doc.test)"}])
    assert out.body == "x\n\n[^doc]: [Doc](https://doc.test)\n"
    assert out.sources == ({"id": "doc", "resource": "https://doc.test", "title": "Doc"},)


def test_section_followed_by_another_h1_keeps_a_blank_line():
    body = "x.[1]\n\n# Citations\n\n[1] https://a.test\n\n# Appendix\n\ntext\n"
    out = convert(body, [{"source_id": "a", "legacy_number": 1}])
    assert out.body == "x.[^a]\n\n[^a]: https://a.test\n\n# Appendix\n\ntext\n"


def test_crlf_bodies_stay_crlf():
    body = "x.[1]\r\n\r\n# Citations\r\n\r\n[1] [A](https://a.test)\r\n"
    out = convert(body, [{"source_id": "a", "legacy_number": 1}])
    assert out.body == "x.[^a]\r\n\r\n[^a]: [A](https://a.test)\r\n"


@pytest.mark.parametrize("body, mappings, code", [
    ("x\n\n# Citations\n\n[1] [A](https://a.test)\n\n# Citations\n\n[2] https://b.test\n",
     [{"source_id": "a", "legacy_number": 1}], "multiple_citations_sections"),
    ("x\n\n# Citations\n\n```\n[1] https://a.test\n```\n", [], "opaque_citations_content"),
    ("x\n\n# Citations\n\n[1] [A](https://a.test)\n\n## More\n", [{"source_id": "a", "legacy_number": 1}],
     "unowned_citations_content"),
    ("x\n\n# Citations\n\n[1] [A](https://a.test)\n", [], "unresolved_citation_entry"),
    ("x\n\n# Citations\n\n[1] [A](https://a.test)\n",
     [{"source_id": "a", "legacy_number": 1}, {"source_id": "b", "legacy_entry": "[1] [A](https://a.test)"}],
     "ambiguous_citation_destination"),
    ("x\n\n# Citations\n\n- https://a.test\n- https://a.test\n",
     [{"source_id": "a", "legacy_entry": "- https://a.test"}], "ambiguous_citation_mapping"),
    ("x\n\n# Citations\n\n[1] [A](https://a.test)\n", [{"source_id": "a", "legacy_number": 2}],
     "unmatched_citation_mapping"),
    ("x\n\n# Citations\n\n[1] [A](https://a.test)\n", [{"source_id": "a b]", "legacy_number": 1}], "invalid_source_id"),
    ("x.[^a]\n\n[^a]: other\n\n# Citations\n\n[1] [A](https://a.test)\n", [{"source_id": "a", "legacy_number": 1}],
     "conflicting_footnote_definition"),
    ("x.[^A]\n\n# Citations\n\n[1] [A](https://a.test)\n", [{"source_id": "a", "legacy_number": 1}],
     "normalized_footnote_label_collision"),
    ("x\n\n# Citations\n\n[1] [A](https://a.test)\n[2] [B](https://b.test)\n",
     [{"source_id": "s", "legacy_number": 1}, {"source_id": "s", "legacy_number": 2}], "reused_source_metadata_conflict"),
])
def test_unconvertible_input_is_blocked_with_a_span(body, mappings, code):
    with pytest.raises(CitationBlocked) as err:
        convert(body, mappings)
    assert err.value.code == code
    assert 0 <= err.value.start <= err.value.end <= len(body.encode())


_ENTRY = st.tuples(st.text("abcdefgh XY", min_size=0, max_size=8).map(str.strip),
                   st.from_regex(r"https://[a-z]{1,8}\.test/[a-z0-9]{0,6}", fullmatch=True))


@settings(max_examples=60, deadline=None)
@given(st.lists(_ENTRY, min_size=1, max_size=6), st.lists(st.integers(0, 5), max_size=12), st.booleans())
def test_every_marker_becomes_one_keyed_footnote(entries, uses, crlf):
    nl = "\r\n" if crlf else "\n"
    numbers = [u % len(entries) + 1 for u in uses]
    prose = " ".join(f"claim {i}.[{n}]" for i, n in enumerate(numbers)) or "no claims"
    lines = [f"[{i}] [{t}]({r})" if t else f"[{i}] {r}" for i, (t, r) in enumerate(entries, 1)]
    body = prose + nl + nl + "# Citations" + nl + nl + nl.join(lines) + nl
    mappings = [{"source_id": f"s{i}", "legacy_number": i} for i in range(1, len(entries) + 1)]
    out = convert(body, mappings)
    analysis = analyse_body(out.body)
    assert [r.label for r in analysis.footnote_refs] == [f"s{n}" for n in numbers]
    assert sorted(d.label for d in analysis.footnote_defs) == sorted(m["source_id"] for m in mappings)
    assert [(s["id"], s.get("title", ""), s["resource"]) for s in out.sources] == [
        (f"s{i}", t, r) for i, (t, r) in enumerate(entries, 1)]
    assert "Citations" not in out.body and (nl == "\n" or "\n" not in out.body.replace("\r\n", ""))


# -- lines that once made the entry and link patterns quadratic -----------------------------------

def test_an_entry_line_of_many_blanks_is_read_at_once():
    from time_guard import within

    hostile = "a.[1]\n\n# Citations\n\n1. a" + " " * 200_000 + "b\n"
    with within(5), pytest.raises(CitationBlocked):  # not an entry: the section is refused, quickly
        find_section(hostile)
    section = find_section("a.[2]\n\n# Citations\n\n[2] [Two](https://two.test)  \t\n")
    assert [(e.number, e.resource, e.raw) for e in section.entries] == [(2, "https://two.test", "[2] [Two](https://two.test)")]


def test_a_line_of_brackets_is_checked_for_inline_links_at_once():
    from time_guard import within

    from knowspec.impl.okf.validation import strict

    with within(5):
        assert strict._INLINE_LINK.search("[1] " + "[" * 200_000) is None
        assert strict._INLINE_LINK.search("[a [b](x.md) c](y.md)").group(1) == "x.md"
        assert strict._INDEX_ENTRY.match("- [a](b.md) - x" + " " * 200_000 + "y") is not None
        assert strict._INDEX_ENTRY.match("- [a](b.md) -" + " " * 200_000).group(2).strip() == ""
    assert strict._INDEX_ENTRY.match("- [A](a.md) - the description  ").group(2).strip() == "the description"
