"""Handlers of the OKF query tools: search_concepts, search_sections, get_neighbors, get_semantic_graph.

Each handler takes one snapshot at its start and answers only from it. The pure rules live in
``search_concepts``, ``search_sections``, ``neighbors`` and ``graph*``; this module does the I/O
edge: argument checks the schema layer cannot express (the schema and the generated input
model already bound ``limit``, ``direction``, ``kinds`` and the profile), snapshot loading, per-snapshot indexes
(folded fields, edge index, section index, built once per revision and kept on the snapshot),
concept cards, and the text fallbacks (compact JSON of the structured result, except the graph,
whose text is the legacy JSON-LD document).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Callable, Mapping

from knowspec.generated.models.okf.get_neighbors_input_schema import GetNeighborsInput
from knowspec.generated.models.okf.get_semantic_graph_input_schema import GetSemanticGraphInput
from knowspec.generated.models.okf.search_concepts_input_schema import SearchConceptsInput
from knowspec.generated.models.okf.search_sections_input_schema import SearchSectionsInput
from knowspec.impl import runtime as process
from knowspec.impl.context import CallContext, ToolOutput
from knowspec.impl.errors import ToolError
from knowspec.impl.kept_answers import KeptOutput
from knowspec.impl.okf.bundle.captured_files import captures_released_at_end, digest_of, retried_on_file_change, size_of
from knowspec.impl.okf.bundle.limits import limits_for
from knowspec.impl.okf.graph import render as graph
from knowspec.impl.okf.tools import cards
from knowspec.impl.okf.search import concepts as sc
from knowspec.impl.okf.search import sections as ss
from knowspec.impl.okf.read_errors import concept_not_found, too_many_concepts
from knowspec.impl.okf.concept.ids import canonical_id_error
from knowspec.impl.okf.derived import per_snapshot
from knowspec.impl.okf.model import Snapshot, load_snapshot
from knowspec.impl.rules import go_json
from knowspec.impl.okf.graph.neighbors import (
    EdgeIndex,
    edge_index_for,
    SourceEntry,
    neighbourhood,
    normalise_kinds,
)

if TYPE_CHECKING:
    from knowspec.impl.okf.search.concepts_index import ConceptSearchIndex

MAX_CONCEPTS = 10_000
_CONCEPT_CAP_ADVICE = " Narrowing query will not change this limit."



# --- shared edges --------------------------------------------------------------------------


def compact_json(value: Any) -> str:
    """The text fallback of the query tools: Go's encoding/json bytes, as okf-mcp writes them."""
    return go_json.dumps(value)


def _load(bundle_path: str, ctx: CallContext, operation: str) -> Snapshot:
    snapshot = load_snapshot(bundle_path, ctx)
    snapshot.require_parseable()
    if len(snapshot.concepts) > limits_for(process.of(ctx), concepts=MAX_CONCEPTS).concepts:
        raise too_many_concepts(f"{operation} exceeds MCP resource limits", _CONCEPT_CAP_ADVICE)
    ctx.check_cancelled(operation)
    return snapshot


# --- search_concepts -----------------------------------------------------------------------


def _search_index(snapshot: Snapshot, ctx: CallContext) -> ConceptSearchIndex:
    """Rows of unchanged concepts are reused from the previous index of this root. Its module is
    imported here, at the first search: the index is numpy arrays, and the other OKF tools need
    no numpy (an OKF-only server that never searches concepts never loads it)."""
    from knowspec.impl.okf.search.concepts_index import index_for_snapshot

    return index_for_snapshot(snapshot, lambda: ctx.check_cancelled("search concepts"))


@captures_released_at_end
@retried_on_file_change
def search_concepts(args: SearchConceptsInput, ctx: CallContext) -> ToolOutput:
    """Literal folded substring search; ranked by match field, then ID; bounded by ``limit``."""
    query = args.query
    folded = sc.normalise_query(query)
    temporal = cards.temporal_choice(args.temporal_profile, args.as_of)
    snapshot = _load(args.bundle_path, ctx, "search concepts")
    index = per_snapshot(snapshot, "search_concepts", lambda: _search_index(snapshot, ctx))
    result = index.search(folded, args.limit, lambda: ctx.check_cancelled("search concepts"))
    bases = cards.card_bases(snapshot, temporal.profile, ctx)
    hits = []
    for cid, match in result.hits:
        concept = snapshot.concepts[cid]
        hits.append({"concept": cards.card(concept, temporal, bases.of(concept)), "match": match})
    structured = {
        "query": query,
        "temporal_profile": temporal.profile,
        "as_of": temporal.as_of_echo,
        "total": result.total,
        "truncated": result.truncated,
        "hits": hits,
    }
    return ToolOutput(structured, compact_json(structured))


# --- get_neighbors -------------------------------------------------------------------------


def _edge_index(snapshot: Snapshot, ctx: CallContext) -> EdgeIndex:
    return edge_index_for(snapshot, lambda: ctx.check_cancelled("get neighbors"))


def _sources(concept: Any) -> list[SourceEntry]:
    """The concept's valid provenance sources (date-profile validity, as upstream)."""
    return [SourceEntry(s["id"], s["resource"], s["title"]) for s in cards.valid_sources(concept)]


@captures_released_at_end
@retried_on_file_change
def get_neighbors(args: GetNeighborsInput, ctx: CallContext) -> ToolOutput:
    """Bounded navigation and relation edges around one concept; provenance sources apart."""
    concept_id, direction = args.concept_id, args.direction
    problem = canonical_id_error(concept_id)
    if problem:
        raise ToolError("invalid_request", problem)
    kinds = normalise_kinds(args.kinds)
    temporal = cards.temporal_choice(args.temporal_profile, args.as_of)
    snapshot = _load(args.bundle_path, ctx, "get neighbors")
    concept = snapshot.concepts.get(concept_id)
    if concept is None:
        raise concept_not_found(concept_id)
    index = per_snapshot(snapshot, "neighbors", lambda: _edge_index(snapshot, ctx))
    found = neighbourhood(index, concept_id, direction, kinds, args.limit, _sources(concept))
    card_of = _card_memo(snapshot, temporal, cards.card_bases(snapshot, temporal.profile, ctx))
    structured = {
        "concept": card_of(concept_id),
        "temporal_profile": temporal.profile,
        "as_of": temporal.as_of_echo,
        "direction": direction,
        "kinds": kinds,
        "total": found.total,
        "truncated": found.truncated,
        "edges": [
            {
                "from": e.source,
                "to": e.target,
                "kind": e.kind,
                "relation_type": e.relation_type,
                "source": card_of(e.source_id),
                "target": card_of(e.target_id),
            }
            for e in found.edges
        ],
        "sources": [s.as_dict() for s in found.sources],
    }
    return ToolOutput(structured, compact_json(structured))


def _card_memo(snapshot: Snapshot, temporal: "cards.TemporalChoice", bases: "cards.CardBases") -> Callable[[str], dict]:
    memo: dict[str, dict] = {}

    def card_of(cid: str) -> dict:
        if cid not in memo:
            concept = snapshot.concepts[cid]
            memo[cid] = cards.card(concept, temporal, bases.of(concept))
        return memo[cid]

    return card_of


# --- search_sections -----------------------------------------------------------------------


def snapshot_fingerprint(files: Mapping[str, bytes]) -> str:
    """SHA-256 of Go ``json.Marshal`` of ``[{path,size,sha256}]`` over every file, path order
    (captured files give their kept sizes and digests: none is read)."""
    records = [
        {"path": path, "size": size_of(files, path), "sha256": digest_of(files, path).hex()}
        for path in sorted(files, key=lambda p: p.encode("utf-8", "surrogatepass"))
    ]
    return hashlib.sha256(go_json.dumps(records).encode("utf-8")).hexdigest()


def _section_docs(snapshot: Snapshot):
    # The headings come from an analysis made for this use and not kept (``passing_analysis``):
    # the index is kept per revision (or its bound's failure, as on databricks-okf), so the
    # analyses only held 8.9 MiB of Markdown records between calls (benchmarks/okf_cold_memory.py).
    for cid, concept in snapshot.concepts.items():
        headings = concept.passing_analysis().headings
        sections = ss.split_sections(concept.body, concept.body_start_line, [(h.line, h.text) for h in headings if h.text])
        if len((concept.title or "").encode("utf-8", "surrogatepass")) > ss.MAX_HEADING_BYTES:
            raise ToolError("resource_limit", ss.BOUNDS_MESSAGE)
        yield ss.SectionDoc(cid, concept.path, concept.title or "", concept.sha256(), sections)


@captures_released_at_end
@retried_on_file_change
def search_sections(args: SearchSectionsInput, ctx: CallContext) -> ToolOutput:
    """BM25 AND-of-terms over heading sections, with line locators and digests."""
    query = args.query
    terms = ss.parse_query(query)
    snapshot = _load(args.bundle_path, ctx, "search sections")
    check = lambda: ctx.check_cancelled("search sections")  # noqa: E731
    index = per_snapshot(snapshot, "sections", lambda: ss.build_index(_section_docs(snapshot), check))
    fingerprint = per_snapshot(snapshot, "fingerprint", lambda: snapshot_fingerprint(snapshot.files))
    check()
    structured = ss.search_result(index, query, terms, args.limit, fingerprint,
                                  lambda cid: (snapshot.concepts[cid].body, snapshot.concepts[cid].body_start_line))
    text = compact_json(structured)
    if len(text.encode("utf-8")) > ss.MAX_RESULT_BYTES:
        raise ToolError("resource_limit", ss.BOUNDS_MESSAGE)
    return ToolOutput(structured, text)


# --- get_semantic_graph --------------------------------------------------------------------


@captures_released_at_end
@retried_on_file_change
def get_semantic_graph(args: GetSemanticGraphInput, ctx: CallContext) -> ToolOutput:
    """Whole-bundle JSON-LD: v0.2 projection as structured content, legacy JSON-LD as text.

    The answer is checked against the output schema as it is made and kept as its JSON
    (``graph.semantic_graph``): it goes out as it is, never decoded into values."""
    temporal = cards.temporal_choice(args.temporal_profile, args.as_of)
    snapshot = load_snapshot(args.bundle_path, ctx)
    snapshot.require_parseable()
    ctx.check_cancelled("get semantic graph")
    return KeptOutput(graph.semantic_graph(snapshot, temporal, ctx))
