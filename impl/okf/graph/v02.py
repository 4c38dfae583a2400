"""The ``skosovsky/okf-v0.2`` projection of a snapshot (structured content of get_semantic_graph).

Builds the closed classes of spec/okf/contract/read.md §1.11 from the typed reads of ``projection``:
Projection, Concept, Generation, Verification, ProvenanceSource, ClaimAttribution,
AttestedComputationContract, ComputationParameter, ReferencedAsset, ToolkitExtensionRelation.
Only complete valid observations are projected; dates and datetimes are typed only when valid
under the selected profile; staleness appears only with an explicit ``as_of``.

Synthetic kinds (from the upstream Appendix A golden): ``generation``, ``verification``,
``source``, ``attribution`` (component: normalised label), ``computation-contract``,
``parameter``, ``asset`` (component: bundle path). ``relation`` nodes are keyed by concept and
ordinal; their namespace literal and fragment IRIs are this server's choice (not pinned).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterator
from urllib.parse import quote

from knowspec.impl.okf.concept import projection
from knowspec.impl.okf.parsing import typed
from knowspec.impl.okf.concept.ids import parse_ref
from knowspec.impl.okf.graph.nodes import (
    PATH_SEGMENT_SAFE,
    PROJECTION_IRI,
    Graph,
    Node,
    boolean,
    concept_iri,
    date_time,
    integer,
    iri,
    ordinal,
    synthetic_iri,
    temporal_literal,
    text,
)
from knowspec.impl.okf.graph.resource_values import resolve_resource
from knowspec.impl.okf.graph.targets import NavigationTargets
from knowspec.impl.okf.concept.temporal import INSTANT_PROFILE, parse_rfc3339
from knowspec.impl.rules.ordering import byte_key

PROFILE_DATE = "skosovsky/okf-v0.2"
PROFILE_INSTANT = "skosovsky/okf-v0.2-instant"
RELATION_NAMESPACE = "skosovsky/okf#relations"
class _Builder:
    def __init__(self, snapshot: Any, profile: str, as_of: Any, check: Callable[[], None],
                 targets: NavigationTargets | None = None) -> None:
        self.snapshot = snapshot
        self.targets: NavigationTargets = targets or snapshot.navigation_targets
        self.profile = profile
        self.instant = profile == INSTANT_PROFILE
        self.as_of = as_of
        self.check = check
        self.graph = Graph()  # the concept at hand's own nodes: no other concept adds to them
        self.shared = Graph()  # the projection, and assets (every concept naming one adds to it)

    # -- assets -----------------------------------------------------------------------------

    def _resource(self, owner: Node, concept: Any, resource: str, role: str, prefix: str = "", *, source: bool = False) -> None:
        """Attach ``<prefix>Resource``/``ResourceKind``/``Node`` (or plain ``resource``…) and, for a
        local value, its ReferencedAsset: one per bundle path, every naming adding to it, or, for a
        path that leaves the root, one per (concept, role, value)."""
        names = (f"{prefix}Resource", f"{prefix}ResourceKind", f"{prefix}Node") if prefix else (
            "resource", "resourceKind", "resourceNode")
        owner.add(names[0], text(resource))
        resolved = resolve_resource(resource, concept.path, self.snapshot.files, source=source)
        if resolved is None:
            return
        owner.add(names[1], text(resolved.kind))
        if not resolved.local:
            return
        if resolved.path is None:
            asset = self.graph.node(synthetic_iri("unresolved-asset", concept.id, role, resource), "ReferencedAsset")
        else:
            asset = self.shared.node(synthetic_iri("asset", resolved.path), "ReferencedAsset")
            asset.add("bundlePath", text(resolved.path))
        asset.add("resource", text(resource))
        asset.add("resourceKind", text(resolved.kind))
        asset.add("exists", boolean(resolved.exists))
        asset.add("resourceRole", text(role))
        asset.add("referencedBy", iri(concept_iri(concept.id)))
        owner.add(names[2], iri(asset.iri))

    # -- per concept ------------------------------------------------------------------------

    def concept(self, concept: Any) -> None:
        fm = concept.frontmatter
        node = self.graph.node(concept_iri(concept.id), "Concept")
        node.add("conceptType", text(concept.type or ""))
        node.add("title", text(concept.title or ""))
        node.add("description", text(concept.description or ""))
        if concept.resource:
            self._resource(node, concept, concept.resource, "concept")
        for tag in concept.tags:
            node.add("tag", text(tag))
        for target, _exists in self.targets(concept.id):
            node.add("references", iri(concept_iri(target)))
        node.add("trustTier", text(projection.trust_tier(fm)))
        state = projection.status_state(fm)
        if state["present"] and state["raw"]:
            node.add("declaredStatus", text(state["raw"]))
        node.add("effectiveStatus", text(state["effective"] if state["effective"] is not None else "unresolved"))
        stale_after, stale = projection.staleness(fm, self.profile, self.as_of)
        if stale_after is not None:
            node.add("staleAfter", temporal_literal(stale_after, self.instant))
            if self.as_of is not None:
                node.add("stalenessAsOf", temporal_literal(self.as_of.echo, self.instant))
                node.add("stale", boolean(bool(stale)))
        self.generation(concept, node.iri)
        self.verifications(concept, node.iri)
        sources = self.sources(concept, node.iri)
        self.attributions(concept, node.iri, sources)
        self.computation(concept, node.iri)
        self.relations(concept, node.iri)

    def generation(self, concept: Any, owner: str) -> None:
        fm = concept.frontmatter
        gen = projection.generated(fm)
        legacy = False
        if gen is None and not typed.present(fm, "generated"):
            stamp = typed.get(fm, "timestamp")
            if stamp is not typed.MISSING and not typed.is_duplicated(fm, "timestamp"):
                legacy = True
                at = str(stamp) if typed.is_date_like(stamp) and parse_rfc3339(str(stamp)) else None
                gen = {"by": None, "at": at}
        if gen is None:
            return
        node = self.graph.node(synthetic_iri("generation", concept.id, ordinal(0)), "Generation")
        if gen["by"]:
            node.add("actor", text(gen["by"]))
        if gen["at"]:
            node.add("at", date_time(gen["at"]))
        if legacy:
            node.add("legacyFallback", boolean(True))
        node.add("generationOf", iri(owner))

    def verifications(self, concept: Any, owner: str) -> None:
        events = projection.verification_events(concept.frontmatter)

        def key(event: dict) -> tuple:
            inst = parse_rfc3339(event["at"])
            return ((inst.seconds, inst.nanos) if inst else (0, 0), byte_key(event["by"]))

        for n, event in enumerate(sorted(events, key=key)):
            node = self.graph.node(synthetic_iri("verification", concept.id, ordinal(n)), "Verification")
            node.add("actor", text(event["by"]))
            node.add("at", date_time(event["at"]))
            node.add("verificationOf", iri(owner))

    def sources(self, concept: Any, owner: str) -> list[tuple[str, dict]]:
        fm = concept.frontmatter
        if not typed.present(fm, "sources"):
            self.legacy_citations(concept, owner)
            return []
        entries = typed.get(fm, "sources")
        if typed.is_duplicated(fm, "sources") or not isinstance(entries, list):
            return []
        shared = None
        if typed.present(fm, "usage_window") and not typed.is_duplicated(fm, "usage_window"):
            shared = projection.usage_window(fm["usage_window"], self.profile)
        valid = [e for e in (projection.source_entry(item, self.profile) for item in entries) if e is not None]
        valid.sort(key=lambda e: (byte_key(e["id"]), byte_key(e["resource"]), byte_key(e["title"]), byte_key(e["author"])))
        projected = []
        for index, entry in enumerate(valid):
            node = self.graph.node(synthetic_iri("source", concept.id, ordinal(index)), "ProvenanceSource")
            node.add("sourceID", text(entry["id"]))
            self._resource(node, concept, entry["resource"], "source", source=True)
            node.add("title", text(entry["title"]))
            node.add("author", text(entry["author"]))
            if entry["usage_count"] is not None:
                node.add("usageCount", integer(entry["usage_count"]))
            if entry["last_modified"] is not None:
                node.add("lastModified", temporal_literal(entry["last_modified"], self.instant))
            window, override = (entry["usage_window"], True) if entry["usage_window"] else (shared, False)
            if window is not None:
                node.add("usageFrom", temporal_literal(window["from"], self.instant))
                node.add("usageTo", temporal_literal(window["to"], self.instant))
                node.add("sourceUsageWindowOverride", boolean(override))
            node.add("sourceOf", iri(owner))
            projected.append((node.iri, entry))
        return projected

    def legacy_citations(self, concept: Any, owner: str) -> None:
        """v0.1 ``# Citations`` entries as fallback sources (only when ``sources`` is absent)."""
        if "Citations" not in concept.body or not projection.legacy_flags(concept)["citations"]:
            return
        for index, (number, title, target) in enumerate(citation_entries(concept)):
            node = self.graph.node(synthetic_iri("source", concept.id, f"legacy-{ordinal(index)}"), "ProvenanceSource")
            self._resource(node, concept, target, "source", source=True)
            node.add("title", text(title))
            node.add("legacyFallback", boolean(True))
            node.add("legacyCitationNumber", integer(number))
            node.add("sourceOf", iri(owner))

    def attributions(self, concept: Any, owner: str, sources: list[tuple[str, dict]]) -> None:
        if "[^" not in concept.body:
            return
        by_label: dict[str, list[str]] = {}
        for source_iri, entry in sources:
            if entry["id"]:
                by_label.setdefault(projection.normalize_label(entry["id"]), []).append(source_iri)
        for group in projection.attributions(concept, [e for _, e in sources]):
            if not group["references"] and not group["definitions"]:
                continue
            label = group["normalized_id"]
            node = self.graph.node(synthetic_iri("attribution", concept.id, label), "ClaimAttribution")
            node.add("sourceID", text(label))
            node.add("attributionOf", iri(owner))
            node.add("referenceCount", integer(len(group["references"])))
            node.add("definitionCount", integer(len(group["definitions"])))
            matches = by_label.get(label, [])
            node.add("resolved", boolean(bool(matches)))
            for source_iri in matches:
                node.add("attributedSource", iri(source_iri))

    def computation(self, concept: Any, owner: str) -> None:
        if concept.type != "Attested Computation":
            return
        fm = concept.frontmatter
        node = self.graph.node(synthetic_iri("computation-contract", concept.id, ordinal(0)), "AttestedComputationContract")
        node.add("contractOf", iri(owner))
        node.add("runtime", text(typed.read_str(fm, "runtime") or ""))
        fences = projection.computation_fences(concept)  # closed-flags of candidate fences
        if typed.present(fm, "computation"):
            resource = typed.read_str(fm, "computation")
            if resource is None:
                mode = "malformed"
            elif fences:
                mode = "ambiguous"
            else:
                mode = "file"
                self._resource(node, concept, resource, "computation", "computation")
        else:
            mode = "absent" if not fences else "ambiguous" if len(fences) > 1 else "inline" if fences[0] else "malformed"
        node.add("computationMode", text(mode))
        for role in ("executor", "attester"):
            value = typed.get(fm, role)
            if typed.is_duplicated(fm, role) or not isinstance(value, dict) or not typed.is_str(value.get("resource")):
                continue
            if role == "executor":
                receipt = value.get("receipt", [])
                if not isinstance(receipt, list) or not all(typed.is_str(r) for r in receipt):
                    continue
                for field_name in receipt:
                    node.add("receiptField", text(field_name))
            self._resource(node, concept, value["resource"], role, role)
        params = typed.get(fm, "parameters")
        if not isinstance(params, list) or typed.is_duplicated(fm, "parameters"):
            return
        valid = []
        for item in params:
            if not isinstance(item, dict):
                continue
            name, ptype, required = item.get("name"), item.get("type"), item.get("required")
            if typed.is_str(name) and typed.is_str(ptype) and typed.is_bool(required):
                valid.append((name, ptype, bool(required.value)))
        valid.sort(key=lambda p: (byte_key(p[0]), byte_key(p[1]), p[2]))
        for index, (name, ptype, required) in enumerate(valid):
            param = self.graph.node(synthetic_iri("parameter", concept.id, ordinal(index)), "ComputationParameter")
            param.add("parameterOf", iri(node.iri))
            param.add("name", text(name))
            param.add("parameterType", text(ptype))
            param.add("required", boolean(required))

    def relations(self, concept: Any, owner: str) -> None:
        for index, edge in enumerate(self.snapshot.relations(concept.id)):
            rel = edge.relation
            node = self.graph.node(synthetic_iri("relation", concept.id, ordinal(index)), "ToolkitExtensionRelation")
            node.add("extensionNamespace", text(RELATION_NAMESPACE))
            node.add("relationType", text(rel.relation_type))
            parsed = parse_ref(rel.from_ref)
            source_fragment = parsed[1] if parsed else None
            node.add("relationSource", iri(_fragment_iri(concept.id, source_fragment)))
            node.add("relationTarget", iri(_fragment_iri(rel.target_id, rel.target_fragment)))
            node.add("targetExists", boolean(edge.target_exists))

    # -- whole ------------------------------------------------------------------------------

    def nodes(self) -> Iterator[Node]:
        """Every node, each once it is complete: a concept's own nodes after the concept (then
        dropped here), the projection and the assets at the end."""
        version = self.snapshot.version().version
        proj = self.shared.node(PROJECTION_IRI, "Projection")
        proj.add("profile", text(PROFILE_INSTANT if self.instant else PROFILE_DATE))
        proj.add("projectionVersion", text("0.2"))
        if version["declared"]:
            proj.add("declaredOKFVersion", text(version["declared"]))
        proj.add("effectiveOKFVersion", text(version["effective"] or ""))
        proj.add("versionSource", text(version["resolution"] or ""))
        proj.add("compatibilityMode", text(version["compatibility"] or ""))
        for concept in self.snapshot.concepts.values():
            self.check()
            with concept.bytes_in_hand():  # links, citations and flags each cut the body
                self.concept(concept)
            yield from self.graph.nodes.values()
            self.graph.nodes.clear()
        yield from self.shared.nodes.values()


_CITATION = re.compile(r"^\s{0,3}(?:[-*+]\s+)?\[(\d+)\]\s*\[([^\]]*)\]\(([^()\s]+)(?:\s+[^()]*)?\)")


def citation_entries(concept: Any) -> list[tuple[int, str, str]]:
    """``(number, title, target)`` of the ``[n] [title](target)`` lines of the H1 Citations section."""
    lines = concept.body.split("\n")
    headings = concept.passing_analysis().headings
    for index, heading in enumerate(headings):
        if heading.level == 1 and heading.text.strip() == "Citations":
            first = heading.line - concept.body_start_line + 1
            last = len(lines)
            for later in headings[index + 1 :]:
                if later.level <= 1:
                    last = later.line - concept.body_start_line
                    break
            found = []
            for line in lines[first:last]:
                m = _CITATION.match(line)
                if m:
                    found.append((int(m[1]), m[2], m[3]))
            return found
    return []


def _fragment_iri(concept_id: str, fragment: str | None) -> str:
    """Concept IRI, plus ``#`` and the path-escaped fragment for a subresource."""
    base = concept_iri(concept_id)
    return base if fragment is None else f"{base}#{quote(fragment, safe=PATH_SEGMENT_SAFE)}"


def project_nodes(snapshot: Any, profile: str, as_of: Any, check: Callable[[], None] = lambda: None,
                  targets: NavigationTargets | None = None) -> Iterator[Node]:
    """The nodes of the snapshot's v0.2 JSON-LD document (``render.graph_utf8`` writes it), each
    once, unordered, each given as soon as it is complete: a caller that writes each as it comes
    never holds the whole graph (databricks-okf: ~19 MiB of small objects, whose arenas stayed
    resident after the call); ``targets``: the navigation targets per concept (default
    ``snapshot.navigation_targets``)."""
    try:
        yield from _Builder(snapshot, profile, as_of, check, targets).nodes()
    finally:
        # The IRI memo serves one render: kept, its strings (one per concept) would pin the
        # heap pages the render's transient nodes freed (databricks-okf: ~20 MiB of RSS).
        concept_iri.cache_clear()
