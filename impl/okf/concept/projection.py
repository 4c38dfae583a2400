"""Typed projection of a concept's frontmatter (spec/okf/contract/read.md §1.4, §1.8, §1.9, §2): pure rules.

Status and its state, trust tier, stale-after and staleness, sources under a profile, shared
usage window, generated/verified events, the Attested Computation contract, footnote
attributions and the v0.1 legacy fallbacks: the fields cards are made of. The cards themselves
are built by ``tools.read.concept_card`` (list_concepts) and ``tools.cards.card``
(search_concepts, get_neighbors, get_semantic_graph).
"""

from __future__ import annotations

import re
from typing import Any

from knowspec.impl.okf.parsing import typed
from knowspec.impl.okf.concept.temporal import DATE_PROFILE, AsOf, is_stale, parse_rfc3339, value_valid

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CITATIONS_HEADING = re.compile(r"^ {0,3}#[ \t]+Citations[ \t#]*$")  # matched against one line, its CR cut
_CITATION_ENTRY = re.compile(r"^\s{0,3}(?:[-*+]\s+)?\[(\d+)\]\s*\S")


# --- actors, trust, status ------------------------------------------------------------------

def valid_actor(value: Any) -> bool:
    """``human:<x>``, ``process:<x>`` or ``<producer>/<version>``; no edge spaces/controls.

    spec/okf/contract/read.md §1.9.
    """
    if type(value) is not str or value == "" or _CONTROL.search(value):
        return False
    if value[0].isspace() or value[-1].isspace():
        return False
    for prefix in ("human:", "process:"):
        if value.startswith(prefix):
            return value[len(prefix):].strip() != ""
    if value.count("/") == 1:
        producer, version = value.split("/")
        return producer.strip() != "" and version.strip() != ""
    return False


def _rfc3339_value(value: Any) -> bool:
    return typed.is_date_like(value) and parse_rfc3339(str(value)) is not None


def verification_events(fm: dict, *, actor_convention: bool = True) -> list[dict[str, str]]:
    """Valid ``verified`` events ``{by, at}`` (a bare mapping counts as a one-element list).

    Trust needs ``by`` to follow the actor convention; read_concept's ``projection.verified``
    lists every event with a non-empty actor (``actor_convention=False``)."""
    if typed.is_duplicated(fm, "verified"):
        return []
    value = typed.get(fm, "verified")
    items = [value] if isinstance(value, dict) else value if isinstance(value, list) else []
    out = []
    for item in items:
        if not isinstance(item, dict) or typed.is_duplicated(item, "by") or typed.is_duplicated(item, "at"):
            continue
        by, at = item.get("by"), item.get("at")
        actor_ok = valid_actor(by) if actor_convention else typed.is_str(by)
        if actor_ok and _rfc3339_value(at):
            out.append({"by": str(by), "at": str(at)})
    return out


def trust_tier(fm: dict) -> str:
    events = verification_events(fm)
    if not events:
        return "unverified"
    if any(e["by"].startswith("human:") for e in events):
        return "human-reviewed"
    return "machine-confirmed"


def status_state(fm: dict) -> dict[str, Any]:
    """``{present, valid, raw, effective}`` (spec/okf/contract/read.md §2 table)."""
    if not typed.present(fm, "status"):
        return {"present": False, "valid": True, "raw": None, "effective": "stable"}
    if typed.is_duplicated(fm, "status"):
        return {"present": True, "valid": False, "raw": "", "effective": None}
    value = fm["status"]
    if typed.is_str(value):
        return {"present": True, "valid": True, "raw": value, "effective": value}
    return {"present": True, "valid": False, "raw": typed.raw_scalar_text(value), "effective": None}


def stale_after(fm: dict, profile: str) -> str | None:
    if typed.is_duplicated(fm, "stale_after"):
        return None
    value = typed.get(fm, "stale_after")
    return str(value) if value is not typed.MISSING and value_valid(value, profile) else None


# --- sources and windows -------------------------------------------------------------------

def usage_window(value: Any, profile: str) -> dict[str, str] | None:
    """A valid ``{from, to}`` window (both ends valid, from <= to), else None."""
    if not isinstance(value, dict) or set(value.keys()) - {"from", "to"}:
        return None
    if typed.is_duplicated(value, "from") or typed.is_duplicated(value, "to"):
        return None
    start, end = value.get("from"), value.get("to")
    if not (value_valid(start, profile) and value_valid(end, profile)):
        return None
    if window_order_key(str(start), profile) > window_order_key(str(end), profile):
        return None
    return {"from": str(start), "to": str(end)}


def window_order_key(text: str, profile: str):
    if profile == DATE_PROFILE:
        return text
    inst = parse_rfc3339(text, strict_offset=True)
    return (inst.seconds, inst.nanos) if inst else (0, 0)


def source_entry(item: Any, profile: str) -> dict[str, Any] | None:
    """The read_concept item for a valid ``sources[]`` entry, or None when invalid."""
    if not isinstance(item, dict) or getattr(item, "duplicates", None):
        return None
    resource = item.get("resource")
    if not typed.is_str(resource):
        return None
    out: dict[str, Any] = {"id": "", "resource": resource, "title": "", "author": ""}
    for key in ("id", "title", "author"):
        if key in item:
            if not typed.is_str(item[key]):
                return None
            out[key] = item[key]
    out["usage_count"] = None
    if "usage_count" in item:
        if not typed.is_uint(item["usage_count"]):
            return None
        out["usage_count"] = str(item["usage_count"].value)
    out["last_modified"] = None
    if "last_modified" in item:
        if not value_valid(item["last_modified"], profile):
            return None
        out["last_modified"] = str(item["last_modified"])
    out["usage_window"] = None
    if "usage_window" in item:
        window = usage_window(item["usage_window"], profile)
        if window is None:
            return None
        out["usage_window"] = window
    return out


def valid_sources(concept, profile: str = DATE_PROFILE) -> list[dict[str, Any]]:
    fm = concept.frontmatter
    if typed.is_duplicated(fm, "sources"):
        return []
    value = typed.get(fm, "sources")
    if not isinstance(value, list):
        return []
    return [e for e in (source_entry(item, profile) for item in value) if e is not None]


# --- generated, legacy fallbacks -------------------------------------------------------------

def generated(fm: dict) -> dict[str, Any] | None:
    value = typed.get(fm, "generated")
    if typed.is_duplicated(fm, "generated") or not isinstance(value, dict):
        return None
    by = value.get("by") if not typed.is_duplicated(value, "by") else None
    at = value.get("at") if not typed.is_duplicated(value, "at") else None
    out = {"by": by if valid_actor(by) else None, "at": str(at) if _rfc3339_value(at) else None}
    return out if out["by"] is not None or out["at"] is not None else None


def generated_at(fm: dict) -> str | None:
    """The effective content-change time: ``generated.at`` when ``generated`` is present,
    else the legacy ``timestamp``; must be RFC 3339."""
    if typed.present(fm, "generated"):
        value = fm["generated"]
        if isinstance(value, dict) and not typed.is_duplicated(fm, "generated"):
            at = value.get("at")
            if not typed.is_duplicated(value, "at") and _rfc3339_value(at):
                return str(at)
        return None
    ts = typed.get(fm, "timestamp")
    if ts is not typed.MISSING and not typed.is_duplicated(fm, "timestamp") and _rfc3339_value(ts):
        return str(ts)
    return None


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_LABEL_SPACE = re.compile(r"[ \t\n\r]+")
_H1 = re.compile(r"^ {0,3}#(?:[ \t]|$)")
# What a line must hold to open or close a fence or to be the Citations heading: up to the
# section no other line changes the scan's state.
_LINE_MARKS = ("```", "~~~", "Citations")


def citation_entry_numbers(body: str) -> list[int]:
    """Line-level scan for an H1 ``# Citations`` outside fenced code and its numbered entries.

    No Markdown parse, so listing stays cheap: fences are tracked by their opening run, the
    section ends at the next H1 outside code. Up to the section only the lines holding a fence
    run or ``Citations`` are looked at (found with ``str.find``): most of a body's lines are
    prose, and this runs for every concept of a listing."""
    fence: str | None = None
    for start in _marked_line_starts(body):
        end = body.find("\n", start)
        end = len(body) if end < 0 else end
        line = body[start:end].rstrip("\r")
        fence, outside = _fence_step(fence, line)
        if outside and _H1.match(line) and _CITATIONS_HEADING.match(line):
            return _section_entry_numbers(body[end + 1:].split("\n"))
    return []


def _marked_line_starts(body: str) -> list[int]:
    """The start offsets of the lines holding one of ``_LINE_MARKS``, ascending."""
    starts = set()
    for mark in _LINE_MARKS:
        at = body.find(mark)
        while at >= 0:
            starts.add(body.rfind("\n", 0, at) + 1)
            line_end = body.find("\n", at)
            if line_end < 0:
                break
            at = body.find(mark, line_end)
    return sorted(starts)


def _fence_step(fence: str | None, line: str) -> tuple[str | None, bool]:
    """``(fence open after line, whether the line lies outside fenced code)``: a line opening
    or closing a fence is inside it."""
    m = _FENCE.match(line)
    if fence is None:
        return (m.group(1), False) if m else (None, True)
    if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and line.strip() == m.group(1):
        return None, False
    return fence, False


def _section_entry_numbers(lines: list[str]) -> list[int]:
    """The entry numbers of the lines after a ``# Citations`` heading, up to the next H1 outside
    fenced code."""
    numbers: list[int] = []
    fence: str | None = None
    for line in lines:
        line = line.rstrip("\r")
        fence, outside = _fence_step(fence, line)
        if not outside:
            continue
        if _H1.match(line):
            break
        entry = _CITATION_ENTRY.match(line)
        if entry:
            numbers.append(int(entry.group(1)))
    return numbers


def legacy_flags(concept) -> dict[str, bool]:
    """``generated``: timestamp fallback active; ``citations``: ``# Citations`` fallback active."""
    fm = concept.frontmatter
    gen = not typed.present(fm, "generated") and typed.present(fm, "timestamp")
    cites = not typed.present(fm, "sources") and bool(citation_entry_numbers(concept.body))
    return {"generated": gen, "citations": cites}


# --- Attested Computation --------------------------------------------------------------------

def computation_fences(concept) -> list[bool]:
    """Closed-flags of the fences directly under an exact H1 ``# Computation`` (up to the next
    heading); unclosed fences are candidates too."""
    if "Computation" not in concept.body:
        return []
    headings = concept.headings
    for index, heading in enumerate(headings):
        if heading.level == 1 and heading.text.strip() == "Computation":
            end = headings[index + 1].start if index + 1 < len(headings) else 1 << 62
            return [closed for s, _e, closed in concept.markdown.fences if heading.end <= s < end]
    return []


def computation_contract(concept) -> dict[str, Any] | None:
    """read_concept ``projection.computation`` for exact ``type: Attested Computation``."""
    fm = concept.frontmatter
    if concept.type != "Attested Computation":
        return None
    runtime = typed.read_str(fm, "runtime")
    if runtime is None:
        return None
    params: list[dict[str, Any]] = []
    if typed.present(fm, "parameters"):
        value = fm["parameters"]
        if not isinstance(value, list):
            return None
        for item in value:
            if not isinstance(item, dict):
                return None
            name, ptype, req = item.get("name"), item.get("type"), item.get("required")
            if not (typed.is_str(name) and typed.is_str(ptype) and typed.is_bool(req)):
                return None
            params.append({"name": name, "type": ptype, "required": bool(req.value)})
        if len({p["name"] for p in params}) != len(params):
            return None
    fences = computation_fences(concept)
    if typed.present(fm, "computation"):
        comp = typed.read_str(fm, "computation")
        if comp is None or fences:
            return None
    else:
        if fences != [True]:
            return None
        comp = ""
    executor = None
    if typed.present(fm, "executor"):
        value = fm["executor"]
        if not isinstance(value, dict) or not typed.is_str(value.get("resource")):
            return None
        receipt = value.get("receipt", [])
        if not isinstance(receipt, list) or not all(typed.is_str(r) for r in receipt):
            return None
        executor = {"resource": value["resource"], "receipt": list(receipt)}
    attester = None
    if typed.present(fm, "attester"):
        value = fm["attester"]
        if not isinstance(value, dict) or not typed.is_str(value.get("resource")):
            return None
        attester = {"resource": value["resource"]}
    return {"runtime": runtime, "parameters": params, "computation": comp, "executor": executor, "attester": attester}


def computation_summary(concept) -> dict[str, Any]:
    contract = computation_contract(concept)
    if contract is None:
        return {"present": False, "runtime": None, "executor": None, "attester": None}
    return {
        "present": True,
        "runtime": contract["runtime"],
        "executor": contract["executor"]["resource"] if contract["executor"] else None,
        "attester": contract["attester"]["resource"] if contract["attester"] else None,
    }


# --- footnote attributions -------------------------------------------------------------------

def normalize_label(label: str) -> str:
    """Full Unicode case folding, then ASCII space/TAB/LF/CR runs collapsed and trimmed."""
    folded = label.casefold()
    return " ".join(part for part in _LABEL_SPACE.split(folded) if part)


def attributions(concept, sources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per normalised label seen as a source id, a reference or a definition."""
    groups: dict[str, dict[str, Any]] = {}

    def group(raw: str) -> dict[str, Any] | None:
        norm = normalize_label(raw)
        if norm == "":
            return None
        g = groups.setdefault(norm, {"spellings": set(), "sources": [], "references": [], "definitions": []})
        g["spellings"].add(raw)
        return g

    for src in sources:
        if src["id"]:
            g = group(src["id"])
            if g is not None:
                g["sources"].append(src)
    analysis = concept.passing_analysis() if "[^" in concept.body else None
    if analysis is not None:
        for ref in analysis.footnote_refs:
            g = group(ref.label)
            if g is not None:
                g["references"].append({"id": ref.label, "raw": ref.raw})
        for d in analysis.footnote_defs:
            g = group(d.label)
            if g is not None:
                g["definitions"].append({"id": d.label, "text": d.text, "raw": d.raw})
    out = []
    for norm in sorted(groups):
        g = groups[norm]
        spelling = min(g["spellings"], key=lambda s: s.encode("utf-8"))
        out.append({"id": spelling, "normalized_id": norm, "sources": g["sources"],
                    "references": g["references"], "definitions": g["definitions"]})
    return out


# --- card fields -----------------------------------------------------------------------------

def staleness(fm: dict, profile: str, as_of: AsOf | None, *, list_quirk: bool = False) -> tuple[str | None, bool | None]:
    """(stale_after, stale). ``list_quirk``: list_concepts under the date profile reports
    ``false`` (not null) for a missing or malformed stale_after when as_of is given."""
    boundary = stale_after(fm, profile)
    return boundary, stale_at(boundary, profile, as_of, list_quirk=list_quirk)


def stale_at(boundary: str | None, profile: str, as_of: AsOf | None, *, list_quirk: bool = False) -> bool | None:
    """``stale`` of :func:`staleness` from its ``stale_after`` (``boundary``), already read."""
    if as_of is None:
        return None
    if boundary is None:
        return False if list_quirk and profile == DATE_PROFILE else None
    return is_stale(boundary, as_of)


def status_fields(fm: dict) -> tuple[str | None, dict[str, Any]]:
    state = status_state(fm)
    return state["effective"], state
