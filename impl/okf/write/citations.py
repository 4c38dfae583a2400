"""Legacy ``# Citations`` -> ``sources[]`` plus keyed footnotes (spec/okf/contract/write.md §5.5, read.md §1.8).

Pure and byte-exact. A v0.1 concept cites with numeric markers (``claim.[1]``) and one H1
``# Citations`` section of entries (``[1] [Title](https://…)``, ``[2] https://…``, or
unnumbered bullet / ordered-list items, whose list numbers are presentation, not citation
numbers). The conversion needs an explicit mapping per entry (selected by
``legacy_number``, exact ``legacy_entry`` text, or both) naming the ``source_id``; nothing is
guessed. Title and resource come from the mapping, else from the entry itself (so the
structured source shows what the legacy fallback showed); when both are given they must
agree. The rewrite replaces every parser-visible marker ``[n]`` with ``[^source_id]``,
replaces the whole section with one footnote definition per source, and returns the sources
to record in the frontmatter. Anything it cannot convert losslessly (foreign content in the
section, code or HTML inside it, markers without an entry, unmapped or ambiguous entries,
label collisions, conflicting existing footnotes) raises ``CitationBlocked`` carrying the
body byte span of the offending text and the manual action that resolves it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from knowspec.impl.okf.parsing.markdown import analyse_body
from knowspec.impl.okf.concept.projection import normalize_label

_NUMBER_LIMIT = 1_000_000
# The rest of the line is taken whole and its trailing blanks cut in code: a lazy ``(.*?)[ \t]*$``
# retried the blanks from every position, quadratic on a line of spaces (100,000: 37 s).
_ENTRY = re.compile(r"^ {0,3}(?:(?:[-*+]|\d{1,9}[.)])[ \t]+)?(?:\[(\d+)\][ \t]*)?(.*)$")
_LINK = re.compile(r'^\[([^\[\]\r\n]*)\]\(([^()\s<>]+)(?:[ \t]+"([^"\\\r\n]*)")?\)$')
_AUTOLINK = re.compile(r"^<([A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]+)>$")
_BARE_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>()\[\]]+$")
_ATX_CITATIONS = re.compile(rb"^ {0,3}#[ \t]+Citations[ \t]*(?:#+[ \t]*)?\r?$")
_MARKER = re.compile(rb"(?<![\w\]\\])\[(\d+)\](?![(\[:])")
_REF = re.compile(rb"\[\^([^\]\r\n]+)\]")
_DEF = re.compile(rb"(?m)^ {0,3}\[\^([^\]\r\n]+)\]:")
_FORBIDDEN_ID = re.compile(r"[\[\]\r\n]")


class CitationBlocked(Exception):
    """The section cannot be converted losslessly; ``start``/``end`` are body byte offsets."""

    def __init__(self, code: str, message: str, start: int, end: int, action: str | None) -> None:
        super().__init__(message)
        self.code, self.message, self.start, self.end, self.action = code, message, start, end, action


@dataclass(frozen=True)
class Entry:
    number: int          # 0 for an unnumbered entry
    raw: str             # the entry line without indentation, trailing blanks or line ending
    title: str
    resource: str
    link_title: str
    start: int           # body byte span of the entry line (without its line ending)
    end: int


@dataclass(frozen=True)
class Section:
    start: int           # body byte offset of the heading line
    end: int             # body byte offset where the section ends (next H1 or end of body)
    heading_end: int
    entries: tuple[Entry, ...]


@dataclass(frozen=True)
class Converted:
    body: str
    sources: tuple[dict, ...]    # {id, resource[, title]} in first-citation order


def _blocked(code: str, message: str, span: tuple[int, int], action: str | None = "normalize_citations_section"):
    return CitationBlocked(code, message, span[0], span[1], action)


def _parse_entry(line: str, start: int, end: int) -> Entry | None:
    m = _ENTRY.match(line)
    rest = m.group(2).rstrip(" \t") if m is not None else ""
    if m is None or not rest:
        return None
    number = int(m.group(1)) if m.group(1) is not None else 0
    if m.group(1) is not None and not 1 <= number <= _NUMBER_LIMIT:
        return None
    raw = line.strip(" \t")
    link = _LINK.match(rest)
    if link:
        return Entry(number, raw, link.group(1).strip(), link.group(2), link.group(3) or "", start, end)
    auto = _AUTOLINK.match(rest) or _BARE_URL.match(rest)
    if auto:
        return Entry(number, raw, "", auto.group(1) if auto.re is _AUTOLINK else rest, "", start, end)
    return None


def find_section(body: str, analysis=None) -> Section | None:
    """The single H1 ``# Citations`` section, its entries, or ``CitationBlocked``."""
    if "Citations" not in body:
        return None
    analysis = analysis or analyse_body(body)
    data = body.encode("utf-8")
    prose = analysis.prose.encode("utf-8")
    if len(prose) != len(data):
        raise _blocked("unsupported_citations_markup", "the body's code or HTML cannot be isolated", (0, len(data)))
    h1 = [h for h in analysis.headings if h.level == 1]
    found = [h for h in h1 if h.text.strip() == "Citations"]
    if not found:
        return None
    if len(found) > 1:
        raise _blocked("multiple_citations_sections", "the document has more than one # Citations section",
                       (found[0].start, found[-1].end))
    head = found[0]
    line_end = data.find(b"\n", head.start)
    line_end = len(data) if line_end < 0 else line_end
    if not _ATX_CITATIONS.match(data[head.start:line_end]):
        raise _blocked("unsupported_citations_heading", "only an ATX '# Citations' heading is converted",
                       (head.start, head.end))
    following = [h for h in analysis.headings if h.start > head.start]
    end = following[0].start if following else len(data)
    if following and following[0].level > 1:
        raise _blocked("unowned_citations_content", "the # Citations section contains a sub-heading",
                       (following[0].start, following[0].end))
    entries: list[Entry] = []
    pos = line_end + 1 if line_end < len(data) else len(data)
    while pos < end:
        nxt = data.find(b"\n", pos, end)
        stop = end if nxt < 0 else nxt
        chunk = data[pos:stop].rstrip(b"\r")
        span = (pos, pos + len(chunk))
        if chunk.strip(b" \t"):
            if prose[span[0]:span[1]] != chunk:
                raise _blocked("opaque_citations_content", "code or HTML inside # Citations is not converted", span)
            entry = _parse_entry(chunk.decode("utf-8"), *span)
            if entry is None:
                raise _blocked("unowned_citations_content", "a line of # Citations is not a citation entry", span)
            entries.append(entry)
        pos = stop + 1
    if not entries:
        raise _blocked("empty_citations_section", "the # Citations section has no entries", (head.start, head.end))
    return Section(head.start, end, line_end, tuple(entries))


def _markers(prose: bytes, section: Section) -> list[tuple[int, int, int]]:
    """``(number, start, end)`` of numeric claim markers outside code and outside the section."""
    found = []
    for m in _MARKER.finditer(prose):
        if section.start <= m.start() < section.end:
            continue
        found.append((int(m.group(1)), m.start(), m.end()))
    return found


def _selects(mapping: dict, entry: Entry) -> bool:
    number, raw = mapping.get("legacy_number") or 0, mapping.get("legacy_entry") or ""
    if not number and not raw:
        return False
    return (not number or number == entry.number) and (not raw or raw == entry.raw)


def _span(*entries: Entry) -> tuple[int, int]:
    return min(e.start for e in entries), max(e.end for e in entries)


def resolve(entries: tuple[Entry, ...], mappings: list[dict]) -> list[dict]:
    """One mapping per entry, with title/resource projected; ``CitationBlocked`` otherwise."""
    by_number: dict[int, Entry] = {}
    for e in entries:
        if e.number and e.number in by_number:
            raise _blocked("duplicate_citation_number", f"citation number {e.number} appears twice",
                           _span(by_number[e.number], e), "disambiguate_citation_entry")
        by_number[e.number] = e
    for i, m in enumerate(mappings):
        hits = [e for e in entries if _selects(m, e)]
        if len(hits) > 1:
            raise _blocked("ambiguous_citation_mapping", f"mapping entries[{i}] selects several citations",
                           _span(*hits), "disambiguate_citation_entry")
        if not hits:
            raise _blocked("unmatched_citation_mapping", f"mapping entries[{i}] selects no citation entry",
                           _span(*entries), "provide_citation_mapping")
    resolved: list[dict[str, Any]] = []
    seen: dict[str, Any] = {}
    for e in entries:
        chosen = [m for m in mappings if _selects(m, e)]
        if not chosen:
            raise _blocked("unresolved_citation_entry", "a citation entry has no mapping", (e.start, e.end),
                           "provide_citation_mapping")
        if len(chosen) > 1:
            raise _blocked("ambiguous_citation_destination", "several mappings select the same citation entry",
                           (e.start, e.end), "disambiguate_citation_destination")
        m = chosen[0]
        sid = m["source_id"]
        if not sid or _FORBIDDEN_ID.search(sid) or sid != sid.strip():
            raise _blocked("invalid_source_id", "source_id cannot be a footnote label", (e.start, e.end),
                           "provide_citation_mapping")
        title, resource = _agree("title", m.get("title") or "", e.title, e), _agree("resource", m.get("resource") or "", e.resource, e)
        if not resource:
            raise _blocked("missing_citation_resource", "the citation has no resource", (e.start, e.end),
                           "provide_citation_mapping")
        item = {"id": sid, "resource": resource, "title": title, "link_title": e.link_title, "entry": e}
        prev = seen.get(normalize_label(sid))
        if prev is not None:
            if prev["id"] != sid:
                raise _blocked("normalized_footnote_label_collision", "two source ids normalize to one footnote label",
                               _span(prev["entry"], e), "disambiguate_citation_entry")
            if (prev["title"], prev["resource"], prev["link_title"]) != (title, resource, e.link_title):
                raise _blocked("reused_source_metadata_conflict", f"source {sid} is reused with other metadata",
                               _span(prev["entry"], e), "disambiguate_citation_entry")
        else:
            seen[normalize_label(sid)] = item
        resolved.append(item)
    return resolved


def _agree(field: str, mapped: str, legacy: str, e: Entry) -> str:
    if mapped and legacy and mapped != legacy:
        raise _blocked(f"citation_{field}_mismatch", f"the mapping's {field} differs from the citation entry",
                       (e.start, e.end), "provide_citation_mapping")
    return mapped or legacy


def definition(item: dict) -> str:
    """The footnote definition line (without line ending) for one source."""
    title, resource, link_title = item["title"], item["resource"], item["link_title"]
    e = item["entry"]
    if re.search(r"[\s<>()]", resource) or re.search(r"[\[\]\r\n]", title) or re.search(r'["\\]', link_title):
        raise _blocked("unsupported_footnote_definition", "the citation cannot be written as a footnote",
                       (e.start, e.end))
    if not title and not link_title:
        return f"[^{item['id']}]: {resource}"
    suffix = f' "{link_title}"' if link_title else ""
    return f"[^{item['id']}]: [{title}]({resource}{suffix})"


def convert(body: str, mappings: list[dict]) -> Converted | None:
    """The converted body and the sources to record; None when the body has no section."""
    analysis = analyse_body(body) if "Citations" in body else None
    section = find_section(body, analysis)
    if section is None:
        if mappings:
            raise _blocked("missing_citations_section", "citation mappings name a document without # Citations",
                           (0, 0), "provide_citation_mapping")
        return None
    assert analysis is not None  # find_section finds no section without an analysis
    data = body.encode("utf-8")
    prose = analysis.prose.encode("utf-8")
    resolved = resolve(section.entries, mappings)
    number_to_id = {item["entry"].number: item["id"] for item in resolved if item["entry"].number}
    markers = _markers(prose, section)
    for number, start, end in markers:
        if number not in number_to_id:
            raise _blocked("unresolved_claim_marker", f"marker [{number}] has no citation entry", (start, end))
    _check_existing_labels(prose, section, resolved)
    newline = "\r\n" if b"\r\n" in data else "\n"
    lines: list[str] = []
    unique: list[dict[str, Any]] = []
    for item in resolved:
        if item["id"] not in [u["id"] for u in unique]:
            unique.append(item)
            lines.append(definition(item))
    block = newline.join(lines) + newline
    before = data[:section.start]
    if before and not (before.endswith(b"\n\n") or before.endswith(b"\r\n\r\n")):
        block = newline + block
    if section.end < len(data):
        block += newline
    patches = [(s, e, f"[^{number_to_id[n]}]".encode("utf-8")) for n, s, e in markers]
    patches.append((section.start, section.end, block.encode("utf-8")))
    out, pos = [], 0
    for start, end, text in sorted(patches):
        out += [data[pos:start], text]
        pos = end
    out.append(data[pos:])
    new_body = b"".join(out).decode("utf-8")
    _replay_check(new_body, unique, (section.start, section.end))
    sources = tuple({"id": u["id"], "resource": u["resource"], **({"title": u["title"]} if u["title"] else {})}
                    for u in unique)
    return Converted(new_body, sources)


def _check_existing_labels(prose: bytes, section: Section, resolved: list[dict]) -> None:
    """Existing footnotes may not collide with the new labels (a same-label definition would
    duplicate the one this conversion writes)."""
    wanted = {normalize_label(i["id"]): i["id"] for i in resolved}
    for rx, is_def in ((_REF, False), (_DEF, True)):
        for m in rx.finditer(prose):
            if section.start <= m.start() < section.end:
                continue
            label = m.group(1).decode("utf-8", "replace")
            raw = wanted.get(normalize_label(label))
            if raw is None:
                continue
            if raw != label:
                raise _blocked("normalized_footnote_label_collision", f"footnote [^{label}] collides with {raw}",
                               (m.start(), m.end()), "disambiguate_citation_entry")
            if is_def:
                raise _blocked("conflicting_footnote_definition", f"footnote [^{label}] is already defined",
                               (m.start(), m.end()), "reconcile_sources_and_citations")


def _replay_check(new_body: str, unique: list[dict], span: tuple[int, int]) -> None:
    """The rewritten body must have no Citations section, no numeric marker left, and exactly
    one definition per converted source."""
    analysis = analyse_body(new_body)
    prose = analysis.prose.encode("utf-8")
    defs = [normalize_label(d.label) for d in analysis.footnote_defs]
    gone = not any(h.level == 1 and h.text.strip() == "Citations" for h in analysis.headings)
    if not gone or _MARKER.search(prose) or any(defs.count(normalize_label(u["id"])) != 1 for u in unique):
        raise _blocked("migration_replay_mismatch", "the converted body does not re-read as keyed footnotes", span)
