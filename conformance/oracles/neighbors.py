"""get_neighbors restated: resolved links and relations around one concept, in spec order."""

from __future__ import annotations

from dataclasses import dataclass

from knowspec.conformance.fixtures.model import Bundle, escape_ref, relation_ref
from knowspec.conformance.oracles.okf_reads import valid_source

KIND_ORDER = {"navigation": 0, "relation": 1}
ALL_KINDS = ("navigation", "relation", "source")


@dataclass(frozen=True)
class Edge:
    kind: str
    from_: str
    to: str
    relation_type: str | None
    source_id: str      # concept part of the source end
    target_id: str      # concept part of the target end


def edge_key(kind: str, from_: str, to: str, relation_type: str | None) -> tuple:
    """Sort by kind (navigation first), then from, then to, then relation type (null as "")."""
    return (KIND_ORDER.get(kind, 9), from_.encode(), to.encode(), (relation_type or "").encode())


def all_edges(bundle: Bundle) -> list[Edge]:
    ids = bundle.ids
    edges: list[Edge] = []
    for c in bundle.concepts:
        for link in c.links:
            if link.is_edge(ids):
                edges.append(Edge("navigation", c.id, link.target, None, c.id, link.target))
        for rel in c.relations:
            if not bundle.relation_resolves(rel):
                continue
            edges.append(Edge("relation", escape_ref(c.id), relation_ref(rel), rel.rel_type, c.id, rel.target))
    return edges


@dataclass(frozen=True)
class ExpectedNeighbors:
    edges: tuple[tuple[str, str, str, str | None], ...]   # (kind, from, to, relation_type)
    total: int
    sources: tuple[tuple[str, str, str], ...]             # (id, resource, title)


def expected_neighbors(bundle: Bundle, concept_id: str, direction: str = "both",
                       kinds: tuple[str, ...] = ALL_KINDS, limit: int = 20) -> ExpectedNeighbors:
    selected = []
    for e in all_edges(bundle):
        if e.kind not in kinds:
            continue
        outgoing = e.source_id == concept_id
        incoming = e.target_id == concept_id
        if (direction == "out" and outgoing) or (direction == "in" and incoming) or (
                direction == "both" and (outgoing or incoming)):
            selected.append((e.kind, e.from_, e.to, e.relation_type))
    selected.sort(key=lambda t: edge_key(*t))
    sources: tuple[tuple[str, str, str], ...] = ()
    if "source" in kinds and direction in ("out", "both"):
        concept = bundle.concept(concept_id)
        sources = tuple(sorted(((s.id, s.resource, s.title) for s in concept.sources if valid_source(s)),
                               key=lambda s: tuple(x.encode() for x in s)))
    return ExpectedNeighbors(tuple(selected[:limit]), len(selected), sources)
