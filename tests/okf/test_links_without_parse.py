"""Links read without the Markdown parse are the parsed body's links, or not given at all."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from knowspec.impl.okf.parsing.markdown import analyse_body, links_without_parse

# Lines that make masked spans (code, HTML), near-misses of them, and links in every guise.
LINES = [
    "[a](x.md)", "see [b](/c/d.md) and [e](f.md#g)", "- [item](i.md)", "1. [n](n.md)", "> [q](q.md)",
    "text with `code` here", "`[c](code.md)`", "a `b", "c` [l](l.md)", "```", "~~~", "```python",
    "    [indented](ind.md)", "\t[tab](tab.md)", "-     [listcode](lc.md)", ">     [qcode](qc.md)",
    "<div>", "</div>", "<b>[h](h.md)</b>", "<!-- [c](c.md) -->", "a < b [x](y.md)", "",  "   ", " \t ",
    "[t](t.md \"title\")", "[esc\\]](e.md)", "[nested [x]](n.md)", "plain words", "## [head](h.md)",
    "[ref]: r.md", "[^1]", "[^1]: note [n](fn.md)", "a\r", "[cr](cr.md)\r", "  [two](two.md)",
    "``double `tick` [in](in.md)``", "  - [sub](sub.md)", "***", "tick` end", "open `tick",
]


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(LINES), max_size=14), st.integers(1, 9))
def test_links_without_parse_equal_the_parsed_links(lines, first_line):
    body = "\n".join(lines)
    quick = links_without_parse(body, first_line)
    if quick is not None:
        assert quick == analyse_body(body, first_line).links


def test_a_body_of_plain_links_needs_no_parse():
    body = "# Title\n\nSome `x`.\n\nSee [a](a.md).\n\n- [b](b.md \"B\")\n- [c](../c.md#part)\n"
    assert links_without_parse(body, 3) == analyse_body(body, 3).links
    assert [link.target for link in links_without_parse(body, 3)] == ["a.md", "b.md", "../c.md#part"]


def test_a_link_line_that_may_touch_code_or_html_needs_the_parse():
    for body in ("<div>\n[a](a.md)\n</div>\n", "    [a](a.md)\n",
                 "a `b\n[c](c.md)` d\n", "- x\n\n      [a](a.md)\n", "a `b\n[c](c.md)\nd` e\n"):
        assert links_without_parse(body) is None, body


def test_a_code_span_past_a_blank_line_leaves_the_link_line_clear():
    body = "`code` here\n\n[a](a.md)\n\nmore `code`\n"
    assert links_without_parse(body) == analyse_body(body).links != []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(LINES + ["[up](../up.md)", "[abs](/x/y.md#f)", "[ext](https://e.x)"]), max_size=10))
def test_link_target_ids_are_the_links_target_ids_parsed_or_not(lines):
    from knowspec.impl.okf.model import Concept

    raw = ("---\ntitle: T\n---\n" + "\n".join(lines)).encode()
    parsed = Concept("a/b", "a/b.md", raw)
    parsed.markdown  # noqa: B018 - the parse first: links come from it
    expected = [link.target_id for link in parsed.links]
    assert Concept("a/b", "a/b.md", raw).link_target_ids() == expected
    assert parsed.link_target_ids() == expected
    assert [link.target_id for link in Concept("a/b", "a/b.md", raw).links] == expected


def test_link_resolution_memo_stays_bounded_and_answers_like_no_memo():
    """The (source folder, target) memo keeps at most ``CLASSIFIED_MEMO_ENTRIES``: a bundle with
    more distinct links than that evicts, and evicted links resolve as before."""
    from knowspec.impl.okf.parsing import links

    targets = [f"../t{i % 7}/c{i}.md#f{i % 3}" for i in range(links.CLASSIFIED_MEMO_ENTRIES + 500)]
    first = links.resolve_target_ids("a/b/src", targets)
    assert links._classified.cache_info().currsize <= links.CLASSIFIED_MEMO_ENTRIES
    fresh = [links._classified.__wrapped__("a/b", target)[1] for target in targets]
    assert first == fresh == links.resolve_target_ids("a/b/src", targets)
    assert first[0] == "a/t0/c0"
