"""Markdown analysis of a concept body: headings with Goldmark IDs, prose mask, links, footnotes.

pyromark (pulldown-cmark) gives block and inline events with UTF-8 *byte* ranges. From them we
build the upstream "prose mask" (spec/okf/contract/gaps.md §2.1): fenced/indented code, HTML blocks, inline raw
HTML and code-span contents are blanked (newlines kept), so link and footnote scanners never see
pseudo-syntax inside code. Heading IDs follow Goldmark's ``ids.Generate`` byte rules (spec/okf/contract/gaps.md §1.3).
"""

from __future__ import annotations

import re
import sys
from array import array
from typing import Any, Callable, Iterator, NamedTuple

import pyromark

from knowspec.impl.okf.parsing.links import scan_line_links

_HTML_CLOSING_TYPES = re.compile(rb"^\s{0,3}<(?:script|pre|style|textarea|!--|\?|![A-Za-z]|!\[CDATA\[)", re.I)
_FOOTNOTE_REF = re.compile(r"\[\^([^\]\r\n]+)\]")
_FOOTNOTE_DEF = re.compile(r"^ {0,3}\[\^([^\]\r\n]+)\]:[ \t]*(.*)$")


class Heading(NamedTuple):
    """A heading of the body: ``level`` 1-6, ``text`` (inline text), ``anchor`` (Goldmark
    auto ID, unique in the document), ``line`` (1-based file line), ``start``/``end`` (body byte
    range of the heading block)."""

    level: int
    text: str
    anchor: str
    line: int
    start: int
    end: int


class RawLink(NamedTuple):
    """An inline link target as extracted by the line scanner, with its 1-based file line."""

    target: str
    line: int


class FootnoteRef(NamedTuple):
    label: str
    raw: str
    line: int


class FootnoteDef(NamedTuple):
    label: str
    text: str
    raw: str
    line: int


def _line_around(text: str, pos: int) -> tuple[int, int]:
    """Start and end (before its newline) of the line holding ``pos``."""
    end = text.find("\n", pos)
    return text.rfind("\n", 0, pos) + 1, len(text) if end < 0 else end


def _link_lines(text: str) -> Iterator[tuple[int, int]]:
    """Start and end of each line of ``text`` that holds ``](`` (no other line has a link), in order."""
    pos = text.find("](")
    while pos >= 0:
        start, end = _line_around(text, pos)
        yield start, end
        pos = text.find("](", end)


class BodyAnalysis:
    """Everything the read side derives from a body's Markdown structure.

    Kept per document for the life of a snapshot, so it holds only the small results (links,
    footnotes, fences, heading ranges, the masked spans); the body comes from ``source`` (the
    text itself, or a callable that cuts it from the document's file on each use) and the
    prose is rebuilt from the masked spans when asked. ``headings`` are built on first use from the heading ranges
    recorded during the parse (link-only consumers such as neighbours never pay for heading IDs).
    """

    __slots__ = ("_source", "first_line", "_heading_state", "_link_targets", "_link_lines", "footnote_refs",
                 "footnote_defs", "mask", "fences")

    def __init__(self, source: "str | Callable[[], str]" = "", first_line: int = 1,
                 heading_ranges: "tuple[array, list[str]] | None" = None, mask: "array | None" = None,
                 fences: list | None = None) -> None:
        self._source = source
        self.first_line = first_line
        # (False, (flat level/start/end triples, inline texts)) until the headings are built,
        # then (True, headings): one attribute swapped at once, so a concurrent reader sees
        # either, never half of a change.
        self._heading_state: tuple[bool, Any] = (False, heading_ranges or (array("q"), []))
        # Links as two flat columns (a bundle has tens of thousands: a record each would cost
        # more than the links themselves); ``links`` makes the records when asked.
        self._link_targets: list[str] = []
        self._link_lines = array("q")
        self.footnote_refs: list[FootnoteRef] = []
        self.footnote_defs: list[FootnoteDef] = []
        # Body byte spans blanked in the prose, flat: start, end, start, end, ...
        self.mask: array = mask if mask is not None else array("q")
        self.fences: list[tuple[int, int, bool]] = fences or []  # (start, end, closed) bytes

    @property
    def links(self) -> list[RawLink]:
        """Inline link targets in body order, with their file lines."""
        return list(map(RawLink, self._link_targets, self._link_lines))

    @property
    def link_targets(self) -> list[str]:
        """The targets of :attr:`links` (the list itself: do not change it)."""
        return self._link_targets

    def add_link(self, target: str, line: int) -> None:
        self._link_targets.append(target)
        self._link_lines.append(line)

    @property
    def body(self) -> str:
        source = self._source
        return source if isinstance(source, str) else source()

    @property
    def prose(self) -> str:
        """The body with opaque bytes blanked (newlines kept)."""
        body = self.body
        if not self.mask:
            return body
        return _apply_mask(body.encode("utf-8"), self.mask).decode("utf-8", errors="replace")

    @property
    def heading_ranges(self) -> list:
        """(level, start, end, inline text) of each heading, in body order."""
        built, items = self._heading_state
        if built:
            return [(h.level, h.start, h.end, h.text) for h in items]
        spans, texts = items
        return [(spans[3 * i], spans[3 * i + 1], spans[3 * i + 2], text) for i, text in enumerate(texts)]

    @property
    def headings(self) -> list[Heading]:
        built, items = self._heading_state
        if not built:
            data = self.body.encode("utf-8")
            items = _headings(data, _LineIndex(data, self.first_line), self.heading_ranges)
            self._heading_state = (True, items)  # the ranges live on in the headings
        return items

    @property
    def anchors(self) -> set[str]:
        return {h.anchor for h in self.headings}


# --- Goldmark heading IDs ------------------------------------------------------------------

_TRIM = b" \t\n\x0b\x0c\r"


_ID_TABLE: dict[int, str | None] = {c: None for c in range(128)}
_ID_TABLE.update({ord(c): c for c in "abcdefghijklmnopqrstuvwxyz0123456789"})
_ID_TABLE.update({ord(c): c.lower() for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"})
_ID_TABLE.update({ord(c): "-" for c in " \t\n\r-_"})


def heading_id_base(raw: bytes) -> str:
    """Goldmark ``ids.Generate`` byte rules; ``heading`` when nothing survives.

    Multi-byte UTF-8 sequences are dropped whole; ASCII letters are lowercased, digits kept,
    space/TAB/LF/CR/``-``/``_`` become ``-``, every other ASCII byte is dropped."""
    text = raw.strip(_TRIM).decode("utf-8", errors="ignore")
    if not text.isascii():
        text = text.encode("ascii", "ignore").decode("ascii")
    return text.translate(_ID_TABLE) or "heading"


def unique_heading_ids(bases: list[str]) -> list[str]:
    """Issue IDs in order; a used base gets the first free ``-1``, ``-2`` … suffix."""
    issued: set[str] = set()
    out = []
    for base in bases:
        candidate = base
        n = 0
        while candidate in issued:
            n += 1
            candidate = f"{base}-{n}"
        issued.add(candidate)
        out.append(candidate)
    return out


def atx_content(line: bytes) -> bytes:
    """Heading text of an ATX line: after the ``#`` run, closing sequence removed (spec/okf/contract/gaps.md §1.2)."""
    content = line.lstrip(b" ").lstrip(b"#").strip(_TRIM)
    stripped = content.rstrip(b"#")
    if not stripped:
        return b""
    if len(stripped) < len(content) and stripped[-1:] in (b" ", b"\t"):
        return stripped.rstrip(b" \t")
    return content


# --- analysis ------------------------------------------------------------------------------


class _LineIndex:
    """Line arithmetic on the body bytes with C-level searches (offsets mostly increase)."""

    def __init__(self, data: bytes, first_line: int) -> None:
        self.data = data
        self.first = first_line
        self.size = len(data)
        self._offset = 0
        self._count = 0

    def line_of(self, offset: int) -> int:
        if offset >= self._offset:
            self._count += self.data.count(b"\n", self._offset, offset)
        else:
            self._count = self.data.count(b"\n", 0, offset)
        self._offset = offset
        return self.first + self._count

    def line_start(self, offset: int) -> int:
        return self.data.rfind(b"\n", 0, offset) + 1

    def line_end(self, offset: int) -> int:
        """Offset just past the newline of the line holding ``offset`` (or end of data)."""
        pos = self.data.find(b"\n", offset)
        return self.size if pos < 0 else pos + 1


def _fence_closed(data: bytes, start: int, end: int) -> bool:
    block = data[start:end].rstrip(b"\n").split(b"\n")
    opener = block[0].lstrip(b" ")
    ch = opener[:1]
    run = len(opener) - len(opener.lstrip(ch))
    if len(block) < 2:
        return False
    closer = block[-1].rstrip(b"\r")
    stripped = closer.lstrip(b" >-*+0123456789.")  # container prefixes are approximated
    crun = len(stripped) - len(stripped.lstrip(ch))
    return crun >= run and stripped[crun:].strip() == b""


def analyse_body(body: str, body_start_line: int = 1, source: Callable[[], str] | None = None) -> BodyAnalysis:
    """Parse ``body`` once with pyromark and derive headings, prose mask, links and footnotes.

    ``source``: where the analysis reads the body again later (default: ``body`` itself)."""
    data = body.encode("utf-8")
    lines = _LineIndex(data, body_start_line)
    mask = array("q")  # flat (start, end) pairs: code spans alone can number tens of thousands
    link_spans: list[tuple[int, int]] = []
    footnote_blocks: list[tuple[int, int]] = []
    heading_spans = array("q")  # level, start, end of each heading, flat
    heading_texts: list[str] = []  # its inline text
    current_heading: list | None = None
    fence_unclosed_from: int | None = None
    fences: list[tuple[int, int, bool]] = []
    footnotes = "[^" in body
    # Adjacent Text events are merged: only heading texts are read, and only concatenated.
    event: Any  # pyromark's event union: told apart by key below
    for event, rng in pyromark.events_with_range(body, merge_text=True):
        # Most frequent first; string events (SoftBreak, Rule, …) contain neither key.
        if "Text" in event:
            if current_heading is not None:
                current_heading[3].append(event["Text"])
            continue
        if "End" in event:
            if current_heading is not None and type(event["End"]) is dict and "Heading" in event["End"]:
                level, start, end, texts = current_heading
                heading_spans.extend((level, start, end))
                heading_texts.append("".join(texts))
                current_heading = None
            continue
        if type(event) is not dict:
            continue
        if "Start" in event:
            tag = event["Start"]
            if type(tag) is not dict:
                if tag == "HtmlBlock":
                    start, end = rng["start"], rng["end"]
                    s = lines.line_start(start)
                    e = lines.line_end(max(end - 1, start))
                    chunk = data[s:e].rstrip(b"\n")
                    if b"\n" in chunk and _HTML_CLOSING_TYPES.match(chunk):
                        e = s + chunk.rfind(b"\n") + 1
                    mask.extend((s, e))
                elif footnotes and tag == "Paragraph":
                    footnote_blocks.append((rng["start"], rng["end"]))
                continue
            if "Heading" in tag:
                current_heading = [int(tag["Heading"]["level"][1:]), rng["start"], rng["end"], []]
                if footnotes:
                    footnote_blocks.append((rng["start"], rng["end"]))
            elif "CodeBlock" in tag:
                start, end = rng["start"], rng["end"]
                s = lines.line_start(start)
                e = lines.line_end(max(end - 1, start))
                kind = tag["CodeBlock"]
                if type(kind) is dict and "Fenced" in kind:
                    closed = _fence_closed(data, start, end)
                    fences.append((s, e, closed))
                    if fence_unclosed_from is None and not closed:
                        fence_unclosed_from = s
                mask.extend((s, e))
            elif footnotes and ("Link" in tag or "Image" in tag):
                link_spans.append((rng["start"], rng["end"]))
            continue
        if "Code" in event:
            start, end = rng["start"], rng["end"]
            raw = data[start:end]
            ticks = len(raw) - len(raw.lstrip(b"`"))
            if end - start > 2 * ticks:
                mask.extend((start + ticks, end - ticks))
            if current_heading is not None:
                current_heading[3].append(event["Code"])
        elif "InlineHtml" in event:
            mask.extend((rng["start"], rng["end"]))
    if fence_unclosed_from is not None:
        mask.extend((fence_unclosed_from, len(data)))
    if mask:
        prose_bytes = _apply_mask(data, mask)
        prose = prose_bytes.decode("utf-8", errors="replace")
    else:
        prose_bytes, prose = data, body
    analysis = BodyAnalysis(body if source is None else source, body_start_line, (heading_spans, heading_texts),
                            mask, fences)
    _scan_links(prose, body_start_line, analysis)
    _scan_footnotes(data, prose_bytes, lines, footnote_blocks, link_spans, analysis)
    return analysis


# The newline before a blank line (spaces, tabs and CRs only), at that newline.
_BLANK_LINE = re.compile(r"\n[ \t\r]*(?=\n)")


def _links_scanned(body: str, body_start_line: int) -> BodyAnalysis | None:
    """An analysis holding only the body's links, scanned without the parse, when no line
    holding ``](`` can touch a masked span (see :func:`link_lines_clear`); else None."""
    text = _clear_text(body)
    if text is None:
        return None
    analysis = BodyAnalysis(body, body_start_line)
    _scan_links(text, body_start_line, analysis)
    return analysis


def links_without_parse(body: str, body_start_line: int = 1) -> list[RawLink] | None:
    """The body's links when no line holding ``](`` can touch a masked span, else None."""
    analysis = _links_scanned(body, body_start_line)
    return None if analysis is None else analysis.links


def link_targets_without_parse(body: str) -> list[str] | None:
    """The targets of :func:`links_without_parse`: the same lines scanned, without a record or
    a line number per link."""
    text = _clear_text(body)
    if text is None:
        return None
    targets: list[str] = []
    for start, end in _link_lines(text):
        # Not interned: the caller resolves them to IDs at once, and the link memo
        # (links._classified, bounded) keys its own copy. Interned, a target string leaves the
        # interpreter's interned table when its memo entry is evicted, a later read inserts it
        # again, and those insertions resized the table to twice its size (databricks-okf: 1.8 ->
        # 3.7 MiB in the first get_semantic_graph).
        targets += scan_line_links(text[start:end])
    return targets


def link_lines_clear(body: str) -> bool:
    """Whether no line of ``body`` holding ``](`` can touch a masked span.

    The links are the line scanner's on the prose, and the prose differs from the body only in
    masked spans: code blocks (fenced, or indented), HTML blocks, inline HTML and code spans.
    Fenced blocks outside any container are blanked first (:func:`fences_blanked`), so a line
    inside one holds no link, as in the prose. A ``](`` line of what remains is clear of the
    other spans when no ``<`` outside a code span and no uncertain fence comes before its end (a
    block or inline span that starts later cannot reach back), it holds no run of four spaces and
    no tab (an indented code line always does), and its paragraph (up to blank lines: no code
    span crosses one, nor a fence) has its code spans known: every backtick run pairs within its
    own line, none escaped, in a reference definition or where a link destination or title could
    take it (:func:`_paragraph_code_spans`, :func:`_destinations_clear`); those are blanked too.
    When every ``](`` line is clear, scanning that text gives the same links without the parse.
    """
    return _clear_text(body) is not None


def _clear_text(body: str) -> str | None:
    """The body with its top-level fences and its link paragraphs' code spans blanked when every
    ``](`` line of it is clear (see :func:`link_lines_clear`), else None; its lines are the
    prose's lines wherever a ``](`` is."""
    if "](" not in body:
        return body
    text, limit = fences_blanked(body)
    last = text.rfind("](")
    if last >= limit:
        return None
    paragraphs = _Paragraphs(text)
    last_end = text.find("\n", last)
    stop = min(limit, len(text) if last_end < 0 else last_end)
    at = text.find("<", 0, stop)
    while at >= 0:  # HTML or an autolink, unless it lies in a code span
        if not paragraphs.in_code_span(at):
            if last >= at:  # the last link line reaches a possible span: the common case
                return None
            limit = at
            break
        at = text.find("<", at + 1, stop)
    pos = text.find("](")
    while pos >= 0:
        start, end = _line_around(text, pos)
        if end > limit:
            return None
        if text.find("    ", start, end) >= 0 or text.find("\t", start, end) >= 0:
            return None
        if paragraphs.code_spans(start) is None:
            return None
        pos = text.find("](", end)
    spans = paragraphs.all_code_spans()
    if spans:
        text = _blank_spans(text, spans)
        if not _destinations_clear(text, limit):
            return None
    return text


class _Paragraphs:
    """The code spans of a text's paragraphs (whole lines between blank lines), each paragraph
    verified once (see :func:`_paragraph_code_spans`)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.ticks = "`" in text
        self._known: dict[int, tuple[int, list[int] | None]] = {}  # start: (end, spans)
        self._current: tuple[int, int, list[int] | None] = (0, -1, [])

    def code_spans(self, line_start: int) -> list[int] | None:
        """The spans of the paragraph holding the line at ``line_start``, None if uncertain."""
        if not self.ticks:
            return []
        start, end, spans = self._current
        if not start <= line_start < end:
            text = self.text
            start = _last_blank_line_end(text, line_start)
            known = self._known.get(start)
            if known is None:
                line_end = text.find("\n", line_start)
                blank = None if line_end < 0 else _BLANK_LINE.search(text, line_end)
                end = len(text) if blank is None else blank.start()
                spans = _paragraph_code_spans(text, start, end)
                self._known[start] = (end, spans)
            else:
                end, spans = known
            self._current = (start, end, spans)
        return spans

    def in_code_span(self, offset: int) -> bool:
        spans = self.code_spans(self.text.rfind("\n", 0, offset) + 1)
        if not spans:
            return False
        ends = iter(spans)
        return any(s <= offset < e for s, e in zip(ends, ends))

    def all_code_spans(self) -> list[int]:
        """Every verified paragraph's spans, flat, in text order."""
        out: list[int] = []
        for start in sorted(self._known):
            out.extend(self._known[start][1] or ())
        return out


def _last_blank_line_end(text: str, before: int) -> int:
    """Where the paragraph holding offset ``before`` (a line start) begins: past the last blank
    line above it, or at 0."""
    line_end = before - 1
    while line_end > 0:
        line_start = text.rfind("\n", 0, line_end) + 1
        if not text[line_start:line_end].strip(" \t\r"):
            return line_end + 1
        line_end = line_start - 1
    return 0


_TICK_RUN = re.compile(r"`+")


def _paragraph_code_spans(text: str, start: int, end: int) -> list[int] | None:
    """The code span contents of ``text[start:end]`` (whole lines up to a blank line), flat, when
    every backtick run pairs within its own line, so no span crosses a line or a block boundary;
    None when a run may be anything else: unmatched in its line, escaped, or in a link reference
    definition, whose destination and title hold no code."""
    if text.find("`", start, end) < 0:
        return []
    if text.find("\\`", start, end) >= 0 or text.find("]:", start, end) >= 0:
        return None
    spans: list[int] = []
    line_start = start
    while line_start < end:
        line_end = text.find("\n", line_start, end)
        if line_end < 0:
            line_end = end
        if text.find("`", line_start, line_end) >= 0:
            runs = [(run.start(), run.end()) for run in _TICK_RUN.finditer(text, line_start, line_end)]
            i = 0
            while i < len(runs):
                opener_start, opener_end = runs[i]
                width = opener_end - opener_start
                for j in range(i + 1, len(runs)):
                    if runs[j][1] - runs[j][0] == width:
                        break
                else:
                    return None
                if runs[j][0] > opener_end:
                    spans.extend((opener_end, runs[j][0]))
                i = j + 1
        line_start = line_end + 1
    return spans


def _blank_spans(text: str, spans: list[int]) -> str:
    pieces = []
    copied = 0
    ends = iter(spans)
    for s, e in zip(ends, ends):
        pieces.append(text[copied:s])
        pieces.append(" " * (e - s))
        copied = e
    pieces.append(text[copied:])
    return "".join(pieces)


# An inline link's destination closing on its line with no title, nesting, escape or backtick.
_PLAIN_DESTINATION = re.compile(r"\]\([^\s\\()`<]*\)")


def _destinations_clear(text: str, limit: int) -> bool:
    """Whether no backtick can be part of a link destination or title (there it is no code span).

    ``text`` has the code spans blanked: a ``](`` left is a possible link; its destination is
    plain up to its ``)``, or else (a title, nesting, escapes, a line break) no backtick may
    follow it in its paragraph."""
    pos = text.find("](", 0, limit)
    while pos >= 0:
        if _PLAIN_DESTINATION.match(text, pos) is None:
            blank = _BLANK_LINE.search(text, pos)
            if text.find("`", pos, len(text) if blank is None else blank.start()) >= 0:
                return False
        pos = text.find("](", pos + 2, limit)
    return True


# A line that may open a list item or a block quote (loosely: thematic breaks match too).
_CONTAINER_START = re.compile(r"^ {0,3}(?:>|(?:[-+*]|[0-9]{1,9}[.)])(?:[ \t]|$))", re.M)
_CONTAINER_PREFIX = frozenset(" \t>*+-.)0123456789")
_LONE_CR = re.compile(r"\r(?!\n)")


def fences_blanked(body: str) -> tuple[str, int]:
    """(``body`` with every fenced code block outside any container blanked, ``limit``).

    CommonMark's fence rules: an opening run of three or more backticks or tildes indented by
    at most three spaces, a backtick run's info string holding no backtick; the block runs to a
    closing run of the same character, at least as long, indented by at most three spaces and
    followed by spaces or tabs only, or to the end of the document. Blanking keeps line breaks,
    as the prose's mask does. A fence is taken only when no container can be open around it
    (unindented, or no list item or quote marker before it) and no line before it, since the
    last fence, starts with ``<`` (an HTML block could hold it); from the first line where that
    is uncertain (such a fence, a fence run after container markers or deeper indentation, a
    lone CR), ``limit`` says the body is not known.
    """
    size = len(body)
    limit = size
    if "\r" in body:
        lone_cr = _LONE_CR.search(body)
        if lone_cr is not None:
            limit = lone_cr.start()
    container_at = -1  # the first line that may open a container, looked for when needed
    pieces: list[str] = []
    copied = 0  # body[:copied] is in pieces
    pos = 0
    ticks_at, tildes_at = body.find("```", 0, limit), body.find("~~~", 0, limit)
    while True:
        if 0 <= ticks_at < pos:
            ticks_at = body.find("```", pos, limit)
        if 0 <= tildes_at < pos:
            tildes_at = body.find("~~~", pos, limit)
        at = ticks_at if tildes_at < 0 or 0 <= ticks_at < tildes_at else tildes_at
        if at < 0 or at >= limit:
            break
        line_start, line_end = _line_around(body, at)
        indent = at - line_start
        prefix = body[line_start:at]
        if indent > 3 or prefix.strip(" "):
            if _CONTAINER_PREFIX.issuperset(prefix):  # a fence in a container, or indented code
                limit = line_start
                break
            pos = line_end  # inside a line of text: a code span's backticks at most
            continue
        if indent:
            if container_at < 0:
                container = _CONTAINER_START.search(body)
                container_at = size if container is None else container.start()
            if container_at < line_start:
                limit = line_start
                break
        if _html_block_may_open(body, copied, line_start):
            limit = line_start
            break
        char = body[at]
        width = _run_width(body, at, char)
        if char == "`" and body.find("`", at + width, line_end) >= 0:
            pos = line_end  # not a fence: an info string never holds a backtick
            continue
        close_end = _closing_fence_end(body, char, width, line_end + 1, limit)
        if close_end < 0:
            if limit < size:  # unclosed before an unknown part
                limit = line_start
                break
            close_end = size
        pieces.append(body[copied:line_start])
        pieces.append(_blank_lines(body[line_start:close_end]))
        copied = pos = close_end
        if pos >= size:
            break
    if not pieces:
        return body, limit
    pieces.append(body[copied:])
    return "".join(pieces), limit


def _html_block_may_open(body: str, start: int, end: int) -> bool:
    """Whether a line within ``body[start:end]`` starts with ``<`` (after container markers)."""
    at = body.find("<", start, end)
    while at >= 0:
        line_start = body.rfind("\n", 0, at) + 1
        if _CONTAINER_PREFIX.issuperset(body[line_start:at]):
            return True
        at = body.find("<", at + 1, end)
    return False


def _closing_fence_end(body: str, char: str, width: int, start: int, limit: int) -> int:
    """The end of the first line from ``start`` closing a fence of ``width`` ``char``s (not past
    ``limit``), or -1."""
    mark = char * 3
    at = body.find(mark, start, limit)
    while at >= 0:
        line_start, line_end = _line_around(body, at)
        if line_end > limit:
            return -1
        if at - line_start <= 3 and not body[line_start:at].strip(" "):
            run = _run_width(body, at, char)
            if run >= width and not body[at + run:line_end].strip(" \t\r"):
                return line_end
        at = body.find(mark, line_end, limit)
    return -1


def _blank_lines(text: str) -> str:
    """``text`` with every character but LF and CR turned into a space."""
    return "\n".join(" " * (len(line) - 1) + "\r" if line.endswith("\r") else " " * len(line)
                     for line in text.split("\n"))


def _run_width(text: str, at: int, char: str) -> int:
    end = at
    size = len(text)
    while end < size and text[end] == char:
        end += 1
    return end - at


_BLANK = bytes(0x20 if b not in (0x0A, 0x0D) else b for b in range(256))


def _apply_mask(data: bytes, spans: array) -> bytes:
    """Blank every masked byte except LF and CR (line structure is kept); ``spans`` is flat
    (start, end) pairs."""
    if not spans:
        return data
    buf = bytearray(data)
    ends = iter(spans)
    for s, e in zip(ends, ends):
        buf[s:e] = data[s:e].translate(_BLANK)
    return bytes(buf)


_QUOTE_PREFIX = re.compile(rb"^[ \t]*(?:>[ \t]?)+")


def _headings(data: bytes, lines: _LineIndex, raw: list) -> list[Heading]:
    bases = []
    for level, start, end, _texts in raw:
        block = data[start:end].rstrip(b"\r\n")
        first = block.split(b"\n", 1)[0].rstrip(b"\r")
        if first.lstrip(b" ").startswith(b"#"):
            source = atx_content(first)
        else:
            parts = block.split(b"\n")
            source = _QUOTE_PREFIX.sub(b"", parts[-2]) if len(parts) >= 2 else parts[0]
        bases.append(heading_id_base(source))
    ids = unique_heading_ids(bases)
    return [
        Heading(level, text, anchor, lines.line_of(start), start, end)
        for (level, start, end, text), anchor in zip(raw, ids)
    ]


def _scan_links(prose: str, first_line: int, analysis: BodyAnalysis) -> None:
    """Run the line scanner on the prose lines that contain ``](`` (no other line has a link)."""
    line_no, counted = first_line, 0
    for start, end in _link_lines(prose):
        line_no += prose.count("\n", counted, start)
        counted = start
        for target in scan_line_links(prose[start:end]):
            analysis.add_link(sys.intern(target), line_no)  # bundles repeat their targets


def _scan_footnotes(data, prose_bytes, lines, blocks, link_spans, analysis) -> None:
    if b"[^" not in data:
        return
    prose = prose_bytes.decode("utf-8", errors="replace")
    prose_lines = prose.split("\n")
    def_spans: list[tuple[int, int]] = []
    line_offsets = [0]
    pos = data.find(b"\n")
    while pos >= 0:
        line_offsets.append(pos + 1)
        pos = data.find(b"\n", pos + 1)
    i = 0
    while i < len(prose_lines):
        m = _FOOTNOTE_DEF.match(prose_lines[i].rstrip("\r"))
        if not m:
            i += 1
            continue
        text = m.group(2)
        start_line = i
        j = i + 1
        while j < len(prose_lines):
            nxt = prose_lines[j].rstrip("\r")
            if nxt.strip() == "":
                k = j
                while k < len(prose_lines) and prose_lines[k].strip() == "":
                    k += 1
                if k < len(prose_lines) and _indent_cols(prose_lines[k]) >= 4:
                    text += "\n" * (k - j) + "\n" + prose_lines[k].rstrip("\r")
                    j = k + 1
                    continue
                break
            if _indent_cols(nxt) >= 4:
                text += "\n" + nxt
                j += 1
                continue
            break
        raw = prose_lines[i][: m.start(2)].strip()
        analysis.footnote_defs.append(FootnoteDef(m.group(1), text, raw, lines.first + start_line))
        s = line_offsets[start_line]
        e = line_offsets[j] if j < len(line_offsets) else len(data)
        def_spans.append((s, e))
        i = j
    for bstart, bend in blocks:
        seg = prose_bytes[bstart:bend].decode("utf-8", errors="replace")
        for m in _FOOTNOTE_REF.finditer(seg):
            ms = bstart + len(seg[: m.start()].encode("utf-8"))
            me = ms + len(m.group(0).encode("utf-8"))
            if _odd_backslashes(prose_bytes, ms) or (ms > 0 and prose_bytes[ms - 1 : ms] == b"!"):
                continue
            if prose_bytes[me : me + 1] == b"[":
                continue
            if any(s < me and ms < e for s, e in def_spans):
                continue
            if any(s < me and ms < e and not (s == ms and e == me) for s, e in link_spans):
                continue
            analysis.footnote_refs.append(FootnoteRef(m.group(1), m.group(0), lines.line_of(ms)))


def _odd_backslashes(data: bytes, pos: int) -> bool:
    n = 0
    while pos - n - 1 >= 0 and data[pos - n - 1] == 0x5C:
        n += 1
    return n % 2 == 1


def _indent_cols(line: str) -> int:
    cols = 0
    for ch in line:
        if ch == " ":
            cols += 1
        elif ch == "\t":
            cols += 4 - cols % 4
        else:
            break
    return cols
