"""Split a concept document into frontmatter and body, and load the YAML like yaml.v3 would.

Why a custom loader: PyYAML follows YAML 1.1 (``no`` becomes ``False``, ``2026-06-19`` a
``date``), the upstream server reads YAML 1.2-style and judges fields by their *tag*. So every
scalar keeps its source text: ``!!str`` scalars load as plain ``str``; every other resolved
scalar loads as :class:`YamlScalar`, a ``str`` subclass carrying ``tag`` (``int``, ``float``,
``bool``, ``null``, ``timestamp``) and ``value`` (the Python value). Typed string reads are then
``type(v) is str``. Mappings load as :class:`YamlMap`, which also records explicitly duplicated
keys (``duplicates``) so that typed reads can treat them as "present but ambiguous".

The node graph is checked before construction: physical depth, semantic depth (through
aliases), node count and alias expansion are bounded, so YAML bombs fail fast.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import Any, Iterator

import yaml
from yaml.cyaml import CParser
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

MAX_YAML_PHYSICAL_DEPTH = 64
MAX_YAML_SEMANTIC_DEPTH = 64
MAX_YAML_GRAPH_NODES = 100_000
MAX_YAML_SEMANTIC_EXPANSION = 100_000


class YamlScalar(str):
    """A non-``!!str`` scalar: its text is the source spelling, ``tag``/``value`` its meaning."""

    __slots__ = ("tag", "value")
    tag: str
    value: Any

    def __new__(cls, text: str, tag: str, value: Any) -> "YamlScalar":
        obj = super().__new__(cls, text)
        obj.tag = tag
        obj.value = value
        return obj

    def __repr__(self) -> str:
        return f"YamlScalar({str(self)!r}, {self.tag})"


class YamlMap(dict):
    """A YAML mapping; ``duplicates`` names keys written more than once explicitly."""

    duplicates: frozenset = frozenset()


class YamlLimitError(Exception):
    """The YAML graph exceeds one of the MaxYAML* limits (the load fails with resource_limit)."""


class FrontmatterError(Exception):
    """A per-file parse error; ``code`` is the envelope diagnostic code, ``str()`` its text."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# --- resolver: YAML 1.2 core schema plus yaml.v3's timestamp tag ---------------------------

_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_INT = re.compile(r"^(?:[-+]?[0-9_]+|0o[0-7_]+|[-+]?0x[0-9a-fA-F_]+|[-+]?0b[01_]+)$")
_FLOAT = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_TIMESTAMP = re.compile(
    r"^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}"
    r"(?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::?[0-9]{2})?))?)?$"
)


class _Loader(yaml.CSafeLoader):
    """libyaml parser, our resolver and constructors (never YAML 1.1 booleans or dates)."""


_Loader.yaml_implicit_resolvers = {}
for _tag, _rx, _first in (
    ("tag:yaml.org,2002:bool", _BOOL, list("tTfF")),
    ("tag:yaml.org,2002:null", _NULL, ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:int", _INT, list("-+0123456789")),
    ("tag:yaml.org,2002:float", _FLOAT, list("-+.0123456789")),
    ("tag:yaml.org,2002:timestamp", _TIMESTAMP, list("0123456789")),
    ("tag:yaml.org,2002:merge", re.compile(r"^<<$"), ["<"]),
):
    _Loader.add_implicit_resolver(_tag, _rx, _first)


def _scalar_value(tag: str, text: str) -> Any:
    if tag == "bool":
        return text.lower() == "true"
    if tag == "null":
        return None
    if tag == "int":
        t = text.replace("_", "")
        try:
            if t.startswith(("0o", "0O")):
                return int(t[2:], 8)
            return int(t, 0) if t.lstrip("+-").startswith(("0x", "0b")) else int(t, 10)
        except ValueError:
            return None
    if tag == "float":
        low = text.lower()
        if low.endswith("inf"):
            return float("-inf") if low.startswith("-") else float("inf")
        if low.endswith("nan"):
            return float("nan")
        try:
            return float(text.replace("_", ""))
        except ValueError:
            return None
    return text


def _construct_typed(tag: str):
    def construct(loader: _Loader, node: ScalarNode) -> YamlScalar:
        return YamlScalar(node.value, tag, _scalar_value(tag, node.value))

    return construct


# Shorter !!str scalars are shared (interned) across the bundle. Repeats are short: of
# databricks-okf's distinct frontmatter strings under 16 characters 1,228 of 7,782 occur in more
# than one document (130,576 uses), from 24 to 255 characters 584 of 30,391 (titles, descriptions,
# timestamps, URLs are one document's own). Interning those would share nothing and fill the
# interpreter's interned table, which then doubled during a cold load (2^17 -> 2^18 slots, 1.8 MiB
# kept for the process's life; benchmarks/README.md, session 35).
MAX_SHARED_SCALAR = 24


def _shared(text: str) -> str:
    """A ``!!str`` scalar as every path makes it (short ones interned)."""
    return sys.intern(text) if len(text) < MAX_SHARED_SCALAR else text


def _construct_str(loader: _Loader, node: ScalarNode) -> str:
    """Keys and short values repeat across a bundle's frontmatter (``type``, ``tags`` entries,
    ``x-llmwiki`` sub-keys, source names): one shared copy each, not one per document."""
    return _shared(str(node.value))


def _construct_map(loader: _Loader, node: MappingNode) -> Iterator[YamlMap]:
    seen: set = set()
    dup: set = set()
    for key_node, _ in node.value:
        if isinstance(key_node, ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
            if key_node.value in seen:
                dup.add(key_node.value)
            seen.add(key_node.value)
    loader.flatten_mapping(node)
    data = YamlMap()
    if dup:
        data.duplicates = frozenset(dup)
    yield data
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            key = str(key)
        data[key] = loader.construct_object(value_node, deep=True)


for _short in ("int", "float", "bool", "null", "timestamp"):
    _Loader.add_constructor(f"tag:yaml.org,2002:{_short}", _construct_typed(_short))
_Loader.add_constructor("tag:yaml.org,2002:str", _construct_str)
_Loader.add_constructor("tag:yaml.org,2002:map", _construct_map)
_Loader.add_constructor(None, lambda loader, node: _construct_unknown(loader, node))


def _construct_unknown(loader: _Loader, node: Node) -> Any:
    """Unknown tags (``!foo``) keep their content shape; scalars keep their text."""
    if isinstance(node, ScalarNode):
        return YamlScalar(node.value, "unknown", node.value)
    if isinstance(node, SequenceNode):
        return [loader.construct_object(n, deep=True) for n in node.value]
    return _construct_map_eager(loader, node)


def _construct_map_eager(loader: _Loader, node: MappingNode) -> YamlMap:
    gen = _construct_map(loader, node)
    data = next(gen)
    for _ in gen:
        pass
    return data


def check_graph_limits(root: Node, has_aliases: bool = True) -> None:
    """Reject graphs over the depth / node / expansion limits (iterative: no recursion).

    Without aliases the semantic graph is the physical tree, so one cheap pass over the
    collection nodes suffices; with aliases the expansion is computed per distinct node.
    """
    if not has_aliases:
        _check_tree(root)
        return
    _check_tree(root)
    _check_expansion(root)


def _check_tree(root: Node) -> None:
    count = 1
    stack: list[tuple[Node, int]] = [(root, 1)]
    seen: set[int] = set()
    while stack:
        node, depth = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        value = node.value
        if type(node) is ScalarNode or not value:
            continue
        if depth >= MAX_YAML_PHYSICAL_DEPTH:
            raise YamlLimitError("YAML nesting depth exceeds the limit")
        if type(node) is MappingNode:
            count += 2 * len(value)
            for k, v in value:
                if type(k) is not ScalarNode:
                    stack.append((k, depth + 1))
                if type(v) is not ScalarNode:
                    stack.append((v, depth + 1))
        else:
            count += len(value)
            for v in value:
                if type(v) is not ScalarNode:
                    stack.append((v, depth + 1))
        if count > MAX_YAML_GRAPH_NODES:
            raise YamlLimitError("YAML graph has too many nodes")


def _check_expansion(root: Node) -> None:
    """Each distinct node's expanded size and depth, children first (an iterative depth-first
    walk). A node met again while its own children are still being walked is its own descendant:
    a recursive alias (``a: &a [*a]``), refused at once, before its expansion is ever counted."""
    size: dict[int, tuple[int, int]] = {}
    open_nodes: set[int] = set()  # expanded, children not yet all sized
    visit: list[tuple[Node, bool]] = [(root, False)]
    while visit:
        node, done = visit.pop()
        if id(node) in size:
            continue
        if not done:
            if id(node) in open_nodes:  # pushed by one of its own descendants
                raise YamlLimitError("YAML graph contains a cycle")
            open_nodes.add(id(node))
            visit.append((node, True))
            visit.extend((c, False) for c in _children(node) if id(c) not in size)
            continue
        open_nodes.discard(id(node))
        total, deepest = 1, 0
        for child in _children(node):  # all sized: each was walked above this node's marker
            csize, cdepth = size[id(child)]
            total += csize
            deepest = max(deepest, cdepth)
        if total > MAX_YAML_SEMANTIC_EXPANSION:
            raise YamlLimitError("YAML alias expansion exceeds the limit")
        if deepest + 1 > MAX_YAML_SEMANTIC_DEPTH:
            raise YamlLimitError("YAML semantic depth exceeds the limit")
        size[id(node)] = (total, deepest + 1)


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        out: list[Node] = []
        for k, v in node.value:
            out.append(k)
            out.append(v)
        return out
    return []


def _yaml_error_text(exc: yaml.YAMLError) -> str:
    """Render like yaml.v3: ``yaml: line N: <problem>``."""
    problem = getattr(exc, "problem", None) or str(exc)
    scanner = isinstance(exc, yaml.scanner.ScannerError)
    line = 0
    context_mark = getattr(exc, "context_mark", None)
    problem_mark = getattr(exc, "problem_mark", None)
    if context_mark is not None and context_mark.line != 0:
        line = context_mark.line + (1 if scanner else 0)
    elif problem_mark is not None and problem_mark.line != 0:
        line = problem_mark.line + (1 if scanner else 0)
    where = f"line {line}: " if line else ""
    return f"yaml: {where}{problem}"


def load_yaml_mapping(text: str) -> YamlMap:
    """Load frontmatter YAML; blank text is an empty mapping. Raises FrontmatterError/YamlLimitError."""
    if not text.strip():
        return YamlMap()
    fast = _line_mapping(text)
    if fast is None:
        fast = _plain_mapping(text)
    return fast if fast is not None else _composed_mapping(text)


def _composed_mapping(text: str) -> YamlMap:
    """The full path: compose the node graph, check its limits, construct (any YAML)."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return YamlMap()
        check_graph_limits(node, "*" in text)
        if not isinstance(node, MappingNode) or node.tag != "tag:yaml.org,2002:map":
            raise FrontmatterError(
                "invalid_frontmatter", "invalid frontmatter: frontmatter must be a YAML mapping"
            )
        data = loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise FrontmatterError("invalid_frontmatter", f"invalid frontmatter: {_yaml_error_text(exc)}")
    except RecursionError:
        raise YamlLimitError("YAML nesting depth exceeds the limit")
    finally:
        loader.dispose()
    return data


# --- the common case straight from libyaml's events ----------------------------------------
#
# Composing a node graph and walking it with PyYAML's constructor machinery costs twice libyaml's
# own parse. Frontmatter is nearly always a plain tree: no anchors, aliases, explicit tags, merge
# keys or collection keys. Such a tree is built here from the parser's events with the same
# resolver table and the same scalar constructors, so the result is the same objects; anything
# else (and every error, and a tree near a limit) returns None and takes the full path above,
# which gives the answer or the error message.

_FAST_MAX_DEPTH = 32  # far below MAX_YAML_*_DEPTH: a deeper tree takes the full path
_FAST_MAX_NODES = MAX_YAML_GRAPH_NODES // 2
_NO_KEY = object()
_TYPED = {f"tag:yaml.org,2002:{short}": short for short in ("int", "float", "bool", "null", "timestamp")}


_MERGE_KEY = object()
_RESOLVERS_FOR = _Loader.yaml_implicit_resolvers.get


def _plain_scalar(text: str) -> Any:
    """A plain scalar by the resolver's rule (by first character, then its patterns) and the
    constructors': a typed one is a :class:`YamlScalar`; ``_MERGE_KEY`` for ``<<``."""
    for tag, regexp in _RESOLVERS_FOR(text[:1], ()):
        if regexp.match(text):
            short = _TYPED.get(tag)
            if short is None:
                return _MERGE_KEY
            return YamlScalar(text, short, _scalar_value(short, text))
    return _shared(text)


def _plain_mapping(text: str) -> YamlMap | None:
    """The frontmatter mapping built from libyaml's events, or None: take the full path."""
    parser = CParser(text)  # libyaml's events alone: no composer, resolver or constructor
    try:
        return _mapping_from_events(parser.get_event)
    except yaml.YAMLError:
        return None
    finally:
        parser.dispose()


def _mapping_from_events(get_event: Any) -> YamlMap | None:
    if type(get_event()) is not yaml.StreamStartEvent:
        return None
    event = get_event()
    if type(event) is not yaml.DocumentStartEvent:
        return None
    event = get_event()
    if type(event) is not yaml.MappingStartEvent or event.anchor is not None or event.tag is not None:
        return None
    root = YamlMap()
    # One frame per open collection: [container, keys seen (None: a sequence), duplicated keys,
    # the key waiting for its value].
    stack: list[list[Any]] = [[root, set(), set(), _NO_KEY]]
    nodes = 1
    scalar_event = yaml.ScalarEvent
    while stack:
        event = get_event()
        kind = type(event)
        frame = stack[-1]
        if kind is scalar_event:
            if event.anchor is not None or event.tag is not None:
                return None
            # the resolver applies to plain scalars only
            value: Any = _plain_scalar(event.value) if event.implicit[0] else _shared(event.value)
            if value is _MERGE_KEY:
                return None
            opened = None
        elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
            if event.anchor is not None or event.tag is not None or len(stack) >= _FAST_MAX_DEPTH:
                return None
            if kind is yaml.MappingStartEvent:
                value = YamlMap()
                opened = [value, set(), set(), _NO_KEY]
            else:
                value = []
                opened = [value, None, None, _NO_KEY]
        elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
            stack.pop()
            if frame[2]:
                frame[0].duplicates = frozenset(frame[2])
            continue
        else:
            return None  # an alias, or anything this path does not know
        nodes += 1
        if nodes > _FAST_MAX_NODES:
            return None
        container, seen = frame[0], frame[1]
        if seen is None:
            container.append(value)
        elif frame[3] is _NO_KEY:
            if opened is not None:
                return None  # a collection as a key
            raw = event.value
            if raw in seen:
                frame[2].add(raw)
            seen.add(raw)
            frame[3] = value
        else:
            container[frame[3]] = value
            frame[3] = _NO_KEY
        if opened is not None:
            stack.append(opened)
    if type(get_event()) is not yaml.DocumentEndEvent or type(get_event()) is not yaml.StreamEndEvent:
        return None  # a second document: the full path names the error
    return root


# --- the commonest case straight from the lines --------------------------------------------
#
# Most frontmatter is block mappings and sequences of one-line scalars: ``key: value``, ``key:``
# over an indented block, ``- item``, ``- key: value``. Those lines are read here with a few
# string tests, several times cheaper than libyaml's events (one Python object each). The subset
# is strict: keys of letters, digits, ``_.-``; plain scalars that can be nothing else (no
# indicator first, no ``: `` or `` #`` inside, no ``:`` last); quoted scalars without escapes;
# one-line flow sequences of such items; spaces only, no comments, blank or continuation lines.
# Anything else (or past a limit) returns None and takes the event path; the resolver and the
# constructors are the event path's own (:func:`_plain_scalar`).

_LINE_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]{0,127}):(?: +|$)")
# Characters that start something other than a plain scalar (or may, depending on what follows).
PLAIN_SCALAR_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@`")
_DOUBLE_QUOTED = re.compile(r'"([^"\\]*)"')
_SINGLE_QUOTED = re.compile(r"'([^']*)'")
# Possessive (``*+``): an item may end in spaces and so may the separator after it, and with
# backtracking each comma doubled the ways a line without its ``]`` was tried (22 items: a
# 105-byte frontmatter line held the GIL for minutes). Possessive, each run is taken once.
_FLOW_ITEM = r"""(?:[^-?:,\[\]{}#&*!|>'"%@` ][^:,\[\]{}#'"]*+|"[^"\\,\[\]]*+"|'[^',\[\]]*+')"""
_FLOW_SEQUENCE = re.compile(rf"\[ *+(?:{_FLOW_ITEM}(?: *+, *+{_FLOW_ITEM})*+)? *+\]")


class _Defer(Exception):
    """The lines leave the subset: the event path decides."""


_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")  # a tab, a CR or a character YAML refuses
_RESOLVED_FIRST = frozenset(_Loader.yaml_implicit_resolvers)  # "" among them (null)


def _line_mapping(text: str) -> YamlMap | None:
    """The frontmatter mapping read line by line, or None: take the event path."""
    if len(text) >= _FAST_MAX_NODES or _CONTROL.search(text) is not None:
        return None  # (a node takes a character at least: no count is needed below this length)
    if not text.isascii() and not text.replace("\n", "").isprintable():
        return None  # YAML's printable set is wider than Python's: a few texts take the event path
    lines = text.rstrip(" \n").split("\n")  # trailing blank lines dropped
    if lines[0][:1] == " ":
        return None
    reader = _LineReader(lines)
    try:
        root = reader.mapping(0, 1)
    except _Defer:
        return None
    return root if reader.at == len(lines) else None


def _indented(line: str) -> tuple[int, str]:
    content = line.lstrip(" ")
    return len(line) - len(content), content


class _LineReader:
    """Reads ``lines`` from ``at`` on; the depth is bounded as on the event path (the node count
    by the text's length)."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.at = 0

    def mapping(self, indent: int, depth: int) -> YamlMap:
        if depth >= _FAST_MAX_DEPTH:
            raise _Defer
        lines, out, seen, duplicated = self.lines, YamlMap(), set(), set()
        key_match, key_of, known = _LINE_KEY.match, _line_key, _KNOWN_LINES.get
        while self.at < len(lines):
            line = lines[self.at]
            content = line.lstrip(" ")
            at_indent = len(line) - len(content)
            if at_indent < indent:
                break
            if at_indent == indent:
                entry = known(content)
                if entry is not None:  # a ``key: value`` line read before: the same reading
                    raw, key, value = entry
                    if raw in seen:
                        duplicated.add(raw)
                    seen.add(raw)
                    self.at += 1
                    out[key] = list(value) if type(value) is tuple else value
                    continue
                match = key_match(content)
            else:
                match = None
            if match is None:
                raise _Defer  # deeper than its key, not a key (an item, a comment, a blank line)
            raw = match.group(1)
            if raw in seen:
                duplicated.add(raw)
            seen.add(raw)
            rest = content[match.end():].rstrip(" ")
            self.at += 1
            if rest:
                key, value = key_of(raw), self.inline(rest)
                out[key] = value
                if len(content) <= _MAX_KNOWN_LINE and len(_KNOWN_LINES) < _MAX_KNOWN_LINES:
                    _KNOWN_LINES[content] = (raw, key, tuple(value) if type(value) is list else value)
            else:
                out[key_of(raw)] = self.block_value(indent, depth)
        if duplicated:
            out.duplicates = frozenset(duplicated)
        return out

    def sequence(self, indent: int, depth: int) -> list:
        if depth >= _FAST_MAX_DEPTH:
            raise _Defer
        lines, out = self.lines, []
        while self.at < len(lines):
            at_indent, content = _indented(lines[self.at])
            if at_indent != indent or not content.startswith("- "):
                if at_indent > indent:
                    raise _Defer  # a continuation line, a wider item indent
                break  # the end, or the next key of the mapping this sequence is the value of
            item = content[2:].rstrip(" ")
            if not item or item[0] == " " or item[0] == "-":
                raise _Defer  # an empty item, one indented further, a nested sequence
            if _LINE_KEY.match(item):  # a mapping opened on the dash's line
                lines[self.at] = " " * (indent + 2) + item
                out.append(self.mapping(indent + 2, depth + 1))
            else:
                self.at += 1
                out.append(self.inline(item))
        return out

    def block_value(self, indent: int, depth: int) -> Any:
        """The value of a ``key:`` line: the block below it, a sequence at its own indent, or null."""
        if self.at < len(self.lines):
            at_indent, content = _indented(self.lines[self.at])
            if at_indent > indent:
                if content.startswith("- "):
                    return self.sequence(at_indent, depth + 1)
                return self.mapping(at_indent, depth + 1)
            if at_indent == indent and content.startswith("- "):
                return self.sequence(indent, depth + 1)
        return _plain("")

    @staticmethod
    def inline(text: str) -> Any:
        """A one-line scalar or flow sequence (a deeper line after it, which would continue it,
        is refused by the loop that reads the next line)."""
        first = text[0]
        if first not in PLAIN_SCALAR_INDICATORS:
            if ": " in text or " #" in text or text[-1] == ":":
                raise _Defer
            return _plain(text)
        if first == '"' or first == "'":
            quoted = (_DOUBLE_QUOTED if first == '"' else _SINGLE_QUOTED).fullmatch(text)
            if quoted is None:
                raise _Defer
            return _shared(quoted.group(1))
        if first == "[" and _FLOW_SEQUENCE.fullmatch(text) is not None:
            inner = text[1:-1].strip(" ")
            return [_flow_item(item.strip(" ")) for item in inner.split(",")] if inner else []
        raise _Defer


def _flow_item(item: str) -> Any:
    if item[0] == '"' or item[0] == "'":
        return _shared(item[1:-1])
    return _plain(item)


_KEYS: dict[str, Any] = {}  # a key's text -> the key (bundles repeat their keys)
_MAX_KEYS = 4096
# A ``key: value`` line's text -> (raw key, key, value; a flow sequence as a tuple, copied to a
# list on each use): bundles repeat whole lines (a type, a status, a tag list). Values are
# strings and YamlScalars, shared as interned strings are.
_KNOWN_LINES: dict[str, tuple[str, Any, Any]] = {}
_MAX_KNOWN_LINES = 4096
_MAX_KNOWN_LINE = 64  # short lines repeat; a title or a hash is read once


def _line_key(raw: str) -> Any:
    key = _KEYS.get(raw)
    if key is None:
        key = _plain(raw)
        if len(_KEYS) < _MAX_KEYS:
            _KEYS[raw] = key
    return key


def _plain(text: str) -> Any:
    """A plain scalar of the line path (its resolver's first characters tested first)."""
    if text[:1] not in _RESOLVED_FIRST:
        return _shared(text)
    value = _plain_scalar(text)
    if value is _MERGE_KEY:
        raise _Defer
    return value


@dataclass(frozen=True)
class SplitDocument:
    """A document cut at its delimiters. ``has_frontmatter`` False means the whole text is body."""

    has_frontmatter: bool
    frontmatter_yaml: str
    body: str
    body_start_line: int  # 1-based line number of the body's first line in the file
    frontmatter_offset: int = 0  # where frontmatter_yaml starts in the text (characters)
    body_offset: int = 0  # where body starts in the text (characters)


def decode_utf8(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise FrontmatterError("invalid_encoding", "invalid encoding: invalid UTF-8")


# The closing delimiter: a line that is exactly ``---`` once one trailing CR is dropped.
_CLOSING_DELIMITER = re.compile(r"^---\r?$", re.M)


def document_spans(text: str) -> tuple[int, int, int, int, int] | None:
    """The delimiter rules of spec/okf/contract/read.md §1.3 (first line exactly ``---``; LF, CRLF
    or EOF) as character offsets, no text copied: (frontmatter start, end, body start, end, the
    body's first line); None without frontmatter (the whole text is the body, from line 1)."""
    first_end = text.find("\n")
    first = text if first_end < 0 else text[:first_end]
    if first.endswith("\r"):
        first = first[:-1]
    if first != "---":
        return None
    yaml_start = len(text) if first_end < 0 else first_end + 1
    closing = _CLOSING_DELIMITER.search(text, yaml_start)
    if closing is None:
        raise FrontmatterError("unterminated_frontmatter", "unterminated frontmatter")
    pos = closing.start()
    end = text.find("\n", pos)
    body_line = 3 + text.count("\n", yaml_start, pos)
    body_start = body_end = len(text)
    if end >= 0:
        body_start = end + 1
        if text.startswith("\r\n", body_start):
            body_start += 2
            body_line += 1
        elif text.startswith("\n", body_start):
            body_start += 1
            body_line += 1
        if body_end - body_start >= 2 and text.endswith("\r\n"):
            body_end -= 2
        elif body_end > body_start and text.endswith("\n"):
            body_end -= 1
    return yaml_start, pos, body_start, body_end, body_line


def split_document(text: str) -> SplitDocument:
    """Apply the delimiter rules of spec/okf/contract/read.md §1.3 (:func:`document_spans`)."""
    spans = document_spans(text)
    if spans is None:
        return SplitDocument(False, "", text, 1)
    yaml_start, yaml_end, body_start, body_end, body_line = spans
    return SplitDocument(True, text[yaml_start:yaml_end], text[body_start:body_end], body_line, yaml_start, body_start)
