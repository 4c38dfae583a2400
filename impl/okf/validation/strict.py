"""Strict checks: the legacy v0.1 set and the v0.2 set (spec/okf/contract/read.md §3.3, gaps.md §3.3). All WARN.

Each check reads one concept and reports through the validator's ``Collector``; messages and
field paths are the contract's. Legacy spec refs are not pinned by the notes: ``okf-v0.1#11``.
"""

from __future__ import annotations

import re
from typing import Any

from knowspec.impl.okf.concept import projection as proj
from knowspec.impl.okf.parsing import typed
from knowspec.impl.okf.concept.temporal import INSTANT_PROFILE, is_stale, parse_rfc3339, value_valid
from knowspec.impl.okf.bundle.version import go_quote

_SCHEME_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:\S+$")
_EXAMPLE_WORDS = re.compile(r"\b(for example|for instance|e\.g\.|such as)\b", re.I)
_CITATION_MARKER = re.compile(r"(?<![\w\]])\[(\d+)\](?![\(\[:])")
_ENTRY_TARGET = re.compile(r"^\s{0,3}(?:[-*+]\s+)?\[(\d+)\]\s*(.*)$")
# The text stops at a ``[`` as well: from every ``[`` of a line of them, ``[^\]]*`` ran to the
# line's end (quadratic). A link's target is the same either way: the innermost ``[...](``.
_INLINE_LINK = re.compile(r"\[[^\[\]]*\]\(([^)]*)\)")
# An index.md entry, ``- [title](target) - description``; the description is stripped in code (a
# lazy ``(.+?)\s*$`` retried the blanks from every position, quadratic on a line of spaces).
_INDEX_ENTRY = re.compile(r"^\s{0,3}[-*+]\s+\[[^\]]*\]\(([^)\s]+)[^)]*\)\s+[-–—:]\s+(.+)$")
_SOURCE_FIELDS = ("id", "title", "author")
_STATUSES = ("draft", "stable", "deprecated")


def _w(out, concept, code, field, message, spec_ref):
    out.add(code, "WARN", concept.path, field, message, spec_ref)


# --- legacy v0.1 -------------------------------------------------------------------------------

def strict_legacy(concept, out, *, profile, as_of, snapshot) -> None:
    fm = concept.frontmatter
    ref = f"{out.okf}#11"
    for key in ("title", "description", "tags", "timestamp"):
        if key not in fm:
            _w(out, concept, "legacy_recommended_field_missing", key,
               f"missing recommended frontmatter field '{key}'", ref)
    if "tags" in fm:
        tags = fm["tags"]
        if not isinstance(tags, list) or not all(typed.is_str(t) for t in tags):
            _w(out, concept, "tags_invalid", "tags", "'tags' should be a YAML list of strings", ref)
    if "timestamp" in fm:
        ts = fm["timestamp"]
        if not typed.is_date_like(ts):
            _w(out, concept, "timestamp_invalid", "timestamp", "'timestamp' should be an RFC3339 string", ref)
        elif parse_rfc3339(str(ts)) is None:
            _w(out, concept, "timestamp_invalid", "timestamp", f"'timestamp' is not RFC3339: {go_quote(str(ts))}", ref)
    if "resource" in fm:
        res = fm["resource"]
        if not isinstance(res, str):
            _w(out, concept, "path_value_invalid", "resource", "'resource' should be a URI string", ref)
        elif not _SCHEME_URI.match(str(res)):
            _w(out, concept, "path_value_invalid", "resource", f"'resource' is not a valid URI: {go_quote(str(res))}", ref)
    _citations(concept, out, ref)
    _conventional_sections(concept, out, ref)


def _sections(concept) -> list[tuple[str, int, int]]:
    """H1 sections: (title, start, end) as byte offsets into the body."""
    heads = [h for h in concept.headings if h.level == 1]
    size = len(concept.body.encode("utf-8"))
    return [(h.text.strip(), h.end, heads[i + 1].start if i + 1 < len(heads) else size) for i, h in enumerate(heads)]


def _citations(concept, out, ref) -> None:
    if "Citations" not in concept.body:
        return
    sections = _sections(concept)
    titles = [s[0] for s in sections]
    if "Citations" not in titles:
        return
    field = "body.# Citations"
    idx = titles.index("Citations")
    prose = concept.markdown.prose.encode("utf-8")
    if idx != len(sections) - 1:
        _w(out, concept, "citation_integrity_invalid", field, "citation markers require a bottom '# Citations' section", ref)
        return
    _title, start, end = sections[idx]
    entries = []
    raw_body = concept.body.encode("utf-8")
    for line, raw_line in zip(prose[start:end].decode().split("\n"), raw_body[start:end].decode().split("\n")):
        m = _ENTRY_TARGET.match(line)
        if m:
            raw = _ENTRY_TARGET.match(raw_line)
            assert raw is not None  # the prose line is the raw line with inline spans blanked
            entries.append((int(m.group(1)), raw.group(2).strip()))
    if not entries:
        _w(out, concept, "citation_integrity_invalid", field, "'# Citations' should contain numbered citation entries", ref)
        return
    for want, (got, _target) in enumerate(entries, start=1):
        if got != want:
            _w(out, concept, "citation_integrity_invalid", field,
               f"citation numbering should be contiguous starting at 1: got {got}, want {want}", ref)
            break
    for _n, target in entries:
        link = _INLINE_LINK.search(target)
        dest = link.group(1).strip() if link else target
        if not ("://" in dest or dest.split("#", 1)[0].endswith(".md")):
            _w(out, concept, "citation_integrity_invalid", field, f"citation entry has invalid target: {go_quote(target)}", ref)


def _conventional_sections(concept, out, ref) -> None:
    sections = _sections(concept)
    prose = concept.markdown.prose.encode("utf-8")
    for title, start, end in sections:
        if title != "Examples":
            continue
        text = concept.body.encode("utf-8")[start:end].decode("utf-8", errors="replace")
        has_code = any(start <= s < end for s, _e, _c in concept.markdown.fences) or "`" in text
        has_list = re.search(r"(?m)^\s{0,3}(?:[-*+]|\d+[.)])\s+\S", text) is not None
        if not (has_code or has_list or _EXAMPLE_WORDS.search(prose[start:end].decode("utf-8", errors="replace"))):
            _w(out, concept, "conventional_section_invalid", "body.# Examples",
               "'# Examples' should contain a concrete example", ref)
    if concept.type == "BigQuery Table" and "Schema" not in [s[0] for s in sections]:
        _w(out, concept, "conventional_section_invalid", "body.# Schema",
           "BigQuery Table concepts should include a '# Schema' section", ref)


def index_descriptions(snapshot, out) -> None:
    """Legacy strict: an index entry's ``- description`` must match the target's description."""
    from knowspec.impl.okf.validation.diagnostics import resolve_bundle_path

    for path, doc in snapshot.indexes.items():
        for line in doc.markdown.prose.split("\n"):
            m = _INDEX_ENTRY.match(line.rstrip("\r"))
            if not m:
                continue
            target = m.group(1).split("#", 1)[0]
            resolved = resolve_bundle_path(path, target) if target else None
            concept = snapshot.documents.get(resolved or "")
            if concept is None or getattr(concept, "description", None) is None:
                continue
            if m.group(2).strip() != concept.description.strip():
                out.add("index_description_mismatch", "WARN", path, "body",
                        f"index.md description for {go_quote(m.group(1))} does not match target frontmatter",
                        f"{out.okf}#11")


# --- v0.2 --------------------------------------------------------------------------------------

def _when(profile: str) -> str:
    return "an offset-bearing RFC3339 datetime" if profile == INSTANT_PROFILE else "YYYY-MM-DD"


def strict_v02(concept, out, *, profile, as_of, snapshot) -> None:
    fm = concept.frontmatter
    T = _when(profile)
    if "resource" in fm and not typed.is_str(fm["resource"]):
        _w(out, concept, "path_value_invalid", "resource",
           "'resource' should be a non-empty string path, URL, or scope descriptor", "okf-v0.2#6.2")
    if "tags" in fm:
        tags = fm["tags"]
        if not isinstance(tags, list):
            _w(out, concept, "tags_invalid", "tags", "'tags' should be a YAML sequence of strings", "okf-v0.2#4.1")
        else:
            for i, tag in enumerate(tags):
                if not typed.is_str(tag):
                    _w(out, concept, "tags_invalid", f"tags[{i}]", f"'tags[{i}]' should be a non-empty string", "okf-v0.2#4.1")
    shared_ok = _window(concept, out, fm, "usage_window", "usage_window", profile, T)
    _sources(concept, out, fm, profile, T, shared_ok)
    _footnotes(concept, out, profile)
    _generated(concept, out, fm)
    _verified(concept, out, fm)
    if "timestamp" in fm and not (typed.is_date_like(fm["timestamp"]) and parse_rfc3339(str(fm["timestamp"]))):
        _w(out, concept, "timestamp_invalid", "timestamp", "'timestamp' should be RFC3339", "okf-v0.2#13.1")
    if "status" in fm and (typed.is_duplicated(fm, "status") or fm["status"] not in _STATUSES or type(fm["status"]) is not str):
        _w(out, concept, "status_invalid", "status", "'status' should be draft, stable, or deprecated", "okf-v0.2#5.4")
    if "stale_after" in fm:
        boundary = proj.stale_after(fm, profile)
        if boundary is None:
            _w(out, concept, "stale_after_invalid", "stale_after", f"'stale_after' should be {T}", "okf-v0.2#5.5")
        elif as_of is not None and is_stale(boundary, as_of):
            _w(out, concept, "stale", "stale_after", f"concept is stale as of {as_of.echo}", "okf-v0.2#5.5")
    if concept.type == "Attested Computation":
        _computation(concept, out, fm)
    if proj.legacy_flags(concept)["citations"]:
        _citations(concept, out, "okf-v0.2#13.1")


def _window(concept, out, mapping, key, path, profile, T) -> bool | None:
    """Check a usage window; True valid, False invalid, None absent."""
    if key not in mapping:
        return None
    value = mapping[key]
    ref = "okf-v0.2#5.1"
    if not isinstance(value, dict) or "from" not in value or "to" not in value:
        _w(out, concept, "usage_window_invalid", path, f"'{path}' should be a mapping with from/to {T}", ref)
        return False
    ok = True
    for end in ("from", "to"):
        if not value_valid(value[end], profile):
            _w(out, concept, "usage_window_invalid", f"{path}.{end}", f"'{path}.{end}' should be {T}", ref)
            ok = False
    if ok and proj.usage_window(value, profile) is None:
        _w(out, concept, "usage_window_order", path, f"'{path}.from' should be on or before '{path}.to'",
           "toolkit#sources-usage-profile")
        ok = False
    return ok


def _sources(concept, out, fm, profile, T, shared_ok) -> None:
    if "sources" not in fm:
        return
    sources = fm["sources"]
    ref = "okf-v0.2#5.1"
    if not isinstance(sources, list) or not all(isinstance(s, dict) for s in sources):
        _w(out, concept, "sources_invalid", "sources", "'sources' should be a YAML sequence of mappings", ref)
        if not isinstance(sources, list):
            return
    seen: dict[str, str] = {}
    for i, item in enumerate(sources):
        p = f"sources[{i}]"
        if not isinstance(item, dict):
            _w(out, concept, "source_invalid", p, f"'{p}' should be a mapping", ref)
            continue
        if not typed.is_str(item.get("resource")):
            _w(out, concept, "source_resource_missing", f"{p}.resource", f"'{p}.resource' should be a non-empty string", ref)
        for key in _SOURCE_FIELDS:
            if key in item and not typed.is_str(item[key]):
                _w(out, concept, "source_field_invalid", f"{p}.{key}", f"'{p}.{key}' should be a non-empty string", ref)
        if "last_modified" in item and not value_valid(item["last_modified"], profile):
            _w(out, concept, "source_field_invalid", f"{p}.last_modified", f"'{p}.last_modified' should be {T}", ref)
        own = _window(concept, out, item, "usage_window", f"{p}.usage_window", profile, T)
        if "usage_count" in item:
            if not typed.is_uint(item["usage_count"]):
                _w(out, concept, "source_usage_count_invalid", f"{p}.usage_count",
                   f"'{p}.usage_count' should be a non-negative integer", "toolkit#sources-usage-profile")
            elif not (own is True or (own is None and shared_ok is True)):
                _w(out, concept, "source_usage_window_missing", f"{p}.usage_count",
                   f"'{p}.usage_count' requires a valid effective usage_window", "toolkit#sources-usage-profile")
        sid = item.get("id")
        if typed.is_str(sid):
            norm = proj.normalize_label(sid)
            if sid in seen.values():
                _w(out, concept, "source_id_duplicate", f"{p}.id", f"source id {go_quote(sid)} is duplicated",
                   "toolkit#sources-id-unique")
            elif norm in seen:
                _w(out, concept, "normalized_footnote_label_collision", f"{p}.id",
                   f"source id {go_quote(sid)} collides with {go_quote(seen[norm])} after CommonMark label "
                   "normalization; action: disambiguate_citation_entry", "toolkit#source-footnote-integrity")
            else:
                seen[norm] = sid


def _footnotes(concept, out, profile) -> None:
    if "[^" not in concept.body:
        return
    ref = "toolkit#source-footnote-integrity"
    for entry in proj.attributions(concept, proj.valid_sources(concept, profile)):
        if not entry["references"] and not entry["definitions"]:
            continue
        field = f"body.footnotes[{entry['id']}]"
        label = go_quote(entry["id"])
        if not entry["sources"]:
            _w(out, concept, "source_footnote_unknown", field, f"footnote {label} does not match a sources[].id", ref)
        if entry["references"] and not entry["definitions"]:
            _w(out, concept, "source_footnote_definition_missing", field, f"footnote {label} has no definition", ref)
        if len(entry["definitions"]) > 1:
            _w(out, concept, "source_footnote_definition_duplicate", field, f"footnote {label} has duplicate definitions", ref)


def _generated(concept, out, fm) -> None:
    if "generated" not in fm:
        return
    ref = "okf-v0.2#5.2"
    gen = fm["generated"]
    if not isinstance(gen, dict):
        _w(out, concept, "generated_invalid", "generated", "'generated' should be a mapping", ref)
        return
    by = gen.get("by")
    if type(by) is not str or by.strip() == "":
        _w(out, concept, "generated_by_missing", "generated.by", "'generated.by' should follow the OKF actor convention", ref)
    elif not proj.valid_actor(by):
        _w(out, concept, "actor_invalid", "generated.by", "'generated.by' should follow the OKF actor convention", "okf-v0.2#7")
    if "at" in gen and not (typed.is_date_like(gen["at"]) and parse_rfc3339(str(gen["at"]))):
        _w(out, concept, "generated_at_invalid", "generated.at", "'generated.at' should be RFC3339", ref)


def _verified(concept, out, fm) -> None:
    if "verified" not in fm:
        return
    ref = "okf-v0.2#5.2"
    value = fm["verified"]
    if isinstance(value, dict):
        events = [("verified", value)]
    elif isinstance(value, list):
        if not value:
            _w(out, concept, "verified_invalid", "verified", "'verified' should contain at least one verification event", ref)
        events = [(f"verified[{i}]", v) for i, v in enumerate(value)]
    else:
        _w(out, concept, "verified_invalid", "verified", "'verified' should be a mapping or sequence of mappings", ref)
        return
    for p, event in events:
        if not isinstance(event, dict):
            _w(out, concept, "verification_invalid", p, f"'{p}' should be a mapping", ref)
            continue
        by = event.get("by")
        if type(by) is not str or by.strip() == "":
            _w(out, concept, "verification_by_missing", f"{p}.by", f"'{p}.by' should be a non-empty actor", ref)
        elif not proj.valid_actor(by):
            _w(out, concept, "actor_invalid", f"{p}.by", f"'{p}.by' should follow the OKF actor convention", "okf-v0.2#7")
        if "at" not in event:
            _w(out, concept, "verification_at_missing", f"{p}.at", f"'{p}.at' is required", ref)
        elif not (typed.is_date_like(event["at"]) and parse_rfc3339(str(event["at"]))):
            _w(out, concept, "verification_at_invalid", f"{p}.at", f"'{p}.at' should be RFC3339", ref)


def _computation(concept, out, fm: dict[str, Any]) -> None:
    c2, c3, use = "okf-v0.2#10.2", "okf-v0.2#10.3", "toolkit#computation-usability"
    if "runtime" not in fm:
        _w(out, concept, "runtime_missing", "runtime", "'runtime' is required for Attested Computation", c2)
    elif not typed.is_str(fm["runtime"]):
        _w(out, concept, "runtime_invalid", "runtime", "'runtime' should be a non-empty string", c2)
    fences = proj.computation_fences(concept)
    if "computation" in fm:
        if not typed.is_str(fm["computation"]):
            _w(out, concept, "computation_invalid", "computation", "'computation' should be a non-empty string path", "okf-v0.2#6.2")
        if fences:
            _w(out, concept, "computation_conflict", "computation", "file and inline computation modes are mutually exclusive", c3)
    elif len(fences) > 1:
        _w(out, concept, "computation_inline_multiple", "body.# Computation",
           "inline computation mode permits exactly one directly-owned closed fence under '# Computation'", c3)
    elif not fences:
        _w(out, concept, "computation_inline_missing", "body.# Computation",
           "inline computation mode requires one directly-owned closed fence under exact '# Computation'", c3)
    elif fences != [True]:
        _w(out, concept, "computation_inline_malformed", "body.# Computation",
           "observed inline computation candidates must be one directly-owned closed fence under exact "
           "'# Computation'", c3)
    _parameters(concept, out, fm, c2)
    _executor(concept, out, fm, c2, use)
    if "attester" not in fm:
        _w(out, concept, "attester_missing", "attester", "'attester' is recommended for usable Attested Computation", use)
    elif not isinstance(fm["attester"], dict):
        _w(out, concept, "attester_invalid", "attester", "'attester' should be a mapping", c2)
    elif not typed.is_str(fm["attester"].get("resource")):
        _w(out, concept, "attester_resource_missing", "attester.resource", "'attester.resource' should be a non-empty string path", c2)


def _parameters(concept, out, fm, ref) -> None:
    if "parameters" not in fm:
        return
    params = fm["parameters"]
    if not isinstance(params, list):
        _w(out, concept, "parameters_invalid", "parameters", "'parameters' should be a sequence of mappings", ref)
        return
    names: set[str] = set()
    for i, item in enumerate(params):
        p = f"parameters[{i}]"
        if not isinstance(item, dict):
            _w(out, concept, "parameter_invalid", p, f"'{p}' should be a mapping", ref)
            continue
        name = item.get("name")
        if not typed.is_str(name):
            _w(out, concept, "parameter_name_missing", f"{p}.name", f"'{p}.name' should be a non-empty string", ref)
        elif name in names:
            _w(out, concept, "parameter_name_duplicate", f"{p}.name", f"parameter name {go_quote(name)} is duplicated",
               "toolkit#computation-parameter-unique")
        else:
            names.add(name)
        if not typed.is_str(item.get("type")):
            _w(out, concept, "parameter_type_missing", f"{p}.type", f"'{p}.type' should be a non-empty string", ref)
        if not typed.is_bool(item.get("required")):
            _w(out, concept, "parameter_required_invalid", f"{p}.required", f"'{p}.required' should be a boolean", ref)


def _executor(concept, out, fm, ref, use) -> None:
    if "executor" not in fm:
        _w(out, concept, "executor_missing", "executor", "'executor' is recommended for usable Attested Computation", use)
        return
    ex = fm["executor"]
    if not isinstance(ex, dict):
        _w(out, concept, "executor_invalid", "executor", "'executor' should be a mapping", ref)
        return
    if not typed.is_str(ex.get("resource")):
        _w(out, concept, "executor_resource_missing", "executor.resource", "'executor.resource' should be a non-empty string path", ref)
    if "receipt" not in ex:
        _w(out, concept, "receipt_missing", "executor.receipt", "'executor.receipt' is recommended for usable attestation", use)
        return
    receipt = ex["receipt"]
    if not isinstance(receipt, list):
        _w(out, concept, "receipt_invalid", "executor.receipt", "'executor.receipt' should be a sequence of field names", ref)
        return
    if not receipt:
        _w(out, concept, "receipt_invalid", "executor.receipt", "'executor.receipt' should contain at least one field name", ref)
    seen: set[str] = set()
    for i, name in enumerate(receipt):
        p = f"executor.receipt[{i}]"
        if not typed.is_str(name):
            _w(out, concept, "receipt_field_invalid", p, f"'{p}' should be a non-empty string", ref)
        elif name in seen:
            _w(out, concept, "receipt_field_duplicate", p, f"receipt field {go_quote(name)} is duplicated", "toolkit#receipt-field-unique")
        else:
            seen.add(name)
