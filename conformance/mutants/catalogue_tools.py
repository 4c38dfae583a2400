"""Second catalogue: response edits on every tool the first batch left alone (19 tools).

Each edit breaks one rule of one tool's result (an order, a count, a field, a binding between
calls) and keeps the result schema-valid where it can, so the oracle checks, not the schema check,
have to notice. Registered into ``catalogue.MUTANTS`` with the tool as the only tool to judge.
"""

from __future__ import annotations

import copy
import json
import hashlib
from typing import Any, Callable

from knowspec.conformance.mutants.catalogue import (
    _drop_last, _reverse, args_of, edit_success, envelope, mutant, set_structured, success, tool_of,
)

Edit = Callable[[dict], bool]


def add(name: str, tool: str, rule: str, edit: Edit, killed_by: tuple[str, ...], kind: str) -> None:
    mutant(name, rule, killed_by, kind=kind)(edit_success(tool, edit))


# ---- small edits ------------------------------------------------------------------------------

def items_edit(key: str, each: Callable[[dict], bool], first_only: bool = True) -> Edit:
    """Apply ``each`` to the items of ``out[key]`` until one changes (or to all)."""
    def edit(out: dict) -> bool:
        changed = False
        for item in out.get(key) or []:
            if isinstance(item, dict) and each(item):
                changed = True
                if first_only:
                    break
        return changed

    return edit


def set_field(field: str, value: Callable[[Any], Any]) -> Callable[[dict], bool]:
    def each(item: dict) -> bool:
        if field not in item:
            return False
        new = value(item[field])
        changed = new != item[field]
        item[field] = new
        return changed

    return each


def swapped(old: Any, new: Any) -> Callable[[Any], Any]:
    """A ``set_field`` value: ``new`` where the field holds ``old``, else the field unchanged."""
    return lambda value: new if value == old else value


def plus(n: int) -> Callable[[Any], Any]:
    return lambda v: v + n if isinstance(v, int) and not isinstance(v, bool) and v + n >= 0 else v


def drop_first(key: str) -> Edit:
    def edit(out: dict) -> bool:
        if out.get(key):
            out[key] = out[key][1:]
            return True
        return False

    return edit


def last_line_dropped(text: Any) -> Any:
    if not isinstance(text, str) or "\n" not in text.rstrip("\n"):
        return text
    return text.rstrip("\n").rsplit("\n", 1)[0]


def nested(key: str, edit: Edit) -> Edit:
    def apply(out: dict) -> bool:
        inner = out.get(key)
        return isinstance(inner, dict) and edit(inner)

    return apply


def both(*edits: Edit) -> Edit:
    def apply(out: dict) -> bool:
        return any([e(out) for e in edits])

    return apply


def other_digest(value: Any) -> Any:
    if isinstance(value, str) and value.startswith("sha256:"):
        return "sha256:" + hashlib.sha256(value.encode()).hexdigest()
    return value


# ---- OKF read tools ---------------------------------------------------------------------------
LIST, READ, SECT, GRAPH, VALID = "list_concepts", "read_concept", "search_sections", "get_semantic_graph", "validate_bundle"
O_LIST, O_READ, O_SECT, O_GRAPH, O_VALID = ("oracle_list_concepts",), ("oracle_read_concept",), \
    ("oracle_search_sections",), ("oracle_semantic_graph",), ("oracle_validate_bundle",)


def _stale_flip(item: dict) -> bool:
    if isinstance(item.get("stale"), bool) and item.get("stale_after"):
        item["stale"] = not item["stale"]
        return True
    return False


def _stale_true_to_null(item: dict) -> bool:
    if item.get("stale") is True:
        item["stale"] = None
        return True
    return False


add("list_concepts_drop_last_card", LIST, "one card per concept", _drop_last("concepts"), O_LIST, "results")
add("list_concepts_reverse", LIST, "cards sorted by concept ID byte-wise", _reverse("concepts"), O_LIST, "ordering")
add("list_concepts_stale_flipped", LIST, "stale iff as_of >= stale_after (inclusive)",
    items_edit("concepts", _stale_flip), O_LIST, "temporal")
add("list_concepts_stale_nulled", LIST, "with as_of, a valid stale_after gives a boolean stale",
    items_edit("concepts", _stale_true_to_null), O_LIST, "temporal")
add("list_concepts_source_count_plus_one", LIST, "source_count counts the valid sources",
    items_edit("concepts", set_field("source_count", plus(1))), O_LIST, "results")
add("list_concepts_title_is_id", LIST, "the card title is the frontmatter title",
    items_edit("concepts", lambda c: set_field("title", lambda t: c.get("id") if t else t)(c)), O_LIST, "results")
add("list_concepts_generated_at_nulled", LIST, "generated_at is generated.at, else the legacy timestamp",
    items_edit("concepts", set_field("generated_at", lambda at: None)), O_LIST, "results")
add("list_concepts_timestamp_fallback_unflagged", LIST, "legacy_derived.generated flags the timestamp fallback",
    items_edit("concepts", nested("legacy_derived", set_field("generated", lambda on: False))), O_LIST, "results")
add("list_concepts_citations_unflagged", LIST, "legacy_derived.citations flags the # Citations fallback",
    items_edit("concepts", nested("legacy_derived", set_field("citations", lambda on: False))), O_LIST, "results")
add("list_concepts_citations_always_flagged", LIST, "the # Citations fallback needs the section and no sources key",
    items_edit("concepts", nested("legacy_derived", set_field("citations", lambda on: True)), first_only=False),
    O_LIST, "results")

add("read_concept_drops_last_body_line", READ, "body is the file's Markdown body",
    lambda out: set_field("body", last_line_dropped)(out), O_READ, "results")
add("read_concept_frontmatter_trimmed", READ, "frontmatter_yaml is the exact bytes between the fences",
    lambda out: set_field("frontmatter_yaml", last_line_dropped)(out), O_READ, "results")
add("read_concept_path_without_md", READ, "path is the bundle-relative file path",
    lambda out: set_field("path", lambda p: p[:-3] if isinstance(p, str) and p.endswith(".md") else p)(out),
    O_READ, "results")
add("read_concept_projection_stale_after_null", READ, "projection.stale_after is the valid raw value",
    nested("projection", set_field("stale_after", lambda v: None)), O_READ, "temporal")


# ---- concept cards and the read_concept projection ---------------------------------------------
# Each edit keeps the answer schema-valid and the hits and edges as they were: only the data a card
# or the projection states about its concept changes, which only the card oracles compare.
SEARCH, NEIGH = "search_concepts", "get_neighbors"
O_SEARCH_CARDS, O_NEIGH_CARDS = ("oracle_search_cards",), ("oracle_neighbor_cards",)


def hit_cards(each: Callable[[dict], bool]) -> Edit:
    """Apply ``each`` to the search hits' cards until one changes."""
    return items_edit("hits", lambda hit: isinstance(hit.get("concept"), dict) and each(hit["concept"]))


def edge_cards(end: str, each: Callable[[dict], bool]) -> Edit:
    """Apply ``each`` to the ``end`` ("source" or "target") card of the edges until one changes."""
    return items_edit("edges", lambda edge: isinstance(edge.get(end), dict) and each(edge[end]))


def reordered(items: Any) -> Any:
    """A list of two or more distinct items, reversed (a list reading the same both ways is kept)."""
    return items[::-1] if isinstance(items, list) and items[::-1] != items else items


def last_dropped(items: Any) -> Any:
    return items[:-1] if isinstance(items, list) and items else items


def edited_text(text: Any) -> Any:
    return text + " (edited)" if isinstance(text, str) and text else text


def _trust_raised(card: dict) -> bool:
    if card.get("trust") in ("unverified", "machine-confirmed"):
        card["trust"] = "human-reviewed"
        return True
    return False


def _source_card_is_target_card(edge: dict) -> bool:
    source, target = edge.get("source"), edge.get("target")
    if isinstance(source, dict) and isinstance(target, dict) and source.get("id") != target.get("id"):
        edge["source"] = copy.deepcopy(target)
        edge["source"]["id"] = source.get("id")     # the id stays: the rest is another concept's card
        return True
    return False


def _projection_title_of_previous_read(request: dict, response: dict, state: dict) -> dict:
    """Answers each read with the title the previous read's projection had (another concept's)."""
    out = success(response)
    if tool_of(request) != READ or out is None or not isinstance(out.get("projection"), dict):
        return response
    previous, state["title"] = state.get("title", out["projection"].get("title")), out["projection"].get("title")
    if previous == out["projection"].get("title"):
        return response
    new = copy.deepcopy(out)
    new["projection"]["title"] = previous
    return set_structured(response, new)


_projection_title_of_previous_read.tools = (READ,)  # type: ignore[attr-defined]

add("search_card_title_edited", SEARCH, "a hit's card title is its concept's frontmatter title",
    hit_cards(set_field("title", edited_text)), O_SEARCH_CARDS, "results")
add("search_card_tags_reversed", SEARCH, "a hit's card tags are the valid tags in frontmatter order",
    hit_cards(set_field("tags", reordered)), O_SEARCH_CARDS, "results")
add("search_card_stale_flipped", SEARCH, "a hit's card stale compares the call's as_of with stale_after",
    hit_cards(_stale_flip), O_SEARCH_CARDS, "temporal")
add("search_card_trust_raised", SEARCH, "a hit's card trust comes from the valid verified events",
    hit_cards(_trust_raised), O_SEARCH_CARDS, "results")
add("list_concepts_trust_raised", LIST, "a card's trust comes from the valid verified events",
    items_edit("concepts", _trust_raised), O_LIST, "results")
add("neighbors_focus_card_stale_after_nulled", NEIGH, "the focus card's stale_after is the valid raw value",
    nested("concept", set_field("stale_after", lambda v: None)), O_NEIGH_CARDS, "temporal")
add("neighbors_target_card_tags_dropped", NEIGH, "an edge's target card lists its concept's tags",
    edge_cards("target", set_field("tags", lambda t: [] if t else t)), O_NEIGH_CARDS, "results")
add("neighbors_source_card_of_other_concept", NEIGH, "an edge's source card is the card of its source concept",
    items_edit("edges", _source_card_is_target_card), O_NEIGH_CARDS, "results")
add("read_concept_projection_tag_dropped", READ, "projection.tags are every valid tag",
    nested("projection", set_field("tags", last_dropped)), O_READ, "results")
add("read_concept_projection_tags_reversed", READ, "projection.tags keep the frontmatter order",
    nested("projection", set_field("tags", reordered)), O_READ, "results")
add("read_concept_projection_trust_raised", READ, "projection.trust comes from the valid verified events",
    nested("projection", _trust_raised), O_READ, "results")
add("read_concept_projection_source_author_blanked", READ, "projection.sources carry each source's author",
    nested("projection", items_edit("sources", set_field("author", lambda a: ""))), O_READ, "results")
add("read_concept_timestamp_fallback_unflagged", READ, "legacy_fallback flags the timestamp fallback",
    nested("legacy_fallback", set_field("generated_from_timestamp", lambda on: False)), O_READ, "results")
add("read_concept_citations_fallback_unflagged", READ, "legacy_fallback flags the # Citations fallback",
    nested("legacy_fallback", set_field("sources_from_citations", lambda on: False)), O_READ, "results")
add("read_concept_projection_generated_at_nulled", READ, "projection.generated.at is the valid generated.at",
    nested("projection", nested("generated", set_field("at", lambda a: None))), O_READ, "results")
add("read_concept_projection_source_window_dropped", READ, "projection.sources carry each source's own usage_window",
    nested("projection", items_edit("sources", set_field("usage_window", lambda w: None))), O_READ, "results")
add("read_concept_projection_shared_window_dropped", READ, "projection.usage_window is the valid shared window",
    nested("projection", set_field("usage_window", lambda w: None)), O_READ, "results")
add("read_concept_projection_computation_nulled", READ, "projection.computation is the valid contract of an "
    "exact Attested Computation", nested("projection", set_field("computation", lambda c: None)), O_READ, "results")
add("list_concepts_computation_absent", LIST, "a card's computation is present for a valid contract",
    items_edit("concepts", nested("computation", set_field("present", lambda on: False))), O_LIST, "results")
add("read_concept_projection_attribution_reference_dropped", READ,
    "projection.attributions list every footnote reference of their label",
    nested("projection", items_edit("attributions", set_field("references", last_dropped))), O_READ, "results")
mutant("read_concept_projection_title_of_previous_read", "the projection is the read concept's, not another's",
       O_READ, kind="results")(_projection_title_of_previous_read)


def _reverse_if_scores_differ(out: dict) -> bool:
    hits = out.get("hits") or []
    if len({h.get("score") for h in hits}) > 1:
        out["hits"] = hits[::-1]
        return True
    return False


add("search_sections_ascending", SECT, "hits by score descending", _reverse_if_scores_differ, O_SECT, "ordering")
add("search_sections_drop_hit_keep_total", SECT, "hits hold the first limit matches", _drop_last("hits"),
    O_SECT + ("truncation",), "limits")
add("search_sections_terms_reversed", SECT, "terms in first-occurrence order", _reverse("terms"), O_SECT, "ordering")
add("search_sections_matched_terms_partial", SECT, "matched_terms are all the query terms",
    items_edit("hits", lambda h: _drop_last("matched_terms")(h)), O_SECT, "results")
add("search_sections_sha_zeroed", SECT, "content_sha256 is the SHA-256 of the file",
    items_edit("hits", set_field("content_sha256", lambda v: "0" * 64)), O_SECT, "results")
add("search_sections_lines_outside", SECT, "line ranges lie inside the file",
    items_edit("hits", set_field("line_end", plus(1000))), O_SECT, "results")
add("search_sections_truncated_flip", SECT, "truncated = total > len(hits)",
    lambda out: set_field("truncated", lambda t: not t)(out), O_SECT + ("truncation",), "limits")


def scaled(factor: float) -> Callable[[Any], Any]:
    return lambda v: v * factor if isinstance(v, (int, float)) and not isinstance(v, bool) else v


def first_rune_dropped(text: Any) -> Any:
    return text[1:] if isinstance(text, str) else text


def other_hex_digest(value: Any) -> Any:
    return hashlib.sha256(f"other {value}".encode()).hexdigest() if isinstance(value, str) else value


# The section data itself: each edit keeps the answer schema-valid, sorted and inside the file.
add("search_sections_heading_blanked", SECT, "heading is the section's heading text",
    items_edit("hits", set_field("heading", lambda h: "")), O_SECT, "results")
add("search_sections_line_end_plus_one", SECT, "line_end is the section's last line (before the next heading)",
    items_edit("hits", set_field("line_end", plus(1))), O_SECT, "results")
add("search_sections_scores_scaled", SECT, "score is the section's BM25 score",
    items_edit("hits", set_field("score", scaled(1.1)), first_only=False), O_SECT, "results")
add("search_sections_snippet_shifted", SECT, "snippet starts 80 runes before the first term token",
    items_edit("hits", set_field("snippet", first_rune_dropped)), O_SECT, "results")
add("search_sections_revision_other", SECT, "snapshot_revision is the SHA-256 of every file's record",
    set_field("snapshot_revision", other_hex_digest), O_SECT, "results")


def _drop_node(pred: Callable[[dict], bool]) -> Edit:
    def edit(out: dict) -> bool:
        nodes = out.get("@graph") or []
        for i, n in enumerate(nodes):
            if isinstance(n, dict) and pred(n):
                del nodes[i]
                return True
        return False

    return edit


def _drop_references(out: dict) -> bool:
    for n in out.get("@graph") or []:
        if isinstance(n, dict) and n.get("references"):
            del n["references"]
            return True
    return False


def _duplicate_first(out: dict) -> bool:
    nodes = out.get("@graph") or []
    if nodes:
        nodes.insert(1, copy.deepcopy(nodes[0]))
        return True
    return False


add("graph_drops_relation", GRAPH, "every typed relation is a node", _drop_node(lambda n: "relationType" in n),
    O_GRAPH, "results")
add("graph_drops_concept", GRAPH, "a node per concept", _drop_node(lambda n: n.get("@type") == "proj:Concept"),
    O_GRAPH, "results")
add("graph_unsorted", GRAPH, "@graph sorted by @id", _reverse("@graph"), O_GRAPH, "ordering")
add("graph_duplicate_node", GRAPH, "@graph deduplicated by @id", _duplicate_first, O_GRAPH, "results")
add("graph_drops_references", GRAPH, "resolved links are references", _drop_references, O_GRAPH, "results")


def _drop_broken_references(out: dict) -> bool:
    """Only the references to concepts in the graph: broken targets left out."""
    nodes = [n for n in out.get("@graph") or [] if isinstance(n, dict)]
    concepts = {n.get("@id") for n in nodes if n.get("@type") == "proj:Concept"}
    for n in nodes:
        refs = n.get("references")
        refs = refs if isinstance(refs, list) else [refs] if refs else []
        kept = [r for r in refs if not (isinstance(r, dict) and r.get("@id") not in concepts)]
        if len(kept) < len(refs):
            n["references"] = kept
            return True
    return False


add("graph_drops_broken_references", GRAPH, "broken link targets are references too", _drop_broken_references,
    O_GRAPH, "results")


def _graph_nodes(cls: str, edit: Callable[[dict], bool]) -> Edit:
    """Apply ``edit`` to the @graph's nodes of type ``proj:<cls>`` until one changes."""
    def each(out: dict) -> bool:
        return any(edit(n) for n in out.get("@graph") or [] if isinstance(n, dict) and n.get("@type") == f"proj:{cls}")

    return each


def _graph_concepts(edit: Callable[[dict], bool]) -> Edit:
    return _graph_nodes("Concept", edit)


def _tags_dropped(node: dict) -> bool:
    return node.pop("tag", None) is not None


add("graph_concept_trust_raised", GRAPH, "a concept node's trustTier comes from the valid verified events",
    _graph_concepts(set_field("trustTier", lambda t: "human-reviewed")), O_GRAPH, "results")
add("graph_concept_unresolved_status_stable", GRAPH, "a malformed status is effectiveStatus unresolved",
    _graph_concepts(set_field("effectiveStatus", swapped("unresolved", "stable"))), O_GRAPH, "results")
add("graph_concept_tags_dropped", GRAPH, "a concept node lists its valid tags", _graph_concepts(_tags_dropped),
    O_GRAPH, "results")
def _stale_flipped(node: dict) -> bool:
    stale = node.get("stale")
    if not isinstance(stale, dict) or not isinstance(stale.get("@value"), bool):
        return False
    node["stale"] = {**stale, "@value": not stale["@value"]}
    return True


add("graph_concept_stale_flipped", GRAPH, "stale is whether as_of reached staleAfter (inclusive)",
    _graph_concepts(_stale_flipped), O_GRAPH, "results")
add("graph_concept_staleness_as_of_dropped", GRAPH, "stalenessAsOf is the as_of, with a valid staleAfter",
    _graph_concepts(lambda n: n.pop("stalenessAsOf", None) is not None), O_GRAPH, "results")
add("graph_instant_profile_named_as_date", GRAPH, "the instant profile's projection is skosovsky/okf-v0.2-instant",
    _graph_nodes("Projection", set_field("profile", lambda p: str(p).replace("-instant", ""))), O_GRAPH, "results")
add("graph_concept_resource_relative", GRAPH, "a concept's URL resource is of kind url",
    _graph_concepts(set_field("resourceKind", lambda k: "relative")), O_GRAPH, "results")


def _bare_path_ambiguous(node: dict) -> bool:
    """The reading read.md's resource rules replaced: a concept's bare path as ambiguous, no asset."""
    if node.get("resourceKind") == "relative" and not str(node.get("resource", "")).startswith("."):
        node["resourceKind"] = "ambiguous"
        node.pop("resourceNode", None)
        return True
    return False


def _asset_exists_flipped(node: dict) -> bool:
    flag = node.get("exists")
    if isinstance(flag, dict) and isinstance(flag.get("@value"), bool):
        flag["@value"] = not flag["@value"]
        return True
    return False


add("graph_bare_resource_ambiguous", GRAPH, "a concept's bare resource path is relative and an asset",
    _graph_concepts(_bare_path_ambiguous), ("oracle_graph_assets",), "results")
add("graph_asset_dropped", GRAPH, "every local resource value is a ReferencedAsset",
    _drop_node(lambda n: n.get("@type") == "proj:ReferencedAsset"), ("oracle_graph_assets",), "results")
add("graph_asset_exists_flipped", GRAPH, "a ReferencedAsset's exists says whether the bundle holds the file",
    _graph_nodes("ReferencedAsset", _asset_exists_flipped), ("oracle_graph_assets",), "results")


add("graph_contract_executor_node_dropped", GRAPH, "a contract names its executor's asset in executorNode",
    _graph_nodes("AttestedComputationContract", lambda n: n.pop("executorNode", None) is not None),
    ("oracle_graph_assets",), "results")
add("graph_executor_asset_role_concept", GRAPH, "an executor's asset has the role executor",
    _graph_nodes("ReferencedAsset", set_field("resourceRole", swapped("executor", "concept"))),
    ("oracle_graph_assets",), "results")
add("graph_contract_file_mode_inline", GRAPH, "a contract with a computation path and no fence is in file mode",
    _graph_nodes("AttestedComputationContract", set_field("computationMode", swapped("file", "inline"))),
    ("oracle_graph_computations",), "results")
add("graph_computation_parameter_dropped", GRAPH, "each valid parameter is a ComputationParameter",
    _drop_node(lambda n: n.get("@type") == "proj:ComputationParameter"), ("oracle_graph_computations",), "results")


def _unflag_legacy(node: dict) -> bool:
    """A v0.1 fallback's node written as a native one: no legacyFallback, no citation number."""
    if "legacyFallback" not in node:
        return False
    del node["legacyFallback"]
    node.pop("legacyCitationNumber", None)
    return True


def _verifications_reordered(out: dict) -> bool:
    """Two events of one concept trade places: the same nodes, the ordinals no longer by (at, by)."""
    nodes = [n for n in out.get("@graph") or [] if isinstance(n, dict) and n.get("@type") == "proj:Verification"]
    for a, b in zip(nodes, nodes[1:]):
        same_concept = a.get("verificationOf") == b.get("verificationOf")
        if same_concept and (a.get("at"), a.get("actor")) != (b.get("at"), b.get("actor")):
            for key in ("actor", "at"):
                a[key], b[key] = b.get(key), a.get(key)
            return True
    return False


def _plain_value(value: Any) -> Any:
    """A typed literal written as its bare ``@value``."""
    return value["@value"] if isinstance(value, dict) and "@value" in value else value


def _plain_integer(value: Any) -> Any:
    plain = _plain_value(value)
    return int(plain) if plain is not value else value


def _broken_relation(node: dict) -> bool:
    return node.get("@type") == "proj:ToolkitExtensionRelation" and node.get("targetExists", {}).get("@value") is False


def _broken_relation_resolved(node: dict) -> bool:
    if not _broken_relation(node):
        return False
    node["targetExists"] = {"@value": True, "@type": "xsd:boolean"}
    return True


def _source_fragment_dropped(node: dict) -> bool:
    """A subresource's relation credited to its concept."""
    source = node.get("relationSource")
    if isinstance(source, dict) and "#" in str(source.get("@id", "")):
        node["relationSource"] = {"@id": source["@id"].split("#")[0]}
        return True
    return False


add("graph_broken_relation_dropped", GRAPH, "a relation that does not resolve is a node too (targetExists false)",
    _drop_node(_broken_relation), O_GRAPH, "results")
add("graph_broken_relation_exists", GRAPH, "targetExists is false when the target or its fragment is missing",
    _graph_nodes("ToolkitExtensionRelation", _broken_relation_resolved), O_GRAPH, "results")
add("graph_subresource_relation_from_concept", GRAPH, "a subresource's relation has the subresource as its source",
    _graph_nodes("ToolkitExtensionRelation", _source_fragment_dropped), O_GRAPH, "results")
add("graph_generation_dropped", GRAPH, "a valid generated event is a Generation node",
    _drop_node(lambda n: n.get("@type") == "proj:Generation"), O_GRAPH, "results")
add("graph_generation_fallback_unflagged", GRAPH, "a Generation from the legacy timestamp has legacyFallback true",
    _graph_nodes("Generation", _unflag_legacy), O_GRAPH, "results")
add("graph_verification_dropped", GRAPH, "every valid verified event is a Verification node",
    _drop_node(lambda n: n.get("@type") == "proj:Verification"), O_GRAPH, "results")
add("graph_verifications_reordered", GRAPH, "Verification ordinals follow (at, by)", _verifications_reordered,
    O_GRAPH, "ordering")
add("graph_source_dropped", GRAPH, "every valid source is a ProvenanceSource node",
    _drop_node(lambda n: n.get("@type") == "proj:ProvenanceSource"), O_GRAPH, "results")
add("graph_citation_source_unflagged", GRAPH, "a # Citations entry's source has legacyFallback and its number",
    _graph_nodes("ProvenanceSource", _unflag_legacy), O_GRAPH, "results")
add("graph_source_usage_count_plain", GRAPH, "usageCount is an xsd:integer literal",
    _graph_nodes("ProvenanceSource", set_field("usageCount", _plain_integer)), O_GRAPH, "results")
add("graph_source_window_override_dropped", GRAPH, "a source's own usage window is flagged as its override",
    _graph_nodes("ProvenanceSource", lambda n: n.pop("sourceUsageWindowOverride", None) is not None), O_GRAPH,
    "results")
add("graph_source_last_modified_plain", GRAPH, "lastModified is an xsd:date (or xsd:dateTime) literal",
    _graph_nodes("ProvenanceSource", set_field("lastModified", _plain_value)), O_GRAPH, "results")
add("graph_attribution_unresolved", GRAPH, "a label a valid source's id carries is resolved",
    _graph_nodes("ClaimAttribution", set_field("resolved", lambda v: {**v, "@value": False})), O_GRAPH, "results")


def _hide_errors(out: dict) -> bool:
    diags = out.get("diagnostics") or []
    errors = [d for d in diags if d.get("severity") == "ERROR"]
    if not errors:
        return False
    out["diagnostics"] = [d for d in diags if d.get("severity") != "ERROR"]
    out["conformance"] = {"conformant": True, "errors": 0}
    return True


add("validate_hides_errors", VALID, "every ERROR is reported and makes the bundle non-conformant", _hide_errors,
    O_VALID, "results")
add("validate_error_count_plus_one", VALID, "errors counts the ERROR diagnostics",
    nested("conformance", set_field("errors", plus(1))), O_VALID, "results")
add("validate_conformant_flipped", VALID, "conformant iff no ERROR",
    nested("conformance", set_field("conformant", lambda c: not c)), O_VALID, "results")
add("validate_diagnostics_reversed", VALID, "diagnostics by severity, file, code, spec_ref, field",
    _reverse("diagnostics"), O_VALID, "ordering")
add("validate_scanned_files_minus_one", VALID, "scanned_files counts the files", set_field("scanned_files", plus(-1)),
    O_VALID, "results")


def _drop_diagnostics(code: str) -> Edit:
    """Every finding with ``code`` left out, the counts kept consistent."""
    def edit(out: dict) -> bool:
        diags = out.get("diagnostics") or []
        kept = [d for d in diags if d.get("code") != code]
        if len(kept) == len(diags):
            return False
        out["diagnostics"] = kept
        guidance = out.get("guidance")
        if isinstance(guidance, dict) and isinstance(guidance.get("warnings"), int):
            guidance["warnings"] = sum(1 for d in kept if d.get("severity") == "WARN")
        return True

    return edit


add("validate_strict_window_order_dropped", VALID, "strict mode warns usage_window_order for a reversed window",
    _drop_diagnostics("usage_window_order"), O_VALID, "results")
add("validate_strict_stale_dropped", VALID, "strict mode with as_of warns stale at a reached boundary",
    _drop_diagnostics("stale"), O_VALID, "results")

# ---- OKF write tools --------------------------------------------------------------------------
W = ("oracle_write_concept",)
P = ("oracle_concept_patch",)
T = ("oracle_temporal_upgrade",)
V = ("oracle_v02_migration",)

add("write_concept_path_basename", "write_concept", "path is the bundle-relative path of the written file",
    set_field("path", lambda p: p.rsplit("/", 1)[-1] if isinstance(p, str) else p), W, "write")
add("write_concept_path_other", "write_concept", "path names the concept written",
    set_field("path", lambda p: "x-" + p if isinstance(p, str) else p), W, "write")


def drifting(field: str) -> Callable[[dict, dict, dict], Edit]:
    """The field changes on every call (a digest that is not a function of the plan)."""
    def make(state: dict) -> Edit:
        def edit(out: dict) -> bool:
            state["n"] = state.get("n", 0) + 1
            if isinstance(out.get(field), str) and out[field].startswith("sha256:"):
                out[field] = "sha256:" + hashlib.sha256(f"{out[field]}{state['n']}".encode()).hexdigest()
                return True
            return False

        return edit

    return make


def stateful(tool: str, make: Callable[[dict], Edit]):
    def mutate(request: dict, response: dict, state: dict) -> dict:
        out = success(response)
        if tool_of(request) != tool or out is None:
            return response
        new = copy.deepcopy(out)
        return set_structured(response, new) if make(state)(new) else response

    mutate.tools = (tool,)  # type: ignore[attr-defined]
    return mutate


def on_replay(tool: str, edit: Edit):
    """The edit applies when the identical arguments were already answered once (a replay)."""
    def mutate(request: dict, response: dict, state: dict) -> dict:
        out = success(response)
        if tool_of(request) != tool or out is None:
            return response
        key = repr(sorted(args_of(request).items()))
        seen = state.setdefault("seen", set())
        if key not in seen:
            seen.add(key)
            return response
        new = copy.deepcopy(out)
        return set_structured(response, new) if edit(new) else response

    mutate.tools = (tool,)  # type: ignore[attr-defined]
    return mutate


def _as_noop(out: dict) -> bool:
    if out.get("status") == "applied":
        out["status"] = "noop"
        if "changed_paths" in out:
            out["changed_paths"] = []
        return True
    return False


mutant("preview_patch_digest_drifts", "the plan digest is a function of the plan", P, kind="binding")(
    stateful("preview_concept_patch", drifting("plan_digest")))
add("preview_patch_no_affected_paths", "preview_concept_patch", "affected_paths name the files the plan changes",
    set_field("affected_paths", lambda p: []), P + ("output_schema",), "write")
add("preview_patch_base_revision_zeroed", "preview_concept_patch", "base_revision is the bundle's revision",
    set_field("base_revision", lambda v: "sha256:" + "0" * 64), P, "binding")
add("preview_patch_diff_old_side_wrong", "preview_concept_patch", "the diff's old side is the current file",
    set_field("diff", lambda d: d.replace("\n-", "\n-#", 1) if isinstance(d, str) else d), P, "write")
add("preview_patch_result_revision_other", "preview_concept_patch", "result_revision is the revision after apply",
    set_field("result_revision", other_digest), P, "binding")
add("apply_patch_result_revision_other", "apply_concept_patch", "apply answers the previewed result_revision",
    set_field("result_revision", other_digest), P, "binding")
add("apply_patch_changed_paths_dropped", "apply_concept_patch", "changed_paths are the written files",
    set_field("changed_paths", lambda p: p[:-1] if isinstance(p, list) and p else p), P, "write")
mutant("apply_patch_replay_differs", "an identical apply repeats its result", P, kind="binding")(
    on_replay("apply_concept_patch", _as_noop))

mutant("preview_v02_digest_drifts", "the migration plan digest is a function of the plan", V, kind="binding")(
    stateful("preview_v02_migration", drifting("plan_digest")))
add("preview_v02_drops_index", "preview_v02_migration", "affected_paths include index.md",
    set_field("affected_paths", lambda p: [x for x in p if x != "index.md"] if isinstance(p, list) else p), V, "write")
add("apply_v02_result_revision_other", "apply_v02_migration", "apply answers the previewed result_revision",
    set_field("result_revision", other_digest), V, "binding")
mutant("apply_v02_replay_differs", "an identical migration apply repeats its result", V, kind="binding")(
    on_replay("apply_v02_migration", _as_noop))

mutant("preview_temporal_digest_drifts", "the upgrade plan digest is a function of the plan", T, kind="binding")(
    stateful("preview_temporal_upgrade", drifting("plan_digest")))
add("preview_temporal_drops_unresolved", "preview_temporal_upgrade", "every unmapped legacy date is unresolved",
    _drop_last("unresolved"), T, "temporal")
def _ready_when_incomplete(out: dict) -> bool:
    if out.get("status") != "incomplete":
        return False
    out.update(status="ready", unresolved=[])
    return True


add("preview_temporal_ready_when_incomplete", "preview_temporal_upgrade", "incomplete while a date is unmapped",
    _ready_when_incomplete, T, "temporal")
add("apply_temporal_result_revision_other", "apply_temporal_upgrade", "apply answers the previewed result_revision",
    set_field("result_revision", other_digest), T, "binding")
mutant("apply_temporal_replay_differs", "an identical upgrade apply repeats its result", T, kind="binding")(
    on_replay("apply_temporal_upgrade", set_field("request_digest", other_digest)))


def recode_on(tool: str, src: str, dst: str):
    def mutate(request: dict, response: dict, state: dict) -> dict:
        env = envelope(response)
        if tool_of(request) != tool or env is None or env.get("code") != src:
            return response
        return set_structured(response, {**env, "code": dst})

    mutate.tools = (tool,)  # type: ignore[attr-defined]
    return mutate


mutant("apply_patch_conflict_as_mismatch", "a moved bundle is revision_conflict, not plan_mismatch", P,
       kind="binding")(recode_on("apply_concept_patch", "revision_conflict", "plan_mismatch"))
mutant("apply_patch_mismatch_as_conflict", "a foreign plan digest is plan_mismatch", P, kind="binding")(
    recode_on("apply_concept_patch", "plan_mismatch", "revision_conflict"))
mutant("read_concept_missing_as_invalid_request", "an unknown concept is concept_not_found (read_concept)",
       ("oracle_read_concept",), kind="errors")(recode_on("read_concept", "concept_not_found", "invalid_request"))
mutant("get_neighbors_missing_as_invalid_request", "an unknown concept is concept_not_found (get_neighbors)",
       ("differential_neighbors",), kind="errors")(recode_on("get_neighbors", "concept_not_found", "invalid_request"))

# ---- help and document pools ------------------------------------------------------------------
POOL = ("oracle_doc_get", "docpool_import_answers")


def _help_last(out: dict) -> bool:
    rows = out.get("results") or []
    if len(rows) > 1 and rows[0].get("id") == "netsim-help":
        out["results"] = rows[1:] + rows[:1]
        return True
    return False


def _first_docs_row(each: Callable[[dict], bool]) -> Edit:
    def edit(out: dict) -> bool:
        for row in out.get("results") or []:
            if row.get("id") != "netsim-help" and each(row):
                return True
        return False

    return edit


add("doc_collections_help_last", "doc_collections", "netsim-help comes first", _help_last,
    ("oracle_doc_collections",), "ordering")
add("doc_collections_topics_plus_one", "doc_collections", "topics counts the topics the caller may read",
    _first_docs_row(set_field("topics", plus(1))), ("oracle_doc_collections", "oracle_doc_stats"), "acl")
add("doc_collections_drop_last", "doc_collections", "every visible collection is listed", _drop_last("results"),
    ("oracle_doc_collections",), "results")

add("doc_search_drop_first", "doc_search", "the best topic is ranked", drop_first("results"), ("oracle_doc_search",),
    "results")
add("doc_search_links_dropped", "doc_search", "hits carry the topic's entity links",
    items_edit("results", set_field("links", lambda l: [])), ("docpool_import_answers",), "results")
add("doc_search_title_other", "doc_search", "hits carry the topic's title",
    items_edit("results", set_field("title", lambda t: f"{t}!")), ("docpool_import_answers",), "results")
add("doc_search_method_vector", "doc_search", "an fts hit says method fts",
    items_edit("results", set_field("method", lambda m: "vector" if m == "fts" else m), first_only=False),
    ("docpool_import_answers", "result_ordering"), "vector")


def _fts_rows(out: dict) -> list[dict]:
    """Full-text rows: doc_search's of method fts, every help_search row (it has no method)."""
    return [r for r in out.get("results") or [] if isinstance(r, dict) and r.get("method", "fts") == "fts"]


def _fts_scores_rounded(out: dict) -> bool:
    """A server scoring with another formula of the same order: two decimals of bm25."""
    rows = _fts_rows(out)
    for r in rows:
        if isinstance(r.get("score"), float):
            r["score"] = round(r["score"], 2)
    return any(isinstance(r.get("score"), float) for r in rows)


def _fts_snippet_unmarked(out: dict) -> bool:
    changed = False
    for r in _fts_rows(out):
        text = r.get("snippet")
        if isinstance(text, str) and ("[" in text or "]" in text):
            r["snippet"] = text.replace("[", "").replace("]", "")
            changed = True
    return changed


def _fts_ties_by_slug_descending(out: dict) -> bool:
    """Equal scores ordered by slug descending (each run of ties reversed): still sorted by score."""
    rows = out.get("results") or []
    if not _fts_rows(out):
        return False
    runs: list[list[dict]] = []
    for r in rows:
        if runs and r.get("score") == runs[-1][0].get("score"):
            runs[-1].append(r)
        else:
            runs.append([r])
    reordered = [r for run in runs for r in reversed(run)]
    out["results"] = reordered
    return reordered != rows


add("doc_search_fts_score_rounded", "doc_search", "fts scores are FTS5's bm25 with the pool's weights",
    _fts_scores_rounded, ("oracle_fts_ranking",), "results")
add("doc_search_fts_snippet_unmarked", "doc_search", "fts snippets are FTS5's snippet() with [ ] marks",
    _fts_snippet_unmarked, ("oracle_fts_ranking",), "results")
add("doc_search_fts_ties_by_slug_descending", "doc_search", "equal fts scores by collection then slug",
    _fts_ties_by_slug_descending, ("oracle_fts_ranking",), "ordering")
add("help_search_score_rounded", "help_search", "scores are FTS5's bm25 with the help pool's weights",
    _fts_scores_rounded, ("oracle_help_fts_ranking",), "results")
add("help_search_snippet_unmarked", "help_search", "snippets are FTS5's snippet() with [ ] marks",
    _fts_snippet_unmarked, ("oracle_help_fts_ranking",), "results")


def _fused_rows(out: dict) -> list[dict]:
    return [r for r in out.get("results") or [] if isinstance(r, dict) and r.get("method") == "fts+vector"]


def _fused_scores_scaled(out: dict) -> bool:
    """A fusion with other weights or k keeps its order but not its sums."""
    rows = _fused_rows(out)
    for r in rows:
        r["score"] = r["score"] * 1.25 if isinstance(r.get("score"), float) else r.get("score")
    return bool(rows)


def _fused_top_two_swapped(out: dict) -> bool:
    """The first two fused topics trade places, each keeping its place's score: still sorted."""
    rows = _fused_rows(out)
    if len(rows) < 2 or rows[0].get("score") == rows[1].get("score"):
        return False
    first, second = rows[0], rows[1]
    for k in set(first) | set(second):
        if k != "score":
            first[k], second[k] = second.get(k), first.get(k)
    return True


add("doc_search_hybrid_scores_scaled", "doc_search", "a hybrid score is the RRF sum (k 60, x1.0 / x1.5)",
    _fused_scores_scaled, ("oracle_hybrid_fusion",), "vector")
add("doc_search_hybrid_top_two_swapped", "doc_search", "hybrid ranks by the fused sum of both lists",
    _fused_top_two_swapped, ("oracle_hybrid_fusion",), "vector")


def _vector_ascending(out: dict) -> bool:
    rows = out.get("results") or []
    if len(rows) > 1 and {r.get("method") for r in rows} & {"vector", "hybrid"} and len({r.get("score") for r in rows}) > 1:
        out["results"] = rows[::-1]
        return True
    return False


add("doc_search_vector_ascending", "doc_search", "vector and hybrid scores descending", _vector_ascending,
    ("result_ordering",), "vector")

add("doc_get_links_reversed", "doc_get", "links by confidence descending, then kind, key", _reverse("links"), POOL,
    "ordering")
add("doc_get_related_reversed", "doc_get", "related by confidence descending, then collection, slug",
    _reverse("related"), ("oracle_doc_get",), "ordering")
add("doc_get_related_dropped", "doc_get", "related lists the topics sharing an entity (at most 10)",
    _drop_last("related"), POOL, "results")
add("doc_get_body_trimmed", "doc_get", "body_md is the topic's Markdown", set_field("body_md", last_line_dropped),
    POOL, "results")
add("doc_get_mtime_nulled", "doc_get", "mtime is the topic's", set_field("mtime", lambda m: None), POOL, "results")

E = ("oracle_doc_entity", "docpool_import_answers")
add("doc_entity_topics_plus_one", "doc_entity", "topics counts the linked topics the caller may see",
    set_field("topics", plus(1)), E, "acl")
add("doc_entity_relations_reversed", "doc_entity", "relations by rel, kind, key", _reverse("relations"), E, "ordering")
add("doc_entity_aliases_dropped", "doc_entity", "aliases list every old name", _drop_last("aliases"), E, "results")
add("doc_entity_relations_in_dropped", "doc_entity", "relations_in lists incoming relations",
    _drop_last("relations_in"), E, "results")
add("doc_entity_help_url_other", "doc_entity", "help_url from the kind's url_template",
    set_field("help_url", lambda u: u + "x" if isinstance(u, str) else u), E, "results")

N = ("oracle_doc_entities", "docpool_import_answers")
add("doc_entities_skip_first", "doc_entities", "the first rows come first", drop_first("results"), N, "limits")
add("doc_entities_reversed", "doc_entities", "entities by kind, key, collection", _reverse("results"), N, "ordering")
add("doc_entities_kind_count_plus_one", "doc_entities", "entities counts the kind's entities",
    items_edit("results", set_field("entities", plus(1))), N, "results")

L = ("oracle_doc_links", "docpool_import_answers")
add("doc_links_drop_last", "doc_links", "every visible linked topic is listed", _drop_last("results"), L, "results")
add("doc_links_confidence_rounded", "doc_links", "confidence is the link's",
    items_edit("results", set_field("confidence", lambda c: round(c, 1) if isinstance(c, float) else c)), L, "results")

HS = ("oracle_help_search",)
add("help_search_drop_first", "help_search", "the best help topic is ranked", drop_first("results"), HS, "results")
add("help_search_form_class_nulled", "help_search", "hits name the topic's form_class",
    items_edit("results", set_field("form_class", lambda f: None)), HS, "results")
add("help_search_breadcrumb_other", "help_search", "hits carry the topic's breadcrumb",
    items_edit("results", set_field("breadcrumb", lambda b: f"{b} >")), HS, "results")
HG = ("oracle_help_get_topic",)
add("help_get_topic_drops_related", "help_get_topic", "related lists the topics sharing a form or code",
    _drop_last("related"), HG, "results")
add("help_get_topic_related_reversed", "help_get_topic", "related by confidence descending, then slug",
    _reverse("related"), HG, "ordering")
add("help_get_topic_body_trimmed", "help_get_topic", "body_md is the topic's", set_field("body_md", last_line_dropped),
    HG, "results")
add("help_get_topic_title_other", "help_get_topic", "title is the topic's", set_field("title", lambda t: f"{t}."),
    HG, "results")
HF = ("oracle_help_form_info",)
add("help_form_info_topics_reversed", "help_form_info", "topics by confidence descending, then slug",
    _reverse("topics"), HF, "ordering")
add("help_form_info_codes_dropped", "help_form_info", "islem_kodlari lists the codes opening the form",
    _drop_last("islem_kodlari"), HF, "results")
add("help_form_info_legacy_alias_dropped", "help_form_info", "an old name is reported as legacy_alias",
    lambda out: out.pop("legacy_alias", None) is not None, HF, "results")
add("help_form_info_confidence_other", "help_form_info", "topic confidence is the link's",
    items_edit("topics", set_field("confidence", lambda c: c / 2 if isinstance(c, (int, float)) else c)), HF,
    "results")


def counts(field: str, n: int) -> Edit:
    return nested("counts", set_field(field, plus(n)))


def each_collection(field: str, n: int) -> Edit:
    def edit(out: dict) -> bool:
        for row in (out.get("collections") or {}).values():
            if isinstance(row, dict) and set_field(field, plus(n))(row):
                return True
        return False

    return edit


HST = ("oracle_help_stats",)
add("help_stats_topic_count_plus_one", "help_stats", "counts.topic counts the help pool's topics",
    counts("topic", 1), HST, "results")
add("help_stats_chunks_minus_one", "help_stats", "each collection counts its chunks", each_collection("chunks", -1),
    HST, "results")
add("help_stats_link_count_plus_one", "help_stats", "counts.link counts the help pool's links", counts("link", 1), HST,
    "results")
DST = ("oracle_doc_stats", "docpool_import_answers")
add("doc_stats_acl_count_plus_one", "doc_stats", "counts.acl counts the caller's topics' ACL rows", counts("acl", 1),
    DST, "acl")
add("doc_stats_collection_topics_plus_one", "doc_stats", "collection topics count the topics the caller may see",
    each_collection("topics", 1), DST, "acl")
add("doc_stats_link_count_minus_one", "doc_stats", "counts.link counts the caller's topics' links",
    counts("link", -1), DST, "results")


# ---- custom text fallbacks (OKF): the text only, the structured content kept ---------------------

def text_edit(tool: str, edit: Callable[[str], str | None]) -> Callable[[dict, dict, dict], dict]:
    """A mutation of one tool's successful text content (``edit`` returns None to leave it)."""
    def mutate(request: dict, response: dict, state: dict) -> dict:
        if tool_of(request) != tool or success(response) is None:
            return response
        out = copy.deepcopy(response)
        for item in out["result"].get("content", []):
            if item.get("type") == "text" and isinstance(item.get("text"), str):
                new = edit(item["text"])
                if new is not None:
                    item["text"] = new
        return out

    mutate.tools = (tool,)  # type: ignore[attr-defined]
    return mutate


def _reordered_summary(text: str) -> str | None:
    """The legacy summary with title before type: the same JSON value, other bytes."""
    try:
        value = json.loads(text)
        rows = [{"id": c["id"], "title": c["title"], "type": c["type"], "path": c["path"]} for c in value["concepts"]]
    except (ValueError, KeyError, TypeError):
        return None
    return json.dumps({"concepts": rows}, ensure_ascii=False, separators=(",", ":")) if rows else None


def _report_with_codes(text: str) -> str | None:
    try:
        value = json.loads(text)
        for d in value["diagnostics"]:
            d["code"] = "x"
    except (ValueError, KeyError, TypeError):
        return None
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")) if value["diagnostics"] else None


TEXT = ("oracle_list_concepts",)
mutant("list_concepts_text_keys_reordered", "the legacy summary's keys are id, type, title, path (Go's bytes)", TEXT,
       kind="text")(text_edit("list_concepts", _reordered_summary))
mutant("validate_bundle_text_with_codes", "the legacy report has no code", ("oracle_validate_bundle",),
       kind="text")(text_edit("validate_bundle", _report_with_codes))
mutant("temporal_preview_text_json", "preview_temporal_upgrade's text is empty", ("oracle_temporal_upgrade",),
       kind="text")(text_edit("preview_temporal_upgrade", lambda text: "{}" if text == "" else None))


def _legacy_edit(change: Callable[[dict], bool], compact: bool = False) -> Callable[[str], str | None]:
    def edit(text: str) -> str | None:
        try:
            doc = json.loads(text)
        except ValueError:
            return None
        if not isinstance(doc, dict) or not change(doc):
            return None
        return json.dumps(doc, ensure_ascii=False, separators=(",", ":")) if compact else \
            json.dumps(doc, ensure_ascii=False, indent=2) + "\n"

    return edit


def _concept_nodes(doc: dict) -> list[dict]:
    return [n for n in doc.get("@graph") or [] if isinstance(n, dict) and n.get("@type") == "okf:Concept"]


def _last_concept_dropped(doc: dict) -> bool:
    nodes = _concept_nodes(doc)
    if nodes:
        doc["@graph"].remove(nodes[-1])
    return bool(nodes)


def _node_keys_reversed(doc: dict) -> bool:
    for node in _concept_nodes(doc):
        items = list(node.items())[::-1]
        node.clear()
        node.update(items)
    return bool(_concept_nodes(doc))


def _references(doc: dict) -> list[list]:
    return [n["references"] for n in _concept_nodes(doc) if isinstance(n.get("references"), list)]


def _broken_references_dropped(doc: dict) -> bool:
    for refs in _references(doc):
        kept = [r for r in refs if not (isinstance(r, dict) and r.get("exists") is False)]
        if len(kept) < len(refs):
            refs[:] = kept
            return True
    return False


def _repeated_references_collapsed(doc: dict) -> bool:
    for refs in _references(doc):
        kept = [r for i, r in enumerate(refs) if r not in refs[:i]]
        if len(kept) < len(refs):
            refs[:] = kept
            return True
    return False


def _subresources_dropped(doc: dict) -> bool:
    graph = doc.get("@graph") or []
    kept = [n for n in graph if not (isinstance(n, dict) and n.get("@type") == "okf:SubResource")]
    doc["@graph"] = kept
    return len(kept) < len(graph)


def _undeclared_fragment_exists(doc: dict) -> bool:
    """A relation to a fragment its concept does not declare, said to exist."""
    for node in doc.get("@graph") or []:
        for value in node.values() if isinstance(node, dict) else ():
            for item in value if isinstance(value, list) else ():
                if isinstance(item, dict) and "#" in str(item.get("@id")) and item.get("exists") is False:
                    item["exists"] = True
                    return True
    return False


def _timestamp_dropped(doc: dict) -> bool:
    nodes = [n for n in _concept_nodes(doc) if "timestamp" in n]
    for node in nodes:
        del node["timestamp"]
    return bool(nodes)


LEGACY = ("oracle_semantic_graph",)
mutant("graph_text_timestamp_dropped", "a legacy node carries the frontmatter's timestamp", LEGACY, kind="text")(
    text_edit("get_semantic_graph", _legacy_edit(_timestamp_dropped)))
mutant("graph_text_broken_references_dropped", "the legacy references keep broken targets (exists false)", LEGACY,
       kind="text")(text_edit("get_semantic_graph", _legacy_edit(_broken_references_dropped)))
mutant("graph_text_repeated_references_collapsed", "the legacy references keep a link's every occurrence", LEGACY,
       kind="text")(text_edit("get_semantic_graph", _legacy_edit(_repeated_references_collapsed)))
mutant("graph_text_subresources_dropped", "a subresource holding relations is an okf:SubResource node", LEGACY,
       kind="text")(text_edit("get_semantic_graph", _legacy_edit(_subresources_dropped)))
mutant("graph_text_undeclared_fragment_exists", "a relation to an undeclared fragment does not exist", LEGACY,
       kind="text")(text_edit("get_semantic_graph", _legacy_edit(_undeclared_fragment_exists)))
mutant("graph_text_compact", "the legacy JSON-LD is 2-space indented", LEGACY, kind="text")(
    text_edit("get_semantic_graph", _legacy_edit(lambda doc: True, compact=True)))
mutant("graph_text_keys_reversed", "the legacy JSON-LD's keys are sorted byte-wise", LEGACY, kind="text")(
    text_edit("get_semantic_graph", _legacy_edit(_node_keys_reversed)))
mutant("graph_text_concept_dropped", "the legacy JSON-LD has a node per concept", LEGACY, kind="text")(
    text_edit("get_semantic_graph", _legacy_edit(_last_concept_dropped)))
