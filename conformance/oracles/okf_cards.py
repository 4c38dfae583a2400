"""A concept's card, its read_concept projection and its v0.2 graph node, restated from the
frontmatter the suite wrote.

read.md §2 fixes the per-card fields (status, status_state, trust, stale_after, stale), §3.5 and
§3.6 the card of search_concepts and get_neighbors (``""`` for an absent or invalid type, title or
description, ``[]`` for no tags), §3.2 the projection (``null`` instead of ``""``), §1.4 trust
from the valid ``verified`` events, §1.8 and gaps.md §5 the attributions, §1.11 the graph's
``proj:Concept`` node. Pure functions of a
:class:`Concept`; the footnote scan covers what the fixtures write (paragraph lines, no code, no
lists, no continuation lines), which :func:`footnotes` asserts.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from knowspec.conformance.fixtures.model import Concept, Event, Source, Window, render_body
from knowspec.conformance.oracles.okf_reads import stale_value, valid_source, valid_temporal, valid_window

DEFAULT_PROFILE = "date-3fcbb9f"
TRUST_TIERS = ("unverified", "machine-confirmed", "human-reviewed")
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
_REFERENCE = re.compile(r"(?<![\\!])\[\^([^\]\r\n]+)\](?!\[)")
_DEFINITION = re.compile(r"^ {0,3}\[\^([^\]\r\n]+)\]:[ \t]*(.*)$")


def typed_string(value: str | None) -> str | None:
    """A typed string read (read.md §1.3): valid only when not blank."""
    return value if value is not None and value.strip() else None


# ---- status, trust, staleness (read.md §2 per-card fields, §1.4, §1.9) ------------------------

def status_fields(concept: Concept) -> tuple[str | None, dict[str, Any]]:
    """``status`` and ``status_state``: absent is stable; a blank string is malformed, raw kept."""
    if concept.status is None:
        return "stable", {"present": False, "valid": True, "raw": None, "effective": "stable"}
    value = typed_string(concept.status)
    return value, {"present": True, "valid": value is not None, "raw": concept.status, "effective": value}


def rfc3339(text: str) -> bool:
    """Go ``time.RFC3339`` as the fixtures exercise it: upper-case T, an offset, a real instant."""
    if not _RFC3339.fullmatch(text):
        return False
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def instant(text: str) -> datetime | None:
    """An RFC 3339 value as its instant (equal in any offset), else None."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if rfc3339(text) else None


def valid_actor(actor: str) -> bool:
    """read.md §1.9: ``human:<x>``, ``process:<x>`` or ``<producer>/<version>``, trimmed, no control."""
    if not actor or actor != actor.strip() or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in actor):
        return False
    for prefix in ("human:", "process:"):
        if actor.startswith(prefix):
            return bool(actor[len(prefix):].strip())
    parts = actor.split("/")
    return len(parts) == 2 and all(p.strip() for p in parts)


def trust(concept: Concept) -> str:
    """None of the events valid: unverified; any valid ``human:`` event: human-reviewed."""
    valid = [e for e in concept.verified if valid_actor(e.by) and rfc3339(e.at)]
    if not valid:
        return "unverified"
    return "human-reviewed" if any(e.by.startswith("human:") for e in valid) else "machine-confirmed"


def concept_card(concept: Concept, as_of: str | None = None, profile: str = DEFAULT_PROFILE) -> dict[str, Any]:
    """The card of search_concepts hits and get_neighbors' focus and edge ends (read.md §3.5, §3.6).

    Every key is required by ``ConceptCard``; stale is a boolean only with ``as_of`` and a
    stale_after valid for the profile (not list_concepts' date-profile ``false``)."""
    status, state = status_fields(concept)
    return {"id": concept.id, "path": concept.path, "type": typed_string(concept.type) or "",
            "title": typed_string(concept.title) or "", "description": typed_string(concept.description) or "",
            "tags": valid_tags(concept), "status": status, "trust": trust(concept),
            "stale": stale_value(concept.stale_after, as_of, profile, tool="search_concepts"),
            "stale_after": valid_temporal(concept.stale_after, profile), "status_state": state}


def valid_tags(concept: Concept) -> list[str]:
    """The valid items of the ``tags`` sequence, in its order, repeats kept (the fixtures write no
    blank tag, whose validity the contract leaves to the typed-string rule)."""
    return [t for t in concept.tags if typed_string(t) is not None]


# ---- the read_concept projection (read.md §3.2) -----------------------------------------------

def window_value(window: Window | None) -> dict[str, str] | None:
    return None if window is None else {"from": window[0], "to": window[1]}


def shared_window(concept: Concept, profile: str = DEFAULT_PROFILE) -> dict[str, str] | None:
    """``projection.usage_window``: the concept's shared window, only when valid for the profile."""
    return window_value(concept.usage_window) if valid_window(concept.usage_window, profile) else None


def source_projection(source: Source) -> dict[str, Any]:
    """``SourceProjection`` of a valid source: absent text fields ``""``, usage_count a decimal
    string, its own last_modified and usage_window as written (null when absent)."""
    return {"id": source.id, "resource": source.resource, "title": source.title, "author": source.author,
            "usage_count": None if source.usage_count is None else str(source.usage_count),
            "last_modified": source.last_modified or None, "usage_window": window_value(source.usage_window)}


def inherited_windows_cleared(projection: Any, concept: Concept, profile: str = DEFAULT_PROFILE) -> Any:
    """``projection`` with a source's usage_window equal to the shared one read as null: the
    contract does not say whether a source without a window of its own shows the one it inherits
    (the fixtures give no source a window equal to the shared one)."""
    shared = shared_window(concept, profile)
    if shared is None or not isinstance(projection, dict) or not isinstance(projection.get("sources"), list):
        return projection
    sources = [{**s, "usage_window": None} if isinstance(s, dict) and s.get("usage_window") == shared else s
               for s in projection["sources"]]
    return {**projection, "sources": sources}


def normalised_label(label: str) -> str:
    """gaps.md §5.2: full case folding, ASCII space/TAB/LF/CR runs collapsed and trimmed."""
    return " ".join(part for part in re.split(r"[ \t\n\r]+", label.casefold()) if part)


def footnotes(body: str) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """References ``{id, raw}`` and definitions ``{id, text, raw}`` of a fixture body, in order
    (a body without ``[^``, code and all, has neither)."""
    if "[^" not in body:
        return [], []
    assert "`" not in body and not re.search(r"^(    |\t|>|[-*+] )", body, re.M), \
        "the footnote scan covers paragraph lines only"
    references, definitions = [], []
    for line in body.split("\n"):
        definition = _DEFINITION.match(line)
        if definition:
            label, text = definition.group(1), definition.group(2)
            definitions.append({"id": label, "text": text, "raw": line[:definition.start(2)].strip()})
            continue
        references += [{"id": m.group(1), "raw": m.group(0)} for m in _REFERENCE.finditer(line)]
    return references, definitions


def _utf8(text: str) -> bytes:
    return text.encode("utf-8")


def attributions(concept: Concept, profile: str = DEFAULT_PROFILE) -> list[dict[str, Any]]:
    """read.md §1.8: one entry per normalised label seen as a valid source's id, a reference or a
    definition, by normalised label; ``id`` the smallest raw spelling (byte order)."""
    references, definitions = footnotes(render_body(concept))
    sources = [s for s in concept.sources if valid_source(s, profile)]
    spellings: list[str] = [s.id for s in sources if s.id] + [r["id"] for r in references] \
        + [d["id"] for d in definitions]
    out = []
    for label in sorted({normalised_label(s) for s in spellings} - {""}, key=_utf8):
        out.append({
            "id": sorted((s for s in spellings if normalised_label(s) == label), key=_utf8)[0],
            "normalized_id": label,
            "sources": [source_projection(s) for s in sources if s.id and normalised_label(s.id) == label],
            "references": [r for r in references if normalised_label(r["id"]) == label],
            "definitions": [d for d in definitions if normalised_label(d["id"]) == label],
        })
    return out


def generated(event: Event | None) -> dict[str, str | None] | None:
    """An object when ``by`` is a valid actor or ``at`` is RFC 3339; the invalid half is null."""
    if event is None:
        return None
    by, at = (event.by if valid_actor(event.by) else None), (event.at if rfc3339(event.at) else None)
    return None if by is None and at is None else {"by": by, "at": at}


def expected_projection(concept: Concept, profile: str = DEFAULT_PROFILE) -> dict[str, Any]:
    """Every projection field for a fixture concept under ``profile``: the sources valid for it,
    the shared usage window when valid, the computation contract (``expected_computation``);
    ``generated`` comes from the ``generated`` key alone, a legacy ``timestamp`` never fills it.
    With the citations fallback active, ``sources`` is not judged: the contract projects the
    entries in the graph and says nothing of read_concept."""
    status, state = status_fields(concept)
    want = {
        "type": typed_string(concept.type), "title": typed_string(concept.title),
        "description": typed_string(concept.description), "resource": typed_string(concept.resource),
        "tags": valid_tags(concept),
        "sources": [source_projection(s) for s in concept.sources if valid_source(s, profile)],
        "attributions": attributions(concept, profile),
        "usage_window": shared_window(concept, profile),
        "generated": generated(concept.generated),
        # the projection lists events with a non-empty actor, valid or not; trust counts valid ones
        "verified": [{"by": e.by, "at": e.at} for e in concept.verified if e.by and rfc3339(e.at)],
        "trust": trust(concept), "status": status, "status_state": state,
        "stale_after": valid_temporal(concept.stale_after, profile),
        "computation": expected_computation(concept),
    }
    if citations_fallback(concept):
        del want["sources"]
    return want


ATTESTED = "Attested Computation"


def expected_computation(concept: Concept) -> dict[str, Any] | None:
    """read_concept's ``projection.computation`` (read.md §3.2): null unless the type is exactly
    ``Attested Computation`` with a valid contract (a runtime: the fixtures write every other key
    well formed); the parameters as written (the fixtures write them in name order, so a server
    that sorts them agrees), ``computation`` "" for inline code."""
    c = concept.computation
    if concept.type != ATTESTED or c is None or not c.runtime:
        return None
    return {"runtime": c.runtime,
            "parameters": [{"name": n, "type": t, "required": r} for n, t, r in c.parameters],
            "computation": c.file,
            "executor": {"resource": c.executor, "receipt": list(c.receipt)} if c.executor is not None else None,
            "attester": {"resource": c.attester} if c.attester is not None else None}


def computation_summary(concept: Concept) -> dict[str, Any]:
    """A list card's ``computation``: present with the runtime and the executor's and attester's
    resources when the projection has a contract."""
    contract = expected_computation(concept)
    if contract is None:
        return NO_COMPUTATION
    return {"present": True, "runtime": contract["runtime"],
            "executor": contract["executor"]["resource"] if contract["executor"] else None,
            "attester": contract["attester"]["resource"] if contract["attester"] else None}


def timestamp_fallback(concept: Concept) -> bool:
    """read.md §1.8: the legacy ``timestamp`` stands in for ``generated`` only when that key is
    absent; its validity does not count."""
    return concept.generated is None and bool(concept.timestamp)


def citations_fallback(concept: Concept) -> bool:
    """read.md §1.8: a ``# Citations`` section with numbered entries stands in for ``sources``
    only when that key is absent (the fixtures write it only when there are sources)."""
    return not concept.sources and bool(concept.citations)


def legacy_fallback(concept: Concept) -> dict[str, bool]:
    """read_concept's ``legacy_fallback``."""
    return {"generated_from_timestamp": timestamp_fallback(concept),
            "sources_from_citations": citations_fallback(concept)}


def generated_at(concept: Concept) -> str | None:
    """A list card's effective content-change time: ``generated.at`` when ``generated`` is
    present (any shape), else the legacy ``timestamp``; null unless RFC 3339."""
    at = concept.generated.at if concept.generated is not None else concept.timestamp
    return at if at and rfc3339(at) else None


NO_COMPUTATION = {"present": False, "runtime": None, "executor": None, "attester": None}


def expected_list_card(card: dict[str, Any], concept: Concept) -> dict[str, Any]:
    """``card`` (``okf_reads.expected_cards``) with the other list_concepts fields (read.md §3.1):
    type and title ``""`` when invalid, status, trust, generated_at, the legacy flags, and the
    computation summary. With the citations fallback active the source_count is not judged: the
    contract does not say whether citation entries count."""
    status, state = status_fields(concept)
    out = card | {"type": typed_string(concept.type) or "", "title": typed_string(concept.title) or "",
                  "status": status, "status_state": state, "trust": trust(concept),
                  "generated_at": generated_at(concept), "computation": computation_summary(concept),
                  "legacy_derived": {"generated": timestamp_fallback(concept), "citations": citations_fallback(concept)}}
    if citations_fallback(concept):
        del out["source_count"]
    return out


# ---- the v0.2 graph's Concept node (read.md §1.11) ------------------------------------------------

GRAPH_CONCEPT_SCALARS = ("conceptType", "title", "description", "resource", "trustTier", "effectiveStatus",
                         "declaredStatus", "staleAfter", "stalenessAsOf", "stale")
RESOURCE_KINDS = ("url", "bundle-relative", "relative", "scope", "ambiguous")


def url_resource(resource: str) -> bool:
    """An http(s) URL: its ``resourceKind`` is ``url`` and it never becomes an asset node."""
    return re.match(r"^https?://", resource, re.I) is not None


def expected_graph_concept(concept: Concept, profile: str = DEFAULT_PROFILE, as_of: str | None = None) -> dict[str, Any]:
    """The scalar predicates of the concept's ``proj:Concept`` node, as the node writes them (a
    predicate with no value is left out); ``tag`` as the set of valid tags. The resource as
    written; its kind is ``url`` for an http(s) URL, which never becomes an asset node (no
    ``resourceNode``); another resource's kind is only held to the contract's values (the fixtures
    write URLs only). ``staleAfter`` when valid for the profile (``xsd:date``, or ``xsd:dateTime``
    in the instant profile), and with an ``as_of`` also ``stalenessAsOf`` and ``stale``.
    References are judged elsewhere."""
    status, _ = status_fields(concept)
    node: dict[str, Any] = {
        "conceptType": typed_string(concept.type), "title": typed_string(concept.title),
        "description": typed_string(concept.description), "resource": typed_string(concept.resource),
        "trustTier": trust(concept),
        "effectiveStatus": status if status is not None else "unresolved",
        "declaredStatus": concept.status or None,
    }
    stale_after = valid_temporal(concept.stale_after, profile)
    literal = "xsd:date" if profile == DEFAULT_PROFILE else "xsd:dateTime"
    if stale_after is not None:
        node["staleAfter"] = {"@value": stale_after, "@type": literal}
        if as_of is not None:
            node["stalenessAsOf"] = {"@value": as_of, "@type": literal}
            node["stale"] = {"@value": stale_value(stale_after, as_of, profile, tool="search_concepts"),
                             "@type": "xsd:boolean"}
    node = {k: v for k, v in node.items() if v is not None}
    node["tag"] = set(valid_tags(concept))
    return node


def same_literal(got: Any, want: Any) -> bool:
    """Equal values; an ``xsd:dateTime`` literal equals another of the same instant (the contract
    does not say whether an offset is kept as written)."""
    if isinstance(want, dict) and want.get("@type") == "xsd:dateTime" and isinstance(got, dict) \
            and got.get("@type") == "xsd:dateTime" and set(got) == {"@value", "@type"}:
        mine, theirs = (instant(str(v["@value"])) or v["@value"] for v in (got, want))
        return mine == theirs
    return bool(got == want)


def graph_concept_differences(node: dict[str, Any], concept: Concept, profile: str = DEFAULT_PROFILE,
                              as_of: str | None = None) -> dict[str, tuple[Any, Any]]:
    """``{predicate: (got, want)}`` where ``node`` differs from :func:`expected_graph_concept`: a
    single value is a scalar, several an array, none no key at all."""
    want = expected_graph_concept(concept, profile, as_of)
    out: dict[str, tuple[Any, Any]] = {}
    for key in GRAPH_CONCEPT_SCALARS:
        if not same_literal(node.get(key, "<missing>"), want.get(key, "<missing>")):
            out[key] = (node.get(key, "<missing>"), want.get(key, "<missing>"))
    resource, kind = want.get("resource"), node.get("resourceKind", "<missing>")
    if resource is not None and url_resource(resource) and (kind != "url" or "resourceNode" in node):
        out["resourceKind"] = ((kind, node.get("resourceNode", "<missing>")), ("url", "<missing>"))
    elif resource is not None and kind not in RESOURCE_KINDS:
        out["resourceKind"] = (kind, RESOURCE_KINDS)
    elif resource is None and kind != "<missing>":
        out["resourceKind"] = (kind, "<missing>")
    got, tags = node.get("tag", "<missing>"), want["tag"]
    values = [] if got == "<missing>" else got if isinstance(got, list) else [got]
    shape = (got == "<missing>") if not tags else (not isinstance(got, list)) if len(tags) == 1 else True
    if set(values) != tags or not shape:
        out["tag"] = (got, sorted(tags))
    return out


# ---- comparison -------------------------------------------------------------------------------

# Arrays whose order the contract leaves open: it keeps the valid sources and events but names no
# order for them (tools.toml orders only projection.attributions), so they compare as multisets.
UNORDERED = frozenset({"sources", "verified", "attributions[].sources", "attributions[].references",
                       "attributions[].definitions"})


def _as_multiset(items: list) -> list:
    """The items in one canonical order; a key order of their own (free in JSON) never counts."""
    return sorted(items, key=lambda item: json.dumps(item, sort_keys=True, default=repr))


def _comparable(field: str, value: Any) -> Any:
    if field in UNORDERED and isinstance(value, list):
        return _as_multiset(value)
    if field == "attributions" and isinstance(value, list):
        return [{k: _comparable(f"attributions[].{k}", v) for k, v in item.items()} if isinstance(item, dict)
                else item for item in value]
    return value


def field_differences(got: Any, want: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """``{field: (got, want)}`` for each contract field that differs. Key order and extra keys are
    not judged here (the output schema closes the objects; JSON key order is free)."""
    if not isinstance(got, dict):
        return {"(whole object)": (got, want)}
    return {k: (got.get(k, "<missing>"), w) for k, w in want.items()
            if _comparable(k, got.get(k, "<missing>")) != _comparable(k, w)}
