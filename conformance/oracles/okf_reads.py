"""The OKF read tools restated over the fixture model: cards, staleness, raw text, sections, graph.

Rules from spec/okf/contract/read.md (cards, staleness at the day and instant boundaries, raw text,
search_sections hits over the model's files via ``okf_sections``, the v0.2 projection) and the tool
table's ordering fields.
Pure functions of a :class:`Bundle` and the call's arguments; the checks compare them with answers.
"""

from __future__ import annotations

import hashlib
import re
from datetime import date, datetime, timedelta, timezone

from knowspec.conformance.fixtures.model import (
    Bundle, Concept, Source, Window, render_body, render_document, render_frontmatter,
)
from knowspec.conformance.oracles import okf_sections as sections

DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def file_bytes(concept: Concept) -> bytes:
    return render_document(concept).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _instant(text: str) -> datetime | None:
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo is not None and "T" in text else None


def stale_value(stale_after: str, as_of: str | None, profile: str = "date-3fcbb9f",
                tool: str = "list_concepts") -> bool | None:
    """spec/okf/contract/read.md §2: inclusive boundary; no as_of → null; invalid stale_after → null (list_concepts
    under the date profile: false)."""
    if as_of is None:
        return None
    if profile == "date-3fcbb9f":
        valid = bool(DATE.fullmatch(stale_after or ""))
        if not valid:
            return False if tool == "list_concepts" else None
        return date.fromisoformat(as_of[:10]) >= date.fromisoformat(stale_after)
    limit, at = _instant(stale_after or ""), _instant(as_of)
    if limit is None or at is None:
        return None
    return at >= limit


def valid_temporal(value: str, profile: str = "date-3fcbb9f") -> str | None:
    """A profile-dependent value (stale_after, a source's last_modified, a window's end) when valid
    for the profile (read.md §2: a date, or an offset date-time; never converted), else None."""
    if profile == "date-3fcbb9f":
        return value if DATE.fullmatch(value or "") else None
    return value if _instant(value or "") is not None else None


def valid_window(window: Window | None, profile: str = "date-3fcbb9f") -> bool:
    """read.md §1.4: both ends valid for the profile and ``from`` not after ``to`` (equal allowed)."""
    if window is None or any(valid_temporal(end, profile) is None for end in window):
        return False
    if profile == "date-3fcbb9f":
        return date.fromisoformat(window[0]) <= date.fromisoformat(window[1])
    start, end = _instant(window[0]), _instant(window[1])
    return start is not None and end is not None and start <= end


def valid_source(source: Source, profile: str = "date-3fcbb9f") -> bool:
    """read.md §1.4: a non-blank resource and every written optional field valid, the temporal
    ones for the profile."""
    written = [v for v in (source.id, source.title, source.author) if v]
    return bool(source.resource.strip()) and all(v.strip() for v in written) \
        and (source.usage_count is None or source.usage_count >= 0) \
        and (not source.last_modified or valid_temporal(source.last_modified, profile) is not None) \
        and (source.usage_window is None or valid_window(source.usage_window, profile))


def expected_cards(bundle: Bundle, as_of: str | None = None, profile: str = "date-3fcbb9f") -> list[dict]:
    """list_concepts cards (the fields the fixture fixes), sorted by concept ID byte-wise."""
    cards = []
    for c in sorted(bundle.concepts, key=lambda c: c.id.encode()):
        cards.append({"id": c.id, "type": c.type, "title": c.title, "path": c.path,
                      "stale_after": valid_temporal(c.stale_after, profile),
                      "stale": stale_value(c.stale_after, as_of, profile),
                      "source_count": sum(1 for s in c.sources if valid_source(s, profile))})
    return cards


def legacy_summaries(bundle: Bundle) -> list[dict]:
    """list_concepts' custom text: the legacy {"concepts": [{id, type, title, path}]} in card order,
    with the cards' values (a blank type or title ``""``) or the raw frontmatter strings: the
    contract names the keys, not which of the two a blank one takes (equal when none is blank)."""
    ordered = sorted(bundle.concepts, key=lambda c: c.id.encode())

    def summary(typed: bool) -> dict:
        shown = (lambda v: v if v.strip() else "") if typed else (lambda v: v)
        return {"concepts": [{"id": c.id, "type": shown(c.type), "title": shown(c.title), "path": c.path}
                             for c in ordered]}

    both = [summary(True), summary(False)]
    return both[:1] if both[0] == both[1] else both


def legacy_report(structured: dict) -> dict:
    """validate_bundle's custom text, from its structured answer: the legacy report, keys in
    upstream's order, each diagnostic as severity, file (left out when empty) and message."""
    conformance, guidance = structured.get("conformance") or {}, structured.get("guidance") or {}
    diagnostics = []
    for d in structured.get("diagnostics") or []:
        item = {"severity": d.get("severity")}
        if d.get("file"):
            item["file"] = d["file"]
        item["message"] = d.get("message")
        diagnostics.append(item)
    return {"scanned_files": structured.get("scanned_files"), "conformant": conformance.get("conformant"),
            "errors": conformance.get("errors"), "warnings": guidance.get("warnings"), "info": guidance.get("info"),
            "diagnostics": diagnostics}


def expected_read(concept: Concept) -> dict:
    """read_concept: the raw text is the file; the body and frontmatter are its parts."""
    return {"id": concept.id, "path": concept.path, "frontmatter_yaml": render_frontmatter(concept) + "\n",
            "body": render_body(concept), "raw": render_document(concept)}


def day_boundaries(stale_after: str) -> list[tuple[str, bool]]:
    """as_of values around a date stale_after: the day before is fresh, the day itself and after stale."""
    day = date.fromisoformat(stale_after)
    return [((day - timedelta(days=1)).isoformat(), False), (day.isoformat(), True),
            ((day + timedelta(days=1)).isoformat(), True)]


def instant_boundaries(stale_after: str) -> list[tuple[str, bool]]:
    """as_of values around an instant: one second before is fresh, the same instant (in UTC) stale."""
    limit = _instant(stale_after)
    assert limit is not None
    utc = limit.astimezone(timezone.utc)
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    return [((utc - timedelta(seconds=1)).strftime(fmt), False), (utc.strftime(fmt), True),
            ((utc + timedelta(days=1)).strftime(fmt), True)]


# ---- search_sections --------------------------------------------------------------------------

def section_terms(query: str) -> list[str]:
    """Distinct normalised words of the query, in order of first occurrence."""
    return sections.query_terms(query)


def sections_order_key(hit: dict) -> tuple:
    """score descending, then concept_id byte-wise, then line_start."""
    return (-float(hit.get("score") or 0), str(hit.get("concept_id", "")).encode(), hit.get("line_start") or 0)


def expected_section_hits(bundle: Bundle, query: str) -> list[dict]:
    """Every matching section of the bundle's concepts in contract order (all of them: the caller
    cuts at limit). The extra files of a sections fixture are indexes, logs or assets, never
    concepts, so the model's concepts are the whole corpus (less any named index.md or log.md)."""
    assert not any(name.endswith(".md") and name.rsplit("/", 1)[-1] not in sections.NOT_CONCEPTS
                   for name in bundle.extra_files), "a sections fixture's extra files hold no concept"
    corpus = sections.index_sections([(c.id, c.path, c.title, file_bytes(c)) for c in bundle.concepts
                                      if c.path.rsplit("/", 1)[-1] not in sections.NOT_CONCEPTS])
    return sections.expected_hits(corpus, section_terms(query))


# ---- get_semantic_graph ------------------------------------------------------------------------

def graph_references(bundle: Bundle) -> set[tuple[str, str]]:
    """(source, target) of every link that resolves to a concept ID, broken targets included."""
    return {(c.id, link.target) for c in bundle.concepts for link in c.links if link.resolves()}
