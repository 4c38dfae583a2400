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
    fresh = [links.classify_target("a/b", target)[1] for target in targets]
    assert first == fresh == links.resolve_target_ids("a/b/src", targets)
    assert first[0] == "a/t0/c0"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a/b/src", "a/src", "src", "x/y/z/src"]),
                          st.lists(st.sampled_from(["../up.md", "/x/y.md#f", "c.md", " d.md ", "https://e.x",
                                                    "../../t/c.md", "#frag", "./e.md"]), max_size=6)),
                max_size=12),
       st.integers(1, 8))
def test_a_build_s_own_memo_answers_like_the_shared_one_and_stays_bounded(calls, bound):
    from knowspec.impl.okf.parsing import links

    memo: links.TargetMemo = {}
    saved, links.BUILD_MEMO_ENTRIES = links.BUILD_MEMO_ENTRIES, bound
    try:
        for source, targets in calls:
            assert links.resolve_target_ids(source, targets, memo) == links.resolve_target_ids(source, targets)
            assert len(memo) <= bound
    finally:
        links.BUILD_MEMO_ENTRIES = saved


def test_whole_bundle_builds_leave_the_shared_memo_alone(tmp_path):
    """The edge index and the graph renders resolve through a memo of their own, dropped with
    the build (entries made among a build's transient objects kept its arenas resident)."""
    from knowspec.impl.okf.graph.neighbors import edge_index_for
    from knowspec.impl.okf.graph.targets import shared_targets
    from knowspec.impl.okf.model import load_snapshot
    from knowspec.impl.okf.parsing import links
    from okf_helpers import ctx, write_bundle

    kb = write_bundle(tmp_path / "kb", {f"d{i}/c{i}.md": f"---\ntitle: C{i}\n---\n[n](../d{i + 1}/c{i + 1}.md) [z](/zz{i}.md)\n"
                                        for i in range(20)})
    snapshot = load_snapshot(str(kb), ctx())
    links._classified.cache_clear()
    index = edge_index_for(snapshot)
    targets = shared_targets(snapshot)
    assert [targets(f"d{i}/c{i}") for i in range(3)] == [[(f"d{i + 1}/c{i + 1}", True), (f"zz{i}", False)]
                                                        for i in range(3)]
    assert links._classified.cache_info().currsize == 0
    assert index.outgoing["d0/c0"] == ["d1/c1"]
    assert snapshot.navigation_targets("d0/c0") == [("d1/c1", True), ("zz0", False)]  # one concept: the shared memo
    assert links._classified.cache_info().currsize == 2
