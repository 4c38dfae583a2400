"""The v0.2 graph's child nodes of a concept (its provenance and its typed relations), restated
from the frontmatter the suite wrote.

read.md §1.11 closes the classes ``Generation``, ``Verification``, ``ProvenanceSource``,
``ClaimAttribution`` and ``ToolkitExtensionRelation``; §1.7 makes every syntactically valid
relation a node, resolved or not (``targetExists``), its source the subresource that holds it;
§1.3 fixes the synthetic IRIs of a concept's children
(``urn:skosovsky:okf:graph:v0.2:<kind>:<b64(concept ID)>:<b64(ordinal)>``, a six-digit ordinal,
``legacy-`` before it for a ``# Citations`` entry); §1.4, §1.8 and §1.9 say which events and
sources are valid, and when the v0.1 fallbacks stand in. Where the contract is silent the rules
below accept every reading: the kind names, a source's ordinal, an attribution's IRI, a Generation
node when neither half of ``generated`` is valid, a non-empty but invalid actor on a Generation or
as a Verification node, a ClaimAttribution for a label only a source names, and ``legacyFallback: false`` written
or left out. Every function is pure: nodes in, problems (short sentences) out.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections import Counter
from datetime import datetime
from typing import Any
from urllib.parse import unquote

from knowspec.conformance.fixtures.model import Bundle, Concept, Event, render_body
from knowspec.conformance.oracles.okf_cards import (
    DEFAULT_PROFILE, RESOURCE_KINDS, attributions, citations_fallback, instant, normalised_label, rfc3339,
    shared_window, timestamp_fallback, url_resource, valid_actor,
)
from knowspec.conformance.oracles.okf_reads import valid_source

CONCEPT_IRI = "local:bundle:"
SYNTHETIC_IRI = "urn:skosovsky:okf:graph:v0.2:"
OWNER = {"proj:Generation": "generationOf", "proj:Verification": "verificationOf",
         "proj:ProvenanceSource": "sourceOf", "proj:ClaimAttribution": "attributionOf"}
_ORDINAL = re.compile(r"(legacy-)?\d{6}")
ABSENT = "<absent>"


def iri_of(value: Any) -> str:
    """The IRI of ``{"@id": …}`` (or of a bare string)."""
    return str(value.get("@id", "")) if isinstance(value, dict) else str(value or "")


def concept_id_of(iri: str) -> str:
    """A concept IRI's concept ID: the local part, percent-decoded (no one encoding required)."""
    return unquote(iri[len(CONCEPT_IRI):]) if iri.startswith(CONCEPT_IRI) else iri


def concept_ref_of(iri: str) -> tuple[str, str]:
    """``(concept ID, fragment)`` of a concept IRI with an optional ``#fragment``: a ``#`` of the
    ID itself is percent-encoded (§1.3), so the first raw one starts the fragment."""
    base, _, fragment = iri.partition("#")
    return concept_id_of(base), fragment


def _b64(part: str) -> str | None:
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


def child_ordinal(iri: str, concept_id: str) -> str | None:
    """The decoded ordinal of a per-concept child IRI, or None when the IRI breaks §1.3's form
    (the prefix, any kind, the concept ID and a six-digit ordinal, each base64url)."""
    if not iri.startswith(SYNTHETIC_IRI):
        return None
    parts = iri[len(SYNTHETIC_IRI):].split(":")
    if len(parts) != 3 or not parts[0] or "=" in parts[1] + parts[2] or _b64(parts[1]) != concept_id:
        return None
    ordinal = _b64(parts[2])
    return ordinal if ordinal is not None and _ORDINAL.fullmatch(ordinal) else None


def _literal(value: Any, xsd: str) -> Any:
    """The ``@value`` of a typed literal of type ``xsd``; ABSENT for no value, the raw value when
    it is not that literal (so a comparison shows it)."""
    if value is ABSENT:
        return ABSENT
    if isinstance(value, dict) and set(value) == {"@value", "@type"} and value["@type"] == xsd:
        return _frozen(value["@value"])
    return ("not an " + xsd + " literal", _frozen(value))


def _frozen(value: Any) -> Any:
    """``value`` as something a Counter can hold (a JSON array or object as its text)."""
    return json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else value


def _date_time(node: dict, key: str) -> datetime | str | None:
    """``key`` as an instant; None when absent; a description when it is no RFC 3339 dateTime."""
    value = _literal(node.get(key, ABSENT), "xsd:dateTime")
    if value is ABSENT:
        return None
    parsed = instant(value) if isinstance(value, str) else None
    return parsed if parsed is not None else f"{key} {value!r}"


def _fallback_flag(node: dict) -> bool | str:
    """``legacyFallback``: False when absent or false, True when true, else a description."""
    value = _literal(node.get("legacyFallback", ABSENT), "xsd:boolean")
    return False if value is ABSENT else value if isinstance(value, bool) else f"legacyFallback {value!r}"


def owned_nodes(nodes: list) -> dict[str, dict[str, list[dict]]]:
    """``{@type: {concept ID: [nodes]}}`` of the provenance classes, by their owner predicate."""
    out: dict[str, dict[str, list[dict]]] = {t: {} for t in OWNER}
    for node in nodes:
        if isinstance(node, dict) and node.get("@type") in OWNER:
            owner = concept_id_of(iri_of(node.get(OWNER[node["@type"]])))
            out[node["@type"]].setdefault(owner, []).append(node)
    return out


def _ordinal_problems(concept: Concept, nodes: list[dict], what: str) -> list[str]:
    ordinals = [child_ordinal(iri_of(n), concept.id) for n in nodes]
    if None in ordinals:
        return [f"{concept.id}: a {what} node's @id {iri_of(nodes[ordinals.index(None)])!r} is not "
                f"{SYNTHETIC_IRI}<kind>:<b64(ID)>:<b64(ordinal)>"]
    if len(set(ordinals)) != len(ordinals):
        return [f"{concept.id}: two {what} nodes share an ordinal"]
    return []


# ---- Generation (read.md §1.4 generated, §1.8 legacy timestamp) -------------------------------

def generation_problems(concept: Concept, nodes: list[dict]) -> list[str]:
    """``generated`` with a valid actor or an RFC 3339 ``at`` gives one node with the valid halves;
    without ``generated``, a legacy ``timestamp`` gives one with ``legacyFallback`` true (and its
    ``at`` when RFC 3339); otherwise no node. At most one node a concept."""
    where = f"{concept.id}: Generation"
    if len(nodes) > 1:
        return [f"{where}: {len(nodes)} nodes, at most one expected"]
    event: Event | None = concept.generated
    legacy = timestamp_fallback(concept)
    if event is None and not legacy:
        return [f"{where}: a node without generated or timestamp"] if nodes else []
    at = event.at if event is not None else concept.timestamp
    by = event.by if event is not None and valid_actor(event.by) else None
    if not nodes:
        return [f"{where}: missing"] if by is not None or rfc3339(at) else []
    node, problems = nodes[0], _ordinal_problems(concept, nodes, "Generation")
    # an invalid but non-empty actor may be written or left out (the contract says only "actor")
    actors = {by} if by is not None or event is None or not event.by else {None, event.by}
    if node.get("actor") not in actors:
        problems.append(f"{where}: actor {node.get('actor', ABSENT)!r}, expected {by if by else ABSENT!r}")
    got_at = _date_time(node, "at")
    if got_at != instant(at):
        problems.append(f"{where}: at {node.get('at', ABSENT)!r}, expected {at if rfc3339(at) else ABSENT!r}")
    if _fallback_flag(node) is not legacy:
        problems.append(f"{where}: legacyFallback {node.get('legacyFallback', ABSENT)!r}, expected {legacy}")
    return problems


# ---- Verification (read.md §1.4 verified, §1.9 actors; ordered by (at, by)) --------------------

def verification_problems(concept: Concept, nodes: list[dict]) -> list[str]:
    """One node per valid event (valid actor, RFC 3339 ``at``), each with its actor and instant;
    an event with a non-empty invalid actor may be there too; the ordinals follow (at, by)."""
    where = f"{concept.id}: Verification"
    valid = Counter((e.by, instant(e.at)) for e in concept.verified if valid_actor(e.by) and rfc3339(e.at))
    allowed = Counter((e.by, instant(e.at)) for e in concept.verified if e.by and rfc3339(e.at))
    got = Counter((_frozen(n.get("actor")), _date_time(n, "at")) for n in nodes)
    problems = _ordinal_problems(concept, nodes, "Verification")
    if got - allowed or valid - got:
        problems.append(f"{where}: (actor, at) {sorted(map(str, got.elements()))} != the valid events "
                        f"{sorted(map(str, valid.elements()))}")
    elif not problems:
        by_ordinal = [(n.get("at", {}).get("@value"), n.get("actor"))
                      for n in sorted(nodes, key=lambda n: str(child_ordinal(iri_of(n), concept.id)))]
        if _instant_order_is_text_order(concept) and by_ordinal != sorted(by_ordinal):
            problems.append(f"{where}: ordinals not ordered by (at, by): {by_ordinal}")
    return problems


def _instant_order_is_text_order(concept: Concept) -> bool:
    """Whether ordering the events by ``at`` as text and as an instant agree (the contract's
    "ordered by at" does not say which; the order is judged only where both give one answer)."""
    events = [e for e in concept.verified if e.by and rfc3339(e.at)]
    return sorted(events, key=lambda e: (e.at, e.by)) == sorted(events, key=lambda e: (instant(e.at), e.by))


# ---- ProvenanceSource (read.md §1.4 sources, §1.8 legacy citations) ----------------------------

SOURCE_FIELDS = ("sourceID", "resource", "title", "author", "usageCount", "legacyFallback", "legacyCitationNumber",
                 "lastModified", "usageFrom", "usageTo", "sourceUsageWindowOverride")
NO_WINDOW = (ABSENT, ABSENT, ABSENT)


def _comparable_time(text: str, profile: str) -> Any:
    """A profile-dependent value as compared: a date's text, or an instant (an offset need not be
    kept as written)."""
    return text if profile == DEFAULT_PROFILE else instant(text) or text


def _temporal(value: Any, profile: str) -> Any:
    """A profile-dependent literal (``xsd:date``, or ``xsd:dateTime`` in the instant profile) as
    compared; ABSENT stays ABSENT, anything else shows as itself."""
    text = _literal(value, "xsd:date" if profile == DEFAULT_PROFILE else "xsd:dateTime")
    return _comparable_time(text, profile) if isinstance(text, str) and text is not ABSENT else text


def _source_row(node: dict, profile: str, inherited: tuple) -> tuple:
    """A node as :data:`SOURCE_FIELDS`; the concept's shared window written as the source's own
    (override false) reads as no window: the contract does not say whether it is written."""
    row = tuple(_frozen(node.get(k, ABSENT)) for k in SOURCE_FIELDS[:4])
    window = (_temporal(node.get("usageFrom", ABSENT), profile), _temporal(node.get("usageTo", ABSENT), profile),
              _literal(node.get("sourceUsageWindowOverride", ABSENT), "xsd:boolean"))
    return row + (_literal(node.get("usageCount", ABSENT), "xsd:integer"), _fallback_flag(node),
                  _literal(node.get("legacyCitationNumber", ABSENT), "xsd:integer"),
                  _temporal(node.get("lastModified", ABSENT), profile)) + (NO_WINDOW if window == inherited else window)


def _inherited(concept: Concept, profile: str) -> tuple:
    shared = shared_window(concept, profile)
    return NO_WINDOW if shared is None else (_comparable_time(shared["from"], profile), _comparable_time(shared["to"], profile), False)


def expected_source_rows(concept: Concept, profile: str = DEFAULT_PROFILE) -> list[tuple]:
    """Each projected source as :data:`SOURCE_FIELDS` (``ABSENT`` where a predicate has no value):
    the sources valid for the profile, with their own window as an override, or with the citations
    fallback active each numbered entry."""
    if citations_fallback(concept):
        return [(ABSENT, url, title or ABSENT, ABSENT, ABSENT, True, str(n), ABSENT) + NO_WINDOW
                for n, (title, url) in enumerate(concept.citations, 1)]
    return [(s.id or ABSENT, s.resource, s.title or ABSENT, s.author or ABSENT,
             ABSENT if s.usage_count is None else str(s.usage_count), False, ABSENT,
             _comparable_time(s.last_modified, profile) if s.last_modified else ABSENT)
            + (NO_WINDOW if s.usage_window is None else
               (_comparable_time(s.usage_window[0], profile), _comparable_time(s.usage_window[1], profile), True))
            for s in concept.sources if valid_source(s, profile)]


def source_problems(concept: Concept, nodes: list[dict], profile: str = DEFAULT_PROFILE) -> list[str]:
    where = f"{concept.id}: ProvenanceSource"
    inherited = _inherited(concept, profile)
    got = Counter(_source_row(n, profile, inherited) for n in nodes)
    want = Counter(expected_source_rows(concept, profile))
    problems = _ordinal_problems(concept, nodes, "ProvenanceSource")
    if got != want:
        problems.append(f"{where}: {SOURCE_FIELDS} {sorted(map(str, got - want))} written, "
                        f"{sorted(map(str, want - got))} expected")
    for node in nodes:
        kind, resource = node.get("resourceKind", ABSENT), str(node.get("resource", ""))
        if url_resource(resource) and (kind != "url" or "resourceNode" in node):
            problems.append(f"{where}: resourceKind {kind!r} or a resourceNode for the URL {resource!r}")
        elif kind not in RESOURCE_KINDS:
            problems.append(f"{where}: resourceKind {kind!r} outside the contract's values")
    return problems


# ---- ClaimAttribution (read.md §1.8, many-to-many by normalised label) -------------------------

def attribution_problems(concept: Concept, nodes: list[dict], source_nodes: list[dict],
                         profile: str = DEFAULT_PROFILE) -> list[str]:
    """A node per normalised label that a footnote reference or definition uses, with their
    counts, ``resolved`` when a valid source's id has that label, and those sources' nodes."""
    where = f"{concept.id}: ClaimAttribution"
    sources_by_label: dict[str, set[str]] = {}
    for node in source_nodes:
        if isinstance(node.get("sourceID"), str):
            sources_by_label.setdefault(normalised_label(node["sourceID"]), set()).add(iri_of(node))
    got = {_frozen(n.get("sourceID")): n for n in nodes}
    problems = [f"{where}: two nodes for the label {label!r}" for label, count in
                Counter(_frozen(n.get("sourceID")) for n in nodes).items() if count > 1]
    entries = attributions(concept, profile) if "[^" in render_body(concept) else [
        {"normalized_id": normalised_label(s.id), "references": [], "definitions": []}
        for s in concept.sources if valid_source(s, profile) and s.id]
    for entry in entries:
        label, node = entry["normalized_id"], got.get(entry["normalized_id"])
        if not entry["references"] and not entry["definitions"]:
            continue
        if node is None:
            problems.append(f"{where}: no node for the label {label!r}")
            continue
        linked = node.get("attributedSource", [])
        want = {"referenceCount": str(len(entry["references"])), "definitionCount": str(len(entry["definitions"])),
                "resolved": bool(entry["sources"])}
        have = {"referenceCount": _literal(node.get("referenceCount", ABSENT), "xsd:integer"),
                "definitionCount": _literal(node.get("definitionCount", ABSENT), "xsd:integer"),
                "resolved": _literal(node.get("resolved", ABSENT), "xsd:boolean")}
        problems += [f"{where} {label!r}: {k} {have[k]!r}, expected {want[k]!r}" for k in want if have[k] != want[k]]
        sources = {iri_of(x) for x in (linked if isinstance(linked, list) else [linked])}
        if sources != sources_by_label.get(label, set()):
            problems.append(f"{where} {label!r}: attributedSource {sorted(sources)} != the sources with that "
                            f"label {sorted(sources_by_label.get(label, set()))}")
    known = {e["normalized_id"] for e in entries}
    problems += [f"{where}: a node for {label!r}, which no source, reference or definition names"
                 for label in got if label not in known]
    return problems


# ---- ToolkitExtensionRelation (read.md §1.7) ----------------------------------------------------

def expected_relations(bundle: Bundle) -> Counter:
    """``(source, type, target, exists)`` of every relation the fixtures write (all syntactically
    valid), a source or target as ``(concept ID, fragment)``: a subresource's relations have it as
    their source."""
    out: Counter = Counter()
    for concept in bundle.concepts:
        held = [("", r) for r in concept.relations] + [(s.id, r) for s in concept.sections for r in s.relations]
        for fragment, rel in held:
            out[((concept.id, fragment), rel.rel_type, (rel.target, rel.fragment), bundle.relation_resolves(rel))] += 1
    return out


def relation_problems(nodes: list, bundle: Bundle) -> list[str]:
    """The relation nodes are the written relations, each once, ``targetExists`` telling which
    resolve; each has a namespace and a per-concept child IRI of its source's concept."""
    got: Counter = Counter()
    problems = []
    for node in nodes:
        if not (isinstance(node, dict) and node.get("@type") == "proj:ToolkitExtensionRelation"):
            continue
        source = concept_ref_of(iri_of(node.get("relationSource")))
        exists = _literal(node.get("targetExists", ABSENT), "xsd:boolean")
        got[(source, _frozen(node.get("relationType")), concept_ref_of(iri_of(node.get("relationTarget"))), exists)] += 1
        if not isinstance(node.get("extensionNamespace"), str) or not node["extensionNamespace"]:
            problems.append(f"relation of {source[0]!r}: extensionNamespace {node.get('extensionNamespace', ABSENT)!r}")
        if child_ordinal(iri_of(node), source[0]) is None:
            problems.append(f"relation of {source[0]!r}: @id {iri_of(node)!r} is not a child IRI of its concept")
    want = expected_relations(bundle)
    if got != want:
        problems.append(f"relations (source, type, target, exists) {sorted(map(str, (got - want).elements()))} "
                        f"written, {sorted(map(str, (want - got).elements()))} expected")
    return problems


def child_problems(nodes: list, bundle: Bundle, profile: str = DEFAULT_PROFILE) -> list[str]:
    """Every problem of a v0.2 ``@graph``'s concept children against the bundle it projects."""
    return provenance_problems(nodes, bundle, profile) + relation_problems(nodes, bundle)


def provenance_problems(nodes: list, bundle: Bundle, profile: str = DEFAULT_PROFILE) -> list[str]:
    """Every provenance problem of a v0.2 ``@graph`` (of ``profile``) against the bundle it projects."""
    owned = owned_nodes(nodes)
    problems = [f"{cls} node of {owner!r}, which is no concept of the bundle"
                for cls, by_owner in owned.items() for owner in by_owner if owner not in bundle.ids]
    for concept in bundle.concepts:
        mine = {cls: by_owner.get(concept.id, []) for cls, by_owner in owned.items()}
        problems += generation_problems(concept, mine["proj:Generation"])
        problems += verification_problems(concept, mine["proj:Verification"])
        problems += source_problems(concept, mine["proj:ProvenanceSource"], profile)
        problems += attribution_problems(concept, mine["proj:ClaimAttribution"], mine["proj:ProvenanceSource"],
                                         profile)
    return problems
