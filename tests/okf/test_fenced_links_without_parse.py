"""Fenced code outside containers and code spans on link lines no longer send a body to the
Markdown parse for its links.

The fast path (``links_without_parse``) may decline a body, never give other links than the
parse: every generated body mixing fences, containers, quotes, HTML, code spans and indented
code is checked against ``analyse_body``.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

from knowspec.impl.okf.parsing.markdown import (
    analyse_body,
    fences_blanked,
    link_targets_without_parse,
    links_without_parse,
)
from optional_data import DATABRICKS

FENCE_RUNS = ["```", "~~~", "````", "~~~~", "``", "~~"]
INDENTS = ["", " ", "  ", "   ", "    ", "\t"]
INFOS = ["", "python", " sh", "a`b", "~x", " ``` ", "  ", "\r"]
CONTAINERS = ["", "- ", "* ", "+ ", "1. ", "2) ", "> ", ">", "  - ", "- > ", "> - ", "10. "]
TEXT_LINES = [
    "[a](a.md)", "see [b](/c/d.md) and [e](f.md#g)", "`[c](code.md)`", "a `b", "c` [l](l.md)", "x ``` y",
    "text ~~~ [m](m.md)", "<div>", "</div>", "<b>[h](h.md)</b>", "a < b", "", "   ", "[t](t.md \"title\")",
    "## [head](h.md)", "plain", "***", "- - -", "    [ind](ind.md)", "\t[tab](tab.md)", "[cr](cr.md)\r",
    "a\rb [lone](lone.md)", "[in](fence.md) ```", "~~~ [after](after.md)", "- item", "> quote", "1. one",
    "  [two](two.md)", "tick` [q](q.md)",
    # code spans on link lines, and backticks that are not code spans
    "use `x` and [c](c.md)", "[`code`](lc.md) then `y`", "[a](`b`)", "[a](b `c`)", "[a](b \"`t`\")",
    "[x]: `[a](b.md)`", "[x]:", "`[a](in.md)`", "\\`[a](esc.md)`", "``a`` [b](b.md) `", "[a `b](c.md)` d",
    "`` x ` y `` [z](z.md)", "[p](p(q).md) `r`", "[n](\\n.md) `s`", "[m](\n.md) `s`", "`a` `b [c](c.md)",
    "[l](l.md `)` x", "[u](u.md)`", "```` [f](f.md) ````", "\\\\`[e](e.md)`", "[t](t.md 'x`') `y`",
    "`<catalog>.<schema>` [s](s.md)", "<div>`x`</div>", "`a` <b>[h](h.md)</b>", "  <div> `<p>`", "`<!--` [c](c.md)",
]


@st.composite
def fence_lines(draw) -> str:
    container = draw(st.sampled_from(CONTAINERS))
    indent = draw(st.sampled_from(INDENTS))
    run = draw(st.sampled_from(FENCE_RUNS))
    info = draw(st.sampled_from(INFOS))
    return container + indent + run + info


# Inline pieces that make mostly clear link lines with code spans, and the hazards among them.
INLINE = ["word", " ", "`x`", "``a`b``", "` `", "[t](t.md)", "[`c`](c.md)", "[a](b.md#f)", "![i](i.png)", "`",
          "``", "]", "[", "(", ")", "](", "[u](u.md \"T\")", "\\", "[r]", "]:", "*", "_", "<", "~~~", "```",
          "`<x>`", "<b>", "`<a href=\"`\">`", "<http://a.b/`c`>", "`<`", "`a<b` [l](<l.md>)", "<!-- `x` -->"]
INLINE_LINE = st.lists(st.sampled_from(INLINE), max_size=8).map("".join)

LINE = st.one_of(st.sampled_from(TEXT_LINES), fence_lines(),
                 st.builds(str.__add__, st.sampled_from(CONTAINERS), st.sampled_from(TEXT_LINES)))


@settings(max_examples=1500, deadline=None)
@given(st.lists(LINE, max_size=16), st.sampled_from(["\n", "\r\n"]), st.integers(1, 9))
def test_fenced_links_without_parse_equal_the_parsed_links(lines, newline, first_line):
    body = newline.join(lines)
    quick = links_without_parse(body, first_line)
    if quick is not None:
        assert quick == analyse_body(body, first_line).links


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.one_of(INLINE_LINE, INLINE_LINE, st.sampled_from(["", "```", "- [l](l.md) `k`", "> `q`"])),
                max_size=10))
def test_code_span_links_without_parse_equal_the_parsed_links(lines):
    body = "\n".join(lines)
    quick = links_without_parse(body)
    if quick is not None:
        assert quick == analyse_body(body).links


@settings(max_examples=800, deadline=None)
@given(st.lists(st.one_of(LINE, INLINE_LINE), max_size=12), st.sampled_from(["\n", "\r\n"]))
def test_link_targets_without_parse_are_the_targets_of_the_links_without_parse(lines, newline):
    body = newline.join(lines)
    links = links_without_parse(body)
    assert link_targets_without_parse(body) == (None if links is None else [link.target for link in links])


@settings(max_examples=300, deadline=None)
@given(st.lists(LINE, max_size=16))
def test_blanking_fences_keeps_every_line_break(lines):
    body = "\n".join(lines)
    text, limit = fences_blanked(body)
    assert len(text) == len(body) and 0 <= limit <= len(body)
    assert [i for i, ch in enumerate(text) if ch in "\r\n"] == [i for i, ch in enumerate(body) if ch in "\r\n"]


def test_a_body_whose_only_obstacle_is_a_fence_needs_no_parse():
    body = ("Intro [a](a.md).\n\n```python\nx = '[no](no.md)' < 3\n```\n\nSee [b](b.md)\n~~~\n"
            "`[c](c.md)`\n~~~\n[d](d.md)\n````\n```\n[e](e.md)\n````\n")
    quick = links_without_parse(body, 4)
    assert quick is not None
    assert quick == analyse_body(body, 4).links
    assert [link.target for link in quick] == ["a.md", "b.md", "d.md"]


def test_an_unclosed_fence_hides_every_later_link():
    body = "[a](a.md)\n\n```\n[b](b.md)\n"
    assert links_without_parse(body) == analyse_body(body).links
    assert [link.target for link in links_without_parse(body)] == ["a.md"]


def test_a_fence_that_may_be_in_a_container_needs_the_parse():
    for body in ("- item\n\n  ```\n  [a](a.md)\n  ```\n[b](b.md)\n", "- ```\n[a](a.md)\n```\n[b](b.md)\n",
                 "> ```\n> [a](a.md)\n[b](b.md)\n", "    ```\n[a](a.md)\n", "<div>\n```\n</div>\n[a](a.md)\n",
                 "```\r[a](a.md)\r```\n[b](b.md)\n"):
        assert links_without_parse(body) is None, body


def test_code_spans_on_link_lines_need_no_parse():
    body = "Set `spark.conf` as in [a](a.md), or `[not](a link)` and [`b`](b.md).\n\n``x`y`` [c](c.md)\n"
    quick = links_without_parse(body)
    assert quick is not None and quick == analyse_body(body).links
    assert [link.target for link in quick] == ["a.md", "b.md", "c.md"]


def test_a_less_than_sign_in_a_code_span_is_no_html():
    body = ("Name it `<catalog>.<schema>.<table>` as in [a](a.md).\n\nThen `x < y` and [b](b.md).\n"
            "`<x>`\n~~~ [fenced](f.md)\n")
    quick = links_without_parse(body)
    assert quick is not None and quick == analyse_body(body).links
    assert [link.target for link in quick] == ["a.md", "b.md"]


def test_backticks_that_may_not_be_code_spans_need_the_parse():
    for body in ("[a](`b`) `c`\n", "a `b\n[c](c.md) `d`\n", "[x]: `[a](b.md)`\n", "\\`[a](b.md)` `c`\n",
                 "[a](b \"`t`\")\n", "[l](l.md) ``x` y\n", "<b>`x`</b> [a](a.md)\n", "`a` `<b [c](c.md)\n",
                 "<div>\n~~~ [a](a.md)\n"):
        assert links_without_parse(body) is None, body


@pytest.mark.slow
@pytest.mark.corpus
def test_links_without_parse_equal_the_parsed_links_on_the_corpus_and_its_mutations():
    """Every databricks-okf body, and bodies made from them by moving, dropping, indenting and
    breaking lines (real fences, lists, HTML and code spans in new arrangements)."""
    bodies = []
    for path in sorted(DATABRICKS.rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        bodies.append(text[text.find("\n---", 4) + 4:] if text.startswith("---\n") else text)
    rnd = random.Random(18)
    inserts = ["```", "~~~", "", "- x", "> q", "<div>", "    code", "`", "[a](b.md)", "  ```"]
    marks = ["`", "``", "<", "\\", "](", "[", ")", "~~~"]
    variants = list(bodies)
    for _ in range(4000):
        lines = rnd.choice(bodies).split("\n")
        for _ in range(rnd.randint(1, 6)):
            i = rnd.randrange(len(lines))
            op = rnd.random()
            if op < 0.3 and len(lines) > 1:
                del lines[i]
            elif op < 0.5:
                j = rnd.randrange(len(lines))
                lines[i], lines[j] = lines[j], lines[i]
            elif op < 0.7:
                lines.insert(i, rnd.choice(inserts))
            elif op < 0.85:
                lines[i] = rnd.choice(["", "  ", "- ", "> ", "1. ", "    "]) + lines[i]
            else:
                k = rnd.randint(0, len(lines[i]))
                lines[i] = lines[i][:k] + rnd.choice(marks) + lines[i][k:]
        variants.append("\n".join(lines))
    quick_ones = 0
    for body in variants:
        quick = links_without_parse(body)
        if quick is not None:
            quick_ones += 1
            assert quick == analyse_body(body).links, body[:200]
    assert quick_ones > len(variants) // 2  # the fast path is taken, not declined everywhere
