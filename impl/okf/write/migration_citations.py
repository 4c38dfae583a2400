"""Migration inputs and document steps for legacy ``# Citations`` (spec/okf/contract/write.md §5.1, §5.5).

Decoding applies the store-level mapping checks; the document step runs the pure
``citations`` conversion on one concept and records the converted sources in its
frontmatter. Blockers carry file byte spans (the conversion reports body offsets).
"""

from __future__ import annotations

from typing import Any

from knowspec.impl.errors import ToolError
from knowspec.impl.okf.write.document import Document
from knowspec.impl.okf.write.inputs import check_text, invalid
from knowspec.impl.okf.write.patch import desired_source
from knowspec.impl.okf.write.paths import is_revision_path
from knowspec.impl.okf.write.yaml_edit import Editor, RootEdits
from knowspec.impl.okf.write.yaml_text import lookup


def decode_citations(citations: list) -> list[dict]:
    """Store-level mapping checks (spec/okf/contract/write.md §5.1): unique paths, a selector per entry, no duplicate
    numbers, no entry-only selector reusing raw text, one title/resource per source id."""
    seen, total, out = set(), 0, []
    for i, m in enumerate(citations):
        if not is_revision_path(m.get("path") or "") or not m["path"].endswith(".md") or m["path"] in seen:
            raise invalid(f"citation_mappings[{i}].path must be a unique bundle Markdown path")
        seen.add(m["path"])
        entries = [dict(e) for e in m.get("entries") or []]
        total += len(entries)
        numbers: set[int | None] = set()
        raws: dict[str, Any] = {}
        metadata: dict[str, Any] = {}
        for j, e in enumerate(entries):
            where = f"citation_mappings[{i}].entries[{j}]"
            check_text(f"{where}.source_id", e.get("source_id"))
            for key in ("title", "resource"):
                if e.get(key):
                    check_text(f"{where}.{key}", e[key])
            number, raw = e.get("legacy_number"), e.get("legacy_entry")
            if number is None and not raw:
                raise invalid(f"{where} needs legacy_number or legacy_entry")
            if number is not None and (not isinstance(number, int) or not 1 <= number <= 1_000_000):
                raise invalid(f"{where}.legacy_number must be 1..1000000")
            if number is not None and number in numbers:
                raise invalid(f"{where}.legacy_number repeats another entry")
            numbers.add(number)
            if raw is not None:
                check_text(f"{where}.legacy_entry", raw.replace("\t", " ").replace("\n", " ").replace("\r", " "))
                if raw in raws and (number is None or raws[raw] is None):
                    raise invalid(f"{where}.legacy_entry overlaps another entry-only selector")
                raws[raw] = number
            meta = (e.get("title") or "", e.get("resource") or "")
            if metadata.setdefault(e["source_id"], meta) != meta:
                raise invalid(f"{where}.source_id is reused with another title or resource")
        out.append({"path": m["path"], "entries": entries})
    if total > 10_000:
        raise ToolError("resource_limit", "tool input exceeds the advertised schema limits")
    return out


def label_collisions(inp: Any) -> list[dict]:
    """Supplied source ids of one document that differ but normalize to one footnote label."""
    from knowspec.impl.okf.concept.projection import normalize_label

    found = []
    for m in inp.citations:
        labels: dict[str, str] = {}
        for e in m["entries"]:
            other = labels.setdefault(normalize_label(e["source_id"]), e["source_id"])
            if other != e["source_id"]:
                found.append({"code": "normalized_footnote_label_collision", "path": m["path"],
                              "location": {"start": 0, "end": 0},
                              "message": f"source ids {other} and {e['source_id']} share one footnote label"})
                break
    return found


def node_span(doc: Document, found) -> tuple[int, int]:
    """File byte span of a frontmatter ``(key, value)`` pair."""
    if not found:
        return frontmatter_span(doc)
    key, value = found
    head = len(doc.open_line.encode("utf-8"))
    return (head + len(doc.frontmatter[:key.start_mark.index].encode("utf-8")),
            head + len(doc.frontmatter[:value.end_mark.index].encode("utf-8")))


def frontmatter_span(doc: Document) -> tuple[int, int]:
    head = len(doc.open_line.encode("utf-8"))
    return head, head + len(doc.frontmatter.encode("utf-8"))


def has_section(doc: Document) -> bool:
    from knowspec.impl.okf.write.citations import CitationBlocked, find_section

    try:
        return find_section(doc.body) is not None
    except CitationBlocked:
        return True


def section_span(doc: Document) -> tuple[int, int]:
    from knowspec.impl.okf.write.citations import CitationBlocked, find_section

    at = len((doc.open_line + doc.frontmatter + doc.close_line).encode("utf-8"))
    try:
        section = find_section(doc.body)
    except CitationBlocked as exc:
        return at + exc.start, at + exc.end
    return (at + section.start, at + section.heading_end) if section else (0, 0)


def _sources_entry(doc: Document) -> Any:
    root = Editor(doc.frontmatter).root
    return lookup(root, "sources") if root is not None else None


def convert_document(path: str, original: Document, doc: Document, mappings: list[dict], out: Any,
                     edits: RootEdits | None = None) -> Document:
    """Convert the ``# Citations`` section of one concept; blockers carry file byte spans.

    ``edits``: the earlier step's edits that gave ``doc.frontmatter``, on the frontmatter's one
    composition (None: ``doc.frontmatter`` is composed here)."""
    from knowspec.impl.okf.write.citations import CitationBlocked, convert

    body_at = len((original.open_line + original.frontmatter + original.close_line).encode("utf-8"))
    if not doc.has_frontmatter:
        edits = None
    elif edits is None:
        edits = RootEdits(Editor(doc.frontmatter, doc.newline))
    if edits is not None and edits.has("sources"):
        out.block("sources_citations_conflict", path, "the concept has both sources and # Citations",
                  "reconcile_sources_and_citations", node_span(original, _sources_entry(original)))
        return doc
    try:
        converted = convert(doc.body, mappings)
    except CitationBlocked as exc:
        span = (body_at + exc.start, body_at + exc.end) if exc.end else (0, 0)
        out.block(exc.code, path, exc.message, exc.action, span)
        return doc
    if converted is None:
        return doc
    if edits is None:
        out.block("migration_document_invalid", path, "a concept without frontmatter cannot record sources", None,
                  (body_at, body_at))
        return doc
    # One edit for the whole family (the family is absent: checked above).
    text = edits.append("sources", [desired_source(s) for s in converted.sources]).text()
    return Document(doc.open_line, text, doc.close_line, converted.body)
