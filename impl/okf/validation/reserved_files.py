"""Structure rules of the reserved files ``index.md`` and ``log.md`` (spec/okf/contract/read.md §1.10): pure functions.

Both return ``(field, message)`` findings; the caller turns them into ERROR diagnostics.
Blocks come from pyromark's top-level events; raw source lines decide indentation questions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pyromark

from knowspec.impl.okf.concept.temporal import parse_date
from knowspec.impl.okf.bundle.version import go_quote

_DATE_LOOKING = re.compile(r"^\d{4}-\d{1,2}-\d{1,2}$")


@dataclass
class Block:
    """A top-level block: ``kind`` (heading, list, paragraph, …), byte range, heading level and
    text, list items (byte ranges, has-link flag, nested-block flag)."""

    kind: str
    start: int
    end: int
    level: int = 0
    text: str = ""
    items: list[tuple[int, int, bool, int | None]] = field(default_factory=list)  # start, end, link, nested at


def top_level_blocks(body: str) -> list[Block]:
    blocks: list[Block] = []
    depth = 0
    current: Block | None = None
    item: list | None = None
    item_depth = 0
    event: Any  # pyromark's event union: code below tells the kinds apart at run time
    tag: Any
    for event, rng in pyromark.events_with_range(body):
        if isinstance(event, dict) and "Start" in event:
            tag = event["Start"]
            name = next(iter(tag)) if isinstance(tag, dict) else tag
            if depth == 0:
                current = Block(str(name).lower(), rng["start"], rng["end"])
                if name == "Heading":
                    current.level = int(tag["Heading"]["level"][1:])
                blocks.append(current)
            elif current is not None and current.kind == "list":
                if name == "Item" and depth == 1:
                    item = [rng["start"], rng["end"], False, None]
                    item_depth = depth
                elif item is not None:
                    if name in ("Link", "Image"):
                        item[2] = True
                    elif item[3] is None and (
                        name == "List"
                        or (name not in ("Paragraph", "Emphasis", "Strong", "Strikethrough") and depth == item_depth + 1)
                    ):
                        item[3] = rng["start"]  # first nested block: quoted by the log rules
            depth += 1
        elif isinstance(event, dict) and "End" in event:
            depth -= 1
            tag = event["End"]
            name = next(iter(tag)) if isinstance(tag, dict) else tag
            if current is not None and current.kind == "list" and name == "Item" and depth == 1 and item is not None:
                current.items.append(tuple(item))
                item = None
        elif current is not None and current.kind == "heading" and depth >= 1:
            if isinstance(event, dict):
                for key in ("Text", "Code"):
                    if key in event:
                        current.text += event[key]
    return blocks


def _first_line(data: bytes, start: int) -> str:
    end = data.find(b"\n", start)
    line = data[start:] if end < 0 else data[start:end]
    return line.decode("utf-8", errors="replace").rstrip("\r")


def _line_start(data: bytes, offset: int) -> int:
    return data.rfind(b"\n", 0, offset) + 1


def index_findings(body: str, *, nested_empty_skipped: bool = False) -> list[tuple[str, str]]:
    """Body rules of an ``index.md``."""
    if nested_empty_skipped and body.strip() == "":
        return []
    blocks = top_level_blocks(body)
    out: list[tuple[str, str]] = []
    headings = [b for b in blocks if b.kind == "heading"]
    linked_total = 0
    seen_heading = False
    sections: list[dict] = []
    for block in blocks:
        if block.kind == "heading":
            seen_heading = True
            sections.append({"heading": block, "linked": 0, "prose": False})
            continue
        if block.kind == "list":
            for start, _end, has_link, _nested in block.items:
                if not seen_heading:
                    out.append(("body", "index.md list entry appears before any heading"))
                if not has_link:
                    out.append(("body", "index.md list entry should contain a Markdown link"))
                else:
                    linked_total += 1
                    if sections:
                        sections[-1]["linked"] += 1
        elif sections:
            sections[-1]["prose"] = True
    if not headings:
        out.append(("body", "index.md should contain at least one heading"))
        return out
    for i, section in enumerate(sections):
        if section["linked"]:
            continue
        heading = section["heading"]
        nxt = sections[i + 1]["heading"] if i + 1 < len(sections) else None
        if i == 0 and heading.level == 1 and (section["prose"] or (nxt is not None and nxt.level > 1)):
            continue
        out.append(("body", f"index.md section has no entries: {go_quote(heading.text)}"))
    if linked_total == 0:
        out.append(("body", "index.md should contain at least one linked list entry"))
    return out


def log_findings(body: str) -> list[tuple[str, str]]:
    """Body rules of a ``log.md``: newest-first level-2 date groups of flat list items."""
    if body.strip() == "":
        return []
    data = body.encode("utf-8")
    out: list[tuple[str, str]] = []
    group: dict | None = None
    groups: list[dict] = []
    any_date_heading = False
    previous = None
    for block in top_level_blocks(body):
        if block.kind == "heading":
            text = block.text.strip()
            if block.level == 2:
                any_date_heading = True
                group = {"text": text, "entries": 0}
                groups.append(group)
                day = parse_date(text)
                if day is None:
                    out.append(("body", f"log date heading is not ISO-8601 YYYY-MM-DD: {go_quote(text)}"))
                else:
                    if previous is not None and day > previous:
                        out.append(("body", f"log date headings should be newest first: {go_quote(text)}"))
                    previous = day
                continue
            if _DATE_LOOKING.match(text):
                any_date_heading = True
                raw = _first_line(data, _line_start(data, block.start)).strip()
                out.append(("body", f"log date heading should use level 2: {go_quote(raw)}"))
                continue
        if group is None:
            continue
        if block.kind == "list":
            for start, _end, _link, nested in block.items:
                line_start = _line_start(data, start)
                raw = _first_line(data, line_start)
                if start != line_start or raw[:1] in (" ", "\t"):
                    out.append(("body", f"log date group contains non-list entry: {go_quote(raw.strip())}"))
                elif nested is not None:
                    inner = _first_line(data, _line_start(data, nested)).strip()
                    out.append(("body", f"log date group contains non-list entry: {go_quote(inner)}"))
                    group["entries"] += 1
                else:
                    group["entries"] += 1
            continue
        raw = _first_line(data, _line_start(data, block.start)).strip()
        out.append(("body", f"log date group contains non-list entry: {go_quote(raw)}"))
    for g in groups:
        if g["entries"] == 0:
            out.append(("body", f"log date heading has no entries: {go_quote(g['text'])}"))
    if not any_date_heading:
        out.append(("body", "log.md should contain ISO-8601 date headings"))
    return out
