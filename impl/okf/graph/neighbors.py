"""get_neighbors: bounded navigation and relation edges around one concept, sources apart.

Pure rules over plain edge records (spec/okf/contract/read.md §3.6, seed 000):

- navigation edges are resolved Markdown links whose target concept exists (fragments dropped,
  duplicates kept, one edge per occurrence); relation edges are resolved ``relations`` entries,
  with ``from``/``to`` in the escaped relation-ref form (``hash\\#name``, ``a#section``);
- ``out`` keeps edges leaving the concept, ``in`` edges entering it, ``both`` either (a
  self-edge once);
- order: kind (navigation, relation), from, to, relation type (null as ""); ``total`` before
  the limit; more than 100,000 selected edges is ``resource_limit``;
- provenance sources are listed only for ``out``/``both`` with kind ``source``, sorted by id,
  resource, title; more than 100 is ``resource_limit``, never a silent drop.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from knowspec.impl import runtime as process
from knowspec.impl.errors import ToolError
from knowspec.impl.okf.parsing.links import TargetMemo
from knowspec.impl.rules.ordering import edge_key, source_key, truncate

KIND_ORDER = ("navigation", "relation", "source")
MAX_CANDIDATE_EDGES = 100_000
MAX_SOURCES = 100
LIMIT_MESSAGE = "get neighbors exceeds MCP resource limits"


@dataclass(frozen=True, slots=True)
class Edge:
    """One concept edge. ``source_id``/``target_id`` are the concept parts used for cards."""

    kind: str  # "navigation" | "relation"
    source: str  # wire ``from``
    target: str  # wire ``to``
    relation_type: str | None
    source_id: str
    target_id: str

    def sort_key(self) -> tuple:
        return edge_key(self.kind, self.source, self.target, self.relation_type)


@dataclass
class EdgeIndex:
    """Edges of one snapshot keyed by the concept they leave and the concept they enter.

    A navigation edge is kept as the other end's concept ID alone (``outgoing[a]`` holds ``b``,
    ``incoming[b]`` holds ``a``): it is all an edge from ``a`` to ``b`` says, and a bundle has
    tens of thousands of them (databricks-okf: 43,000 records, 3.3 MiB). :func:`select_edges`
    makes the records of the edges it selects.
    """

    outgoing: dict[str, list[Edge | str]] = field(default_factory=lambda: defaultdict(list))
    incoming: dict[str, list[Edge | str]] = field(default_factory=lambda: defaultdict(list))

    def leaving(self, concept_id: str) -> list[Edge]:
        """The records of the edges leaving ``concept_id``, in index order."""
        return [navigation_edge(concept_id, kept) if isinstance(kept, str) else kept
                for kept in self.outgoing.get(concept_id, ())]

    def entering(self, concept_id: str) -> list[Edge]:
        """The records of the edges entering ``concept_id``, in index order."""
        return [navigation_edge(kept, concept_id) if isinstance(kept, str) else kept
                for kept in self.incoming.get(concept_id, ())]

    @classmethod
    def of(cls, edges: Iterable[Edge]) -> "EdgeIndex":
        index = cls()
        for edge in edges:
            index.outgoing[edge.source_id].append(edge)
            index.incoming[edge.target_id].append(edge)
        return index


def edge_index_for(snapshot: Any, check_cancelled: Callable[[], None] = lambda: None) -> EdgeIndex:
    """All existing navigation and relation edges of a snapshot, in concept then body order.

    Reads each concept's ``link_target_ids`` (its links' ``target_id``s), judging existence
    against one set of IDs; relations go through ``Snapshot.relations`` for the fragment rule.
    Same edges as walking ``Snapshot.navigation``, without a record per link.
    """
    with process.current().gc_paused():  # tens of thousands of acyclic records; collector passes would rescan the bundle
        return _edge_index(snapshot, check_cancelled)


def _edge_index(snapshot: Any, check_cancelled: Callable[[], None]) -> EdgeIndex:
    ids = set(snapshot.concepts)
    index = EdgeIndex()
    outgoing, incoming = index.outgoing, index.incoming
    memo: TargetMemo = {}
    for n, (cid, concept) in enumerate(snapshot.concepts.items()):
        if n % 64 == 0:
            check_cancelled()
        for target in concept.link_target_ids(memo):
            if target is not None and target in ids:
                outgoing[cid].append(target)
                incoming[target].append(cid)
        if concept.relations:
            for rel in snapshot.relations(cid):
                if rel.target_exists:
                    r = rel.relation
                    edge = Edge("relation", r.from_ref, r.to_ref, r.relation_type, cid, r.target_id)
                    outgoing[cid].append(edge)
                    incoming[r.target_id].append(edge)
    return index


def navigation_edge(source_id: str, target_id: str) -> Edge:
    """The record of the navigation edge from one concept to another."""
    return Edge("navigation", source_id, target_id, None, source_id, target_id)


def normalise_kinds(kinds: Sequence[str]) -> list[str]:
    """The echoed kinds, always in navigation, relation, source order (the schema bounds them)."""
    chosen = set(kinds)
    return [k for k in KIND_ORDER if k in chosen]


def select_edges(index: EdgeIndex, concept_id: str, direction: str, kinds: Sequence[str]) -> list[Edge]:
    """All edges of the chosen kinds touching the concept in the chosen direction, sorted."""
    wanted = {k for k in kinds if k != "source"}
    if not wanted:
        return []
    candidates: list[Edge] = []
    if direction in ("out", "both"):
        candidates.extend(e for e in index.leaving(concept_id) if e.kind in wanted)
    if direction in ("in", "both"):
        for edge in index.entering(concept_id):
            if edge.kind in wanted and not (direction == "both" and edge.source_id == concept_id):
                candidates.append(edge)
    if len(candidates) > MAX_CANDIDATE_EDGES:
        raise ToolError("resource_limit", LIMIT_MESSAGE)
    candidates.sort(key=Edge.sort_key)
    return candidates


@dataclass(frozen=True)
class SourceEntry:
    id: str
    resource: str
    title: str

    def as_dict(self) -> dict[str, str]:
        return {"id": self.id, "resource": self.resource, "title": self.title}


def select_sources(sources: Sequence[SourceEntry], direction: str, kinds: Sequence[str]) -> list[SourceEntry]:
    """Provenance sources: only for kind ``source`` and an outgoing direction; capped at 100."""
    if "source" not in kinds or direction == "in":
        return []
    if len(sources) > MAX_SOURCES:
        raise ToolError("resource_limit", LIMIT_MESSAGE)
    return sorted(sources, key=lambda s: source_key(s.id, s.resource, s.title))


@dataclass(frozen=True)
class Neighbourhood:
    edges: list[Edge]
    total: int
    truncated: bool
    sources: list[SourceEntry]


def neighbourhood(
    index: EdgeIndex,
    concept_id: str,
    direction: str,
    kinds: Sequence[str],
    limit: int,
    sources: Sequence[SourceEntry],
) -> Neighbourhood:
    """The bounded answer of get_neighbors before cards are attached."""
    selected = select_edges(index, concept_id, direction, kinds)
    chosen_sources = select_sources(sources, direction, kinds)
    page, total, truncated = truncate(selected, limit)
    return Neighbourhood(page, total, truncated, chosen_sources)
