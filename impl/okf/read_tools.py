"""The read tools ``list_concepts``, ``read_concept`` and ``validate_bundle`` (spec/okf/contract/read.md §3.1-3.3).

Each handler takes one snapshot, applies the contract's argument checks in order, and returns
``ToolOutput(structured, text)``; every failure is a ``ToolError`` with the contract code.
"""

from __future__ import annotations

from typing import Any

from knowspec.impl.context import CallContext, ToolOutput
from knowspec.impl.errors import ToolError
from knowspec.impl.okf import projection as proj
from knowspec.impl.okf.ids import canonical_id_error
from knowspec.impl.okf.model import Concept, Snapshot, load_snapshot
from knowspec.impl.okf.read_errors import (
    ROOT_INDEX_PARSE_MESSAGE,
    concept_not_found,
    parse_failure,
    too_many_concepts,
)
from knowspec.impl.okf.temporal import check_profile, parse_as_of
from knowspec.impl.rules import go_json

MAX_CONCEPTS = 10_000
MAX_FRONTMATTER_BYTES = 1 << 20
MAX_PROJECTION_ITEMS = 10_000
MAX_COMPUTATION_ITEMS = 256
MAX_OUTPUT_BYTES = 64 * 1024 * 1024


def _compact(value: Any) -> str:
    return go_json.dumps(value)


def _arg(args: Any, name: str, default: Any = None) -> Any:
    value = getattr(args, name, default)
    return default if value is None else value


def _bool_arg(args: Any, name: str) -> bool:
    value = getattr(args, name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ToolError("invalid_request", f'argument "{name}" is not a boolean')
    return value


# --- list_concepts ---------------------------------------------------------------------------

def _card_base(concept: Concept, profile: str) -> dict[str, Any]:
    """The as_of-independent part of a card, cached on the (immutable) concept per profile."""
    cache = concept.__dict__.setdefault("_list_card_cache", {})
    base = cache.get(profile)
    if base is None:
        fm = concept.frontmatter
        status, state = proj.status_fields(fm)
        base = {
            "status": status,
            "status_state": state,
            "trust": proj.trust_tier(fm),
            "stale_after": proj.stale_after(fm, profile),
            "generated_at": proj.generated_at(fm),
            "source_count": len(proj.valid_sources(concept, profile)),
            "computation": proj.computation_summary(concept),
            "legacy_derived": proj.legacy_flags(concept),
        }
        cache[profile] = base
    return base


def concept_card(concept: Concept, profile: str, as_of) -> dict[str, Any]:
    """One list_concepts item (all 13 fields, contract key order)."""
    base = _card_base(concept, profile)
    _boundary, stale = proj.staleness(concept.frontmatter, profile, as_of, list_quirk=True)
    return {
        "id": concept.id,
        "type": concept.type or "",
        "title": concept.title or "",
        "path": concept.path,
        "status": base["status"],
        "status_state": dict(base["status_state"]),
        "trust": base["trust"],
        "stale": stale,
        "stale_after": base["stale_after"],
        "generated_at": base["generated_at"],
        "source_count": base["source_count"],
        "computation": dict(base["computation"]),
        "legacy_derived": dict(base["legacy_derived"]),
    }


def list_concepts(args: Any, ctx: CallContext) -> ToolOutput:
    profile = check_profile(getattr(args, "temporal_profile", None))
    as_of = parse_as_of(getattr(args, "as_of", None), profile)
    snapshot = load_snapshot(args.bundle_path, ctx)
    snapshot.require_parseable()
    if len(snapshot.concepts) > MAX_CONCEPTS:
        raise too_many_concepts()
    resolution = snapshot.version()
    if resolution.error is not None:
        raise ToolError("invalid_request", f"resolve bundle version: {resolution.error}")
    cards = []
    for index, concept in enumerate(snapshot.concepts.values()):
        if index % 256 == 0:
            ctx.check_cancelled("list_concepts request")
        cards.append(concept_card(concept, profile, as_of))
    structured = {
        "version": resolution.version,
        "version_declaration": resolution.declaration,
        "temporal_profile": profile,
        "as_of": as_of.echo if as_of else None,
        "concepts": cards,
    }
    text = _compact({"concepts": [{k: c[k] for k in ("id", "type", "title", "path")} for c in cards]})
    if len(text) > MAX_OUTPUT_BYTES:
        raise ToolError("resource_limit", "tool output exceeds MCP resource limits")
    return ToolOutput(structured, text)


# --- read_concept ----------------------------------------------------------------------------

def _cap(items: list, name: str, limit: int = MAX_PROJECTION_ITEMS) -> list:
    if len(items) > limit:
        raise ToolError("resource_limit", f"read_concept projection {name} exceeds the MCP item limit")
    return items


def concept_projection(concept: Concept, profile: str) -> dict[str, Any]:
    """read_concept ``projection`` object (typed, profile-aware)."""
    fm = concept.frontmatter
    sources = _cap(proj.valid_sources(concept, profile), "sources")
    attributions = _cap(proj.attributions(concept, sources), "attributions")
    for entry in attributions:
        _cap(entry["sources"], "attribution sources")
        _cap(entry["references"], "attribution references")
        _cap(entry["definitions"], "attribution definitions")
    status, state = proj.status_fields(fm)
    computation = proj.computation_contract(concept)
    if computation is not None:
        if len(computation["parameters"]) > MAX_COMPUTATION_ITEMS:
            raise ToolError("resource_limit", "read_concept projection computation parameters exceed the MCP item limit")
        if computation["executor"] and len(computation["executor"]["receipt"]) > MAX_COMPUTATION_ITEMS:
            raise ToolError("resource_limit", "read_concept projection executor receipt exceeds the MCP item limit")
    shared = None
    if "usage_window" in fm and not getattr(fm, "duplicates", frozenset()) & {"usage_window"}:
        shared = proj.usage_window(fm["usage_window"], profile)
    return {
        "type": concept.type,
        "title": concept.title,
        "description": concept.description,
        "resource": concept.resource,
        "tags": _cap(list(concept.tags), "tags"),
        "sources": sources,
        "attributions": attributions,
        "usage_window": shared,
        "generated": proj.generated(fm),
        "verified": _cap(proj.verification_events(fm, actor_convention=False), "verified"),
        "trust": proj.trust_tier(fm),
        "status": status,
        "status_state": state,
        "stale_after": proj.stale_after(fm, profile),
        "computation": computation,
    }


def read_concept(args: Any, ctx: CallContext) -> ToolOutput:
    profile = check_profile(getattr(args, "temporal_profile", None))
    concept_id = args.concept_id
    if len(concept_id) > 4096:
        raise ToolError("resource_limit", "tool input exceeds the advertised schema limits")
    error = canonical_id_error(concept_id)
    if error is not None:
        raise ToolError("invalid_request", error)
    snapshot = load_snapshot(args.bundle_path, ctx)
    snapshot.require_parseable()
    resolution = snapshot.version()
    if resolution.root_parse_error is not None:
        raise parse_failure([resolution.root_parse_error], ROOT_INDEX_PARSE_MESSAGE)
    concept = snapshot.concepts.get(concept_id)
    if concept is None:
        raise concept_not_found(concept_id)
    if len(concept.frontmatter_yaml.encode("utf-8")) > MAX_FRONTMATTER_BYTES:
        raise ToolError("resource_limit", "concept frontmatter exceeds the MCP limit")
    ctx.check_cancelled("read_concept request")
    legacy = proj.legacy_flags(concept)
    structured = {
        "id": concept.id,
        "path": concept.path,
        "version": resolution.version,
        "version_declaration": resolution.declaration,
        "temporal_profile": profile,
        "frontmatter_yaml": concept.frontmatter_yaml,
        "body": concept.body,
        "projection": concept_projection(concept, profile),
        "legacy_fallback": {
            "generated_from_timestamp": legacy["generated"],
            "sources_from_citations": legacy["citations"],
        },
    }
    text = concept.text
    if len(concept.raw) > MAX_OUTPUT_BYTES:
        raise ToolError("resource_limit", "read concept output exceeds MCP limits")
    return ToolOutput(structured, text)


# --- validate_bundle -------------------------------------------------------------------------

_TARGETS = {"auto": None, "0.1": "0.1", "0.2": "0.2"}


def validate_bundle(args: Any, ctx: CallContext) -> ToolOutput:
    from knowspec.impl.okf.validator import validate_snapshot

    strict = _bool_arg(args, "strict")
    check_links = _bool_arg(args, "check_links")
    check_orphans = _bool_arg(args, "check_orphans")
    target = _arg(args, "target_version", "auto")
    if target not in _TARGETS:
        raise ToolError("invalid_request", 'argument "target_version" must be auto, 0.1, or 0.2')
    profile = check_profile(getattr(args, "temporal_profile", None))
    as_of = parse_as_of(getattr(args, "as_of", None), profile)
    snapshot: Snapshot = load_snapshot(args.bundle_path, ctx)
    report = validate_snapshot(
        snapshot,
        ctx,
        strict=strict,
        check_links=check_links,
        check_orphans=check_orphans,
        selector=_TARGETS[target],
        profile=profile,
        as_of=as_of,
    )
    structured: dict[str, Any] = {
        "version": report.version,
        "version_declaration": report.declaration,
        "temporal_profile": profile,
    }
    if as_of is not None:
        structured["as_of"] = as_of.echo
    structured.update(
        {
            "scanned_files": snapshot.scanned_files,
            "conformance": {"conformant": report.errors == 0, "errors": report.errors},
            "guidance": {"warnings": report.warnings, "info": report.info},
            "diagnostics": report.diagnostics,
        }
    )
    if len(report.diagnostics) > 10_000:
        raise ToolError("resource_limit", "bundle validation output exceeds MCP resource limits")
    legacy = []
    for d in report.diagnostics:
        item = {"severity": d["severity"]}
        if d["file"]:
            item["file"] = d["file"]
        item["message"] = d["message"]
        legacy.append(item)
    text = _compact(
        {
            "scanned_files": snapshot.scanned_files,
            "conformant": report.errors == 0,
            "errors": report.errors,
            "warnings": report.warnings,
            "info": report.info,
            "diagnostics": legacy,
        }
    )
    return ToolOutput(structured, text)
