"""The read tools ``list_concepts``, ``read_concept`` and ``validate_bundle`` (spec/okf/contract/read.md §3.1-3.3).

Each handler takes one snapshot, applies the contract's argument checks in order, and returns
``ToolOutput(structured, text)``; every failure is a ``ToolError`` with the contract code.
"""

from __future__ import annotations

from typing import Any

from knowspec.generated.constants import VERSION_SELECTOR_AUTO
from knowspec.generated.models.okf.list_concepts_input_schema import ListConceptsInput
from knowspec.generated.models.okf.read_concept_input_schema import ReadConceptInput
from knowspec.generated.models.okf.validate_bundle_input_schema import ValidateBundleInput
from knowspec.impl import runtime as process
from knowspec.impl.context import AnswerKey, CallContext, ToolOutput
from knowspec.impl.errors import ToolError
from knowspec.impl.kept_answers import keep_refusal, kept_output
from knowspec.impl.okf.bundle.captured_files import captures_released_at_end, retried_on_file_change
from knowspec.impl.okf.bundle.limits import limits_for
from knowspec.impl.okf.concept import projection as proj
from knowspec.impl.okf.concept.ids import canonical_id_error
from knowspec.impl.okf.model import Concept, Snapshot, load_snapshot
from knowspec.impl.okf.read_errors import (
    ROOT_INDEX_PARSE_MESSAGE,
    concept_not_found,
    parse_failure,
    too_many_concepts,
)
from knowspec.impl.okf.concept.temporal import parse_as_of
from knowspec.impl.okf.tools.cards import CardBase, card_bases
from knowspec.impl.rules import go_json

MAX_CONCEPTS = 10_000
MAX_DIAGNOSTICS = 10_000  # validate_bundle refuses a report with more (resource_limit)
MAX_FRONTMATTER_BYTES = 1 << 20
MAX_PROJECTION_ITEMS = 10_000
MAX_COMPUTATION_ITEMS = 256
MAX_OUTPUT_BYTES = 64 * 1024 * 1024


def _compact(value: Any) -> str:
    return go_json.dumps(value)


# --- list_concepts ---------------------------------------------------------------------------

def concept_card(concept: Concept, profile: str, as_of, base: CardBase) -> dict[str, Any]:
    """One list_concepts item (all 13 fields, contract key order) from the concept's card base."""
    status, state, trust, stale_after, generated_at, source_count, computation, legacy = base
    stale = proj.stale_at(stale_after, profile, as_of, list_quirk=True)  # the base's stale_after
    return {
        "id": concept.id,
        "type": concept.type or "",
        "title": concept.title or "",
        "path": concept.path,
        "status": status,
        "status_state": dict(state),
        "trust": trust,
        "stale": stale,
        "stale_after": stale_after,
        "generated_at": generated_at,
        "source_count": source_count,
        "computation": dict(computation),
        "legacy_derived": dict(legacy),
    }


def _list_text(cards: list[dict[str, Any]]) -> str:
    """list_concepts' text: the cards' id, type, title and path."""
    return _compact({"concepts": [{k: c[k] for k in ("id", "type", "title", "path")} for c in cards]})


@captures_released_at_end
@retried_on_file_change
def list_concepts(args: ListConceptsInput, ctx: CallContext) -> ToolOutput:
    profile = args.temporal_profile
    as_of = parse_as_of(args.as_of, profile)
    snapshot = load_snapshot(args.bundle_path, ctx)
    snapshot.require_parseable()
    answer_key = AnswerKey(("list_concepts", snapshot.root, profile, args.as_of), snapshot.revision)
    kept = kept_output(process.of(ctx), answer_key)
    if kept is not None:
        return kept
    if len(snapshot.concepts) > limits_for(process.of(ctx), concepts=MAX_CONCEPTS).concepts:
        raise too_many_concepts()
    resolution = snapshot.version()
    if resolution.error is not None:
        raise ToolError("invalid_request", f"resolve bundle version: {resolution.error}")
    cards = []
    concepts = snapshot.concepts.values()
    bases = card_bases(snapshot, profile, ctx).of_all(concepts, lambda: ctx.check_cancelled("list_concepts request"))
    for index, (concept, base) in enumerate(zip(concepts, bases)):
        if index % 256 == 0:
            ctx.check_cancelled("list_concepts request")
        cards.append(concept_card(concept, profile, as_of, base))
    structured = {
        "version": resolution.version,
        "version_declaration": resolution.declaration,
        "temporal_profile": profile,
        "as_of": as_of.echo if as_of else None,
        "concepts": cards,
    }
    text = _list_text(cards)  # kept with the answer (``keep``): not kept apart from it
    if len(text) > MAX_OUTPUT_BYTES:
        raise ToolError("resource_limit", "tool output exceeds MCP resource limits")
    return ToolOutput(structured, text, keep=answer_key)


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


@captures_released_at_end
@retried_on_file_change
def read_concept(args: ReadConceptInput, ctx: CallContext) -> ToolOutput:
    profile = args.temporal_profile
    concept_id = args.concept_id
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

@captures_released_at_end
@retried_on_file_change
def validate_bundle(args: ValidateBundleInput, ctx: CallContext) -> ToolOutput:
    from knowspec.impl.okf.validation.diagnostics import validate_snapshot

    profile = args.temporal_profile
    as_of = parse_as_of(args.as_of, profile)
    snapshot: Snapshot = load_snapshot(args.bundle_path, ctx)
    answer_key = AnswerKey(("validate_bundle", snapshot.root, args.strict, args.check_links, args.check_orphans,
                            args.target_version, profile, args.as_of), snapshot.revision)
    kept = kept_output(process.of(ctx), answer_key)
    if kept is not None:
        return kept
    report = validate_snapshot(
        snapshot,
        ctx,
        strict=args.strict,
        check_links=args.check_links,
        check_orphans=args.check_orphans,
        selector=None if args.target_version == VERSION_SELECTOR_AUTO else args.target_version,
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
    if len(report.diagnostics) > MAX_DIAGNOSTICS:
        refusal = ToolError("resource_limit", "bundle validation output exceeds MCP resource limits")
        keep_refusal(process.of(ctx), answer_key, refusal)
        raise refusal
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
    return ToolOutput(structured, text, keep=answer_key)
