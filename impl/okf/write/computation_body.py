"""The inline computation of an Attested Computation: one fenced block under one heading.

A body edit is needed only for ``mode: inline``: the single existing fenced code block gets
the new language and code (its surrounding prose untouched); a body without one gets a
``# Computation`` section appended; several blocks are ambiguous and refused.
"""

from __future__ import annotations

import re

_FENCE_OPEN = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")


class ComputationBodyRejected(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def fenced_blocks(body: str) -> list[tuple[int, int]]:
    """(first line, closing line) index pairs of the body's fenced code blocks."""
    lines = body.split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = _FENCE_OPEN.match(lines[i].rstrip("\r"))
        if m and not (m.group(2)[0] == "`" and "`" in m.group(3)):
            char, size = m.group(2)[0], len(m.group(2))
            j = i + 1
            while j < len(lines):
                close = lines[j].rstrip("\r").strip()
                if close and set(close) == {char} and len(close) >= size and len(lines[j]) - len(lines[j].lstrip(" ")) <= 3:
                    break
                j += 1
            blocks.append((i, j))
            i = j + 1
            continue
        i += 1
    return blocks


def _fence_for(code: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", code)), default=0)
    return "`" * max(3, longest + 1)


def set_inline_computation(body: str, language: str, code: str, nl: str) -> str:
    if "\x00" in code:
        raise ComputationBodyRejected("computation_inline_malformed", "inline computation must not contain NUL")
    blocks = fenced_blocks(body)
    if len(blocks) > 1:
        raise ComputationBodyRejected("computation_inline_multiple", "the body has more than one fenced code block")
    fence = _fence_for(code)
    code_lines = code.replace("\r\n", "\n").split("\n")
    if code_lines and code_lines[-1] == "":
        code_lines.pop()
    block = [fence + language] + code_lines + [fence]
    lines = body.split("\n")
    if blocks:
        start, end = blocks[0]
        if end >= len(lines):
            raise ComputationBodyRejected("computation_inline_malformed", "the body's code fence is not closed")
        cr = "\r" if lines[start].endswith("\r") else ""
        lines[start:end + 1] = [line + cr for line in block]
        return "\n".join(lines)
    if body == "" or body.endswith(nl + nl):
        sep = ""
    elif body.endswith(nl):
        sep = nl
    else:
        sep = nl + nl
    return body + sep + nl.join(["# Computation", ""] + block) + nl
