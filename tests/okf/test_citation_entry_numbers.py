"""``projection.citation_entry_numbers``: the legacy ``# Citations`` entries, found by jumping to
the lines that can open or close a fence or be an H1, give what a scan of every line gives."""

from __future__ import annotations

import re

from hypothesis import given, settings, strategies as st

from knowspec.impl.okf.concept.projection import citation_entry_numbers

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_H1 = re.compile(r"^ {0,3}#(?:[ \t]|$)")
_HEADING = re.compile(r"(?m)^ {0,3}#[ \t]+Citations[ \t#]*\r?$")
_ENTRY = re.compile(r"^\s{0,3}(?:[-*+]\s+)?\[(\d+)\]\s*\S")


def every_line_scan(body: str) -> list[int]:
    """The rule, one line after another: fences by their opening run, the section from the first
    ``# Citations`` H1 outside code to the next H1 outside code."""
    numbers: list[int] = []
    fence: str | None = None
    in_section = False
    for line in body.split("\n"):
        line = line.rstrip("\r")
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
            continue
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and line.strip() == m.group(1):
                fence = None
            continue
        if _H1.match(line):
            if in_section:
                break
            in_section = _HEADING.match(line) is not None
            continue
        if in_section:
            entry = _ENTRY.match(line)
            if entry:
                numbers.append(int(entry.group(1)))
    return numbers


LINES = st.sampled_from([
    "# Citations", "  # Citations ##", "#\tCitations", "    # Citations", "# Citations\r", "# Other", "#", "#x",
    "```", "````", "```sql", "~~~", "~~~~", "   ```", "    ```", "``` x", "~~~ ", "```\r",
    "[1] [A](https://a.test)", "- [2] b", "* [3]x", "   [4] y", "[5]", "[6] ", "text", "", " ", "\r",
    "## Sub", "# Citations and more", "`code` [7] z",
])


@settings(max_examples=600)
@given(st.lists(LINES, max_size=30), st.sampled_from(["\n", "\r\n"]), st.booleans())
def test_entries_are_what_a_scan_of_every_line_finds(lines, newline, trailing):
    body = newline.join(lines) + (newline if trailing else "")
    assert citation_entry_numbers(body) == every_line_scan(body)


def test_a_citations_heading_inside_a_fence_opens_no_section():
    assert citation_entry_numbers("x\n```\n# Citations\n[1] a\n```\n") == []
    assert citation_entry_numbers("x\n  ~~~\n# Citations\n[1] a\n") == []


def test_the_section_skips_fenced_entries_and_ends_at_the_next_h1():
    body = "x\n\n# Citations\n\n[1] a\n~~~\n[2] b\n# not a heading here\n~~~\n- [3] c\n# Appendix\n[4] d\n"
    assert citation_entry_numbers(body) == [1, 3]


def test_a_fence_closes_only_on_a_run_as_long_of_the_same_character():
    body = "````\n# Citations\n```\n[1] a\n~~~~\n````\n# Citations\n[2] b\n"
    assert citation_entry_numbers(body) == [2]


def test_crlf_lines_and_a_heading_on_the_last_line():
    assert citation_entry_numbers("x\r\n# Citations\r\n[1] [A](https://a.test)\r\n") == [1]
    assert citation_entry_numbers("x\n# Citations") == []
