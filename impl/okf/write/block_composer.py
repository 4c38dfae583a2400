"""Compose the plain block subset of frontmatter YAML to ruamel's nodes, without its scanner.

ruamel's pure-Python scanner and parser were over half of a whole-bundle migration's time
(databricks-okf: 5,121 frontmatters and 2,457 one-line checks composed, ~2.5 ms each). Nearly all
frontmatter is one shape: ``key: value`` lines, block sequences of ``- value`` items or of
``- key: value`` mappings, each scalar on one line, plain or quoted without escapes. For a text
of that shape :func:`compose_block_subset` builds the very nodes ruamel's composer gives (node
classes, tags from ruamel's own YAML 1.2 resolver, start and end marks, styles, values); for any
other text it returns None and the caller composes with ruamel. Comments, blank lines, tabs,
carriage returns, flow collections, block scalars, escapes, anchors, aliases, tags, null values,
multi-line scalars, indentless sequences and anything not printable all take ruamel's path.

The one rule that must hold: when this module answers, ruamel composes the same tree
(``tests/okf/write/test_block_composer.py`` checks it on generated texts and, with the optional
corpus, on every frontmatter of databricks-okf).
"""

from __future__ import annotations

import functools
import re

from ruamel.yaml.error import FileMark
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.resolver import VersionedResolver

from knowspec.impl.okf.parsing.frontmatter import PLAIN_SCALAR_INDICATORS

MAP_TAG = "tag:yaml.org,2002:map"
SEQ_TAG = "tag:yaml.org,2002:seq"
STR_TAG = "tag:yaml.org,2002:str"
MARK_NAME = "<file>"  # what ruamel names a stream it reads from a file object
MAX_DEPTH = 64  # deeper nesting goes to ruamel (and the editor's own depth check)
MAX_KEY = 1000  # ruamel refuses a simple key whose colon lies over 1,024 characters past its start

# A key this module composes: a plain identifier-like scalar, then ``:`` and a space or the line end.
_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]*):(?: |$)")
# Resolution of plain scalars (``0.95`` is a float, ``2026-01-01`` a timestamp, ``yes`` a string):
# ruamel's resolver, pinned to YAML 1.2 as the editor's composer is.
_RESOLVER = VersionedResolver(version=(1, 2))


class _Defer(Exception):
    """The text leaves the subset: ruamel composes it."""


def compose_block_subset(text: str) -> MappingNode | None:
    """The root mapping ruamel would compose from ``text``, or None when ``text`` is not of the
    plain block shape this module covers (then compose it with ruamel)."""
    if not text.endswith("\n") or "\r" in text or "\t" in text:
        return None
    lines = text.split("\n")[:-1]
    if not all(line.isprintable() for line in lines):  # Python's printable is within YAML's
        return None
    try:
        return _Reader(lines).document()
    except _Defer:
        return None


@functools.lru_cache(maxsize=8192)  # keys and short values repeat across a bundle
def _plain_tag(value: str) -> str:
    return _RESOLVER.resolve(ScalarNode, value, (True, False))


class _Reader:
    """Reads ``lines`` (without their newlines) top to bottom; ``at`` is the next line."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.starts = [0]
        for line in lines:
            self.starts.append(self.starts[-1] + len(line) + 1)
        self.at = 0

    def current(self) -> tuple[str, int]:
        """The next line's content after its indentation, and that indentation."""
        line = self.lines[self.at]
        content = line.lstrip(" ")
        return content, len(line) - len(content)

    def mark(self, line: int, column: int) -> FileMark:
        return FileMark(MARK_NAME, self.starts[line] + column, line, column)

    def next_token(self) -> FileMark:
        """Where the token after a block collection starts: the next line's first character, or
        the end of the stream (which ends with a newline)."""
        if self.at == len(self.lines):
            return FileMark(MARK_NAME, self.starts[-1], len(self.lines), 0)
        return self.mark(self.at, self.current()[1])

    def document(self) -> MappingNode:
        first = self.lines[0] if self.lines else ""
        if first.startswith(" ") or not _KEY.match(first):
            raise _Defer
        root = self.mapping(0, 0)
        if self.at != len(self.lines):
            raise _Defer
        return root

    def mapping(self, indent: int, depth: int) -> MappingNode:
        if depth > MAX_DEPTH:
            raise _Defer
        start = self.mark(self.at, indent)
        pairs: list[tuple[Node, Node]] = []
        while self.at < len(self.lines):
            content, at_indent = self.current()
            if at_indent < indent:
                break
            match = _KEY.match(content) if at_indent == indent else None
            if match is None:
                raise _Defer
            raw = match.group(1)
            if len(raw) > MAX_KEY:
                raise _Defer
            key = ScalarNode(_plain_tag(raw), raw, self.mark(self.at, indent), self.mark(self.at, indent + len(raw)))
            rest = content[match.end():]
            if rest.strip(" "):
                value: Node = self.scalar(self.at, indent + match.end(), rest)
                self.at += 1
            else:
                self.at += 1
                value = self.block_value(indent, depth + 1)
            pairs.append((key, value))
        return MappingNode(MAP_TAG, pairs, start, self.next_token(), flow_style=False)

    def sequence(self, indent: int, depth: int) -> SequenceNode:
        if depth > MAX_DEPTH:
            raise _Defer
        start = self.mark(self.at, indent)
        items: list[Node] = []
        while self.at < len(self.lines):
            content, at_indent = self.current()
            if at_indent < indent:
                break
            if at_indent > indent or not content.startswith("- "):
                raise _Defer
            item = content[2:]
            if not item.strip(" ") or item[0] == " ":
                raise _Defer  # an empty item, or one indented further
            if _KEY.match(item):  # a mapping opened on the dash's line: the dash reads as indentation
                self.lines[self.at] = " " * (indent + 2) + item
                items.append(self.mapping(indent + 2, depth + 1))
            else:
                items.append(self.scalar(self.at, indent + 2, item))
                self.at += 1
        return SequenceNode(SEQ_TAG, items, start, self.next_token(), flow_style=False)

    def block_value(self, key_indent: int, depth: int) -> Node:
        """The value of a key whose line ends at its colon: a block nested deeper than the key."""
        if self.at == len(self.lines):
            raise _Defer  # a null value
        content, at_indent = self.current()
        if at_indent <= key_indent:
            raise _Defer  # a null value, or an indentless sequence
        if content.startswith("- "):
            return self.sequence(at_indent, depth)
        if _KEY.match(content):
            return self.mapping(at_indent, depth)
        raise _Defer  # a scalar on the next line: possibly multi-line

    def scalar(self, line: int, column: int, rest: str) -> ScalarNode:
        """A one-line scalar that starts at or after ``column`` and takes the rest of the line."""
        text = rest.lstrip(" ")
        column += len(rest) - len(text)
        text = text.rstrip(" ")
        start, end = self.mark(line, column), self.mark(line, column + len(text))
        first = text[0]
        if first in "\"'":
            inner = text[1:-1]
            if len(text) < 2 or text[-1] != first or first in inner or (first == '"' and "\\" in inner):
                raise _Defer  # escapes, doubled quotes, text after the closing quote
            return ScalarNode(STR_TAG, inner, start, end, style=first)
        if first in PLAIN_SCALAR_INDICATORS or ": " in text or text.endswith(":") or " #" in text:
            raise _Defer
        return ScalarNode(_plain_tag(text), text, start, end)
