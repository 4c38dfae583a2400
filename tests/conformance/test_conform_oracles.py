"""The independent oracles restate the spec rules: sorted, bounded, and the spec's own examples."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from knowspec.conformance.fixtures.model import Bundle, Concept, Link, Relation
from knowspec.conformance.fixtures.strategies import bundles, cafe_bundle, neighbors_bundle, queries_for
from knowspec.conformance.oracles.neighbors import ALL_KINDS, edge_key, expected_neighbors
from knowspec.conformance.oracles.ordering import ordering_violations
from knowspec.conformance.oracles.search import MATCH_RANK, expected_search, fold
from knowspec.conformance.oracles.truncation import truncation_violations


def test_folding_example_from_the_spec_gives_three_matches_two_shown():
    result = expected_search(cafe_bundle(), "cafe\u0301", 2)
    assert result.hits == (("cafe", "title"), ("third", "title"))
    assert result.total == 3 and result.truncated


def test_fold_joins_decomposed_and_precomposed_forms():
    assert fold("CAFE\u0301") == fold("Café") == "café"


def test_tags_are_matched_one_by_one():
    bundle = Bundle("t", (Concept("x", tags=("foo", "bar")),))
    assert expected_search(bundle, "foo\nbar", 5).total == 0
    assert expected_search(bundle, "foo", 5).hits == (("x", "tags"),)


def test_neighbour_example_from_the_spec():
    both = expected_neighbors(neighbors_bundle(), "a", "both", ALL_KINDS, 20)
    assert both.edges == (("navigation", "a", "b", None), ("navigation", "b", "a", None),
                          ("relation", "b", "a#section", "uses"))
    assert both.total == 3 and len(both.sources) == 1
    incoming = expected_neighbors(neighbors_bundle(), "a", "in", ALL_KINDS, 20)
    assert incoming.total == 2 and incoming.sources == ()


def test_sources_sort_by_id_then_resource_then_title_and_only_outgoing():
    from knowspec.conformance.fixtures.strategies import sources_bundle

    out = expected_neighbors(sources_bundle(), "s", "out")
    assert out.sources == (("", "docs/readme.md", ""), ("a", "https://example.com/a", ""),
                           ("a", "https://example.com/a", "T"), ("b", "https://example.com/z", ""))
    assert expected_neighbors(sources_bundle(), "s", "in").sources == ()


def test_relation_refs_escape_hash_in_ids():
    bundle = Bundle("h", (Concept("hash#name", fragments=("p",)),
                          Concept("src", relations=(Relation("uses", "hash#name", "p"),))))
    edges = expected_neighbors(bundle, "src", "out").edges
    assert edges == (("relation", "src", "hash\\#name#p", "uses"),)


def test_links_in_code_and_broken_links_are_not_edges():
    bundle = Bundle("c", (Concept("a", links=(Link("b", "code_span"), Link("b", "fenced"), Link("zz", "broken"))),
                          Concept("b")))
    assert expected_neighbors(bundle, "a").total == 0


@settings(max_examples=60, deadline=None)
@given(bundles().flatmap(lambda b: st.tuples(st.just(b), queries_for(b), st.integers(1, 100))))
def test_search_oracle_is_sorted_bounded_and_counts_all(case):
    bundle, query, limit = case
    result = expected_search(bundle, query, limit)
    assert len(result.hits) <= limit and result.total >= len(result.hits)
    keys = [(-MATCH_RANK[m], cid.encode()) for cid, m in result.hits]
    assert keys == sorted(keys)
    out = {"hits": [{"concept": {"id": c}, "match": m} for c, m in result.hits], "total": result.total,
           "truncated": result.truncated}
    assert ordering_violations("search_concepts", out, {}) == []
    assert truncation_violations("search_concepts", out, {"limit": limit}, 20) == []


@settings(max_examples=60, deadline=None)
@given(bundles(), st.sampled_from(("in", "out", "both")), st.integers(1, 100))
def test_neighbour_oracle_is_sorted_and_bounded(bundle, direction, limit):
    for cid in sorted(bundle.ids):
        result = expected_neighbors(bundle, cid, direction, ALL_KINDS, limit)
        assert len(result.edges) <= limit and result.total >= len(result.edges)
        assert list(result.edges) == sorted(result.edges, key=lambda e: edge_key(*e))
        if direction == "in":
            assert result.sources == ()


def test_ordering_oracle_flags_a_reversed_pair():
    out = {"hits": [{"concept": {"id": "b"}, "match": "body"}, {"concept": {"id": "a"}, "match": "id"}]}
    assert ordering_violations("search_concepts", out, {}) != []


def test_truncation_oracle_flags_each_broken_invariant():
    assert truncation_violations("search_concepts", {"hits": [1, 2, 3], "total": 3, "truncated": False},
                                 {"limit": 2}, 20)
    assert truncation_violations("search_concepts", {"hits": [1], "total": 0, "truncated": False}, {}, 20)
    assert truncation_violations("search_concepts", {"hits": [1], "total": 5, "truncated": False}, {"limit": 1}, 20)
    assert not truncation_violations("search_concepts", {"hits": [1], "total": 5, "truncated": True},
                                     {"limit": 1}, 20)


def test_go_indented_json_puts_one_item_a_line_and_keeps_empty_containers_short():
    from knowspec.conformance.oracles.go_encoding import go_marshal_indent

    assert go_marshal_indent({"a": [1, {}], "b": [], "c": "<&>"}) == (
        '{\n  "a": [\n    1,\n    {}\n  ],\n  "b": [],\n  "c": "\\u003c\\u0026\\u003e"\n}')


def test_the_legacy_graph_of_a_fixture_is_judged_on_order_keys_and_references():
    from knowspec.conformance.fixtures.model import Bundle, Concept, Link, Relation
    from knowspec.conformance.oracles.go_encoding import go_marshal_indent
    from knowspec.conformance.oracles.okf_legacy_graph import base_context, legacy_problems

    bundle = Bundle("g", (Concept("b", title="B", links=(Link("a"),), relations=(Relation("uses", "a"),)),
                          Concept("a", title="A")))
    context = {**base_context(), "uses": {"@id": "okf:uses", "@type": "@id"}}
    doc = {"@context": dict(sorted(context.items())), "@graph": [
        {"@id": "bundle:a", "@type": "okf:Concept", "title": "A", "type": "Note"},
        {"@id": "bundle:b", "@type": "okf:Concept",
         "references": [{"@type": "okf:Reference", "target": "bundle:a", "exists": True}],
         "title": "B", "type": "Note", "uses": [{"@id": "bundle:a", "exists": True}]}]}
    assert legacy_problems(go_marshal_indent(doc) + "\n", bundle, "go") == []
    doc["@graph"].reverse()
    assert any("file path order" in p for p in legacy_problems(go_marshal_indent(doc) + "\n", bundle, "go"))


def test_the_legacy_graph_keeps_broken_and_repeated_references_a_timestamp_and_each_concepts_subresources():
    from knowspec.conformance.fixtures.model import Bundle, Concept, Link, Relation, Section
    from knowspec.conformance.oracles.go_encoding import go_marshal_indent
    from knowspec.conformance.oracles.okf_legacy_graph import PART_OF, base_context, legacy_problems

    bundle = Bundle("g", (
        Concept("a", title="A", links=(Link("b"), Link("b"), Link("gone", "broken"), Link("b", "external")),
                sections=(Section("s", (Relation("uses", "b", "x"),)),)),
        Concept("b", title="B", fragments=("x",), timestamp="2025-01-02T03:04:05Z")))
    context = {**base_context(), "uses": {"@id": "okf:uses", "@type": "@id"}, "is_part_of": PART_OF}
    ref = {"@type": "okf:Reference", "target": "bundle:b", "exists": True}
    doc = {"@context": dict(sorted(context.items())), "@graph": [
        {"@id": "bundle:a", "@type": "okf:Concept", "references": [
            ref, ref, {"@type": "okf:Reference", "target": "bundle:gone", "exists": False}], "title": "A", "type": "Note"},
        {"@id": "bundle:a#s", "@type": "okf:SubResource", "is_part_of": {"@id": "bundle:a"},
         "uses": [{"@id": "bundle:b#x", "exists": True}]},
        {"@id": "bundle:b", "@type": "okf:Concept", "timestamp": "2025-01-02T03:04:05Z", "title": "B",
         "type": "Note"}]}

    def problems() -> list[str]:
        return legacy_problems(go_marshal_indent(doc) + "\n", bundle, "go")

    assert problems() == []
    doc["@graph"][1]["uses"][0]["exists"] = False
    assert any("uses" in p for p in problems())
    doc["@graph"][1]["uses"][0]["exists"] = True
    refs = doc["@graph"][0]["references"]
    for wrong in (refs[:1] + refs[2:], refs[:2]):  # a repeat collapsed; the broken target left out
        doc["@graph"][0]["references"] = wrong
        assert any("references" in p for p in problems())
    doc["@graph"][0]["references"] = refs
    part = doc["@graph"].pop(1)
    assert any("subresources" in p for p in problems())
    doc["@graph"].insert(1, part)
    del doc["@graph"][2]["timestamp"]
    assert any("timestamp" in p for p in problems())
    doc["@graph"][2]["timestamp"] = "2025-01-02T03:04:05Z"
    del doc["@context"]["is_part_of"]
    assert any("is_part_of" in p for p in problems())


def test_a_list_card_takes_generated_at_from_generated_when_present_and_else_from_a_valid_timestamp():
    from knowspec.conformance.fixtures.strategies import stamped_bundle
    from knowspec.conformance.oracles.okf_cards import expected_list_card, legacy_fallback

    bundle = stamped_bundle()
    fields = {c.id: expected_list_card({}, c) for c in bundle.concepts if c.id.startswith("stamp/")}
    assert {cid: f["generated_at"] for cid, f in fields.items()} == {
        "stamp/only": "2024-05-06T07:08:09Z", "stamp/both": "2025-01-02T03:04:05Z",
        "stamp/bad-at": None, "stamp/not-a-time": None}
    assert {cid: f["legacy_derived"]["generated"] for cid, f in fields.items()} == {
        "stamp/only": True, "stamp/both": False, "stamp/bad-at": False, "stamp/not-a-time": True}
    assert legacy_fallback(bundle.concept("stamp/not-a-time"))["generated_from_timestamp"] is True
    assert legacy_fallback(bundle.concept("stamp/both"))["generated_from_timestamp"] is False


def test_the_citations_fallback_is_active_only_without_a_sources_key_and_only_with_a_section():
    from knowspec.conformance.fixtures.strategies import stamped_bundle
    from knowspec.conformance.oracles.okf_cards import expected_list_card, expected_projection, legacy_fallback

    bundle = stamped_bundle()
    flags = {c.id: legacy_fallback(c)["sources_from_citations"] for c in bundle.concepts if c.id.startswith("cite/")}
    assert flags == {"cite/active": True, "cite/with-sources": False, "cite/prose-only": False}
    active = bundle.concept("cite/active")
    assert "source_count" not in expected_list_card({"source_count": 0}, active)
    assert "sources" not in expected_projection(active)
    assert "sources" in expected_projection(bundle.concept("cite/with-sources"))


def test_a_graph_concept_node_is_judged_on_its_scalars_and_its_tag_set_with_one_value_a_scalar():
    from knowspec.conformance.fixtures.model import Concept, Event
    from knowspec.conformance.oracles.okf_cards import graph_concept_differences

    concept = Concept("c", type="Guide", title=" ", status="  ", tags=("ops",), stale_after="2025-02-28",
                      verified=(Event("bot/2", "2025-01-05T00:00:00Z"),))
    node = {"@id": "local:bundle:c", "@type": "proj:Concept", "conceptType": "Guide", "declaredStatus": "  ",
            "effectiveStatus": "unresolved", "staleAfter": {"@value": "2025-02-28", "@type": "xsd:date"},
            "tag": "ops", "trustTier": "machine-confirmed"}
    assert graph_concept_differences(node, concept) == {}
    assert set(graph_concept_differences({**node, "tag": ["ops"]}, concept)) == {"tag"}
    assert set(graph_concept_differences({**node, "title": " "}, concept)) == {"title"}
    assert set(graph_concept_differences({**node, "effectiveStatus": "stable"}, concept)) == {"effectiveStatus"}
    assert set(graph_concept_differences({k: v for k, v in node.items() if k != "staleAfter"}, concept)) == {
        "staleAfter"}


def test_a_graph_concept_nodes_url_resource_is_kept_as_written_of_kind_url_and_never_an_asset():
    from knowspec.conformance.fixtures.model import Concept
    from knowspec.conformance.oracles.okf_cards import graph_concept_differences

    concept = Concept("c", resource="https://example.com/retry")
    node = {"@id": "local:bundle:c", "@type": "proj:Concept", "conceptType": "Note", "effectiveStatus": "stable",
            "trustTier": "unverified", "resource": "https://example.com/retry", "resourceKind": "url"}
    assert graph_concept_differences(node, concept) == {}
    assert set(graph_concept_differences({**node, "resourceKind": "relative"}, concept)) == {"resourceKind"}
    assert set(graph_concept_differences({**node, "resourceNode": {"@id": "urn:x"}}, concept)) == {"resourceKind"}
    assert set(graph_concept_differences({k: v for k, v in node.items() if k != "resource"}, concept)) == {"resource"}
    bare = {k: v for k, v in node.items() if k not in ("resource", "resourceKind")}
    assert graph_concept_differences(bare, Concept("c")) == {}
    assert set(graph_concept_differences({**bare, "resourceKind": "url"}, Concept("c"))) == {"resourceKind"}


def test_a_graph_concept_node_says_its_staleness_only_with_an_as_of_and_a_staleafter_valid_for_the_profile():
    from knowspec.conformance.fixtures.model import Concept
    from knowspec.conformance.oracles.okf_cards import graph_concept_differences

    base = {"@id": "local:bundle:c", "@type": "proj:Concept", "conceptType": "Note", "effectiveStatus": "stable",
            "trustTier": "unverified"}
    dated = Concept("c", stale_after="2025-03-01")
    node = {**base, "staleAfter": {"@value": "2025-03-01", "@type": "xsd:date"},
            "stalenessAsOf": {"@value": "2025-03-01", "@type": "xsd:date"}, "stale": {"@value": True, "@type": "xsd:boolean"}}
    assert graph_concept_differences(node, dated, as_of="2025-03-01") == {}
    assert set(graph_concept_differences(node, dated, as_of="2025-02-28")) == {"stalenessAsOf", "stale"}
    assert set(graph_concept_differences(node, dated)) == {"stalenessAsOf", "stale"}
    assert graph_concept_differences(base, Concept("c", stale_after="not-a-date"), as_of="2025-03-01") == {}
    instant = Concept("c", stale_after="2025-01-10T12:00:00+02:00")
    written = {**base, "staleAfter": {"@value": "2025-01-10T10:00:00Z", "@type": "xsd:dateTime"},
               "stalenessAsOf": {"@value": "2025-01-10T09:59:59Z", "@type": "xsd:dateTime"},
               "stale": {"@value": False, "@type": "xsd:boolean"}}
    assert graph_concept_differences(written, instant, "instant-0b87c52", "2025-01-10T09:59:59Z") == {}
    assert set(graph_concept_differences(written, instant, "instant-0b87c52", "2025-01-10T10:00:00Z")) == {
        "stalenessAsOf", "stale"}
    assert set(graph_concept_differences(written, instant)) == {"staleAfter", "stalenessAsOf", "stale"}


def test_a_window_is_valid_with_both_ends_valid_for_the_profile_and_from_not_after_to():
    from knowspec.conformance.oracles.okf_reads import valid_window

    assert valid_window(("2025-01-01", "2025-01-01")) and not valid_window(("2025-02-01", "2025-01-01"))
    assert not valid_window(("2025-01-01", "2025-01-02"), "instant-0b87c52")
    assert not valid_window(("2025-01-01T00:00:00Z", "2025-01-02T00:00:00Z"))
    assert valid_window(("2025-03-01T00:00:00Z", "2025-03-01T01:00:00+01:00"), "instant-0b87c52")
    assert not valid_window(("2025-03-01T00:00:01Z", "2025-03-01T01:00:00+01:00"), "instant-0b87c52")


def test_a_sources_dates_decide_its_validity_per_profile_and_the_projection_shows_its_own_window():
    from knowspec.conformance.fixtures.model import Concept, Source
    from knowspec.conformance.oracles.okf_cards import expected_projection, inherited_windows_cleared

    concept = Concept("c", usage_window=("2025-01-01", "2025-12-31"), sources=(
        Source("https://example.com/a", last_modified="2025-02-03"),
        Source("https://example.com/b", last_modified="2025-02-03T04:05:06Z"),
        Source("https://example.com/c", usage_window=("2025-03-01", "2025-03-31"))))
    dated = expected_projection(concept)
    assert [(s["resource"][-1], s["last_modified"], s["usage_window"]) for s in dated["sources"]] == [
        ("a", "2025-02-03", None), ("c", None, {"from": "2025-03-01", "to": "2025-03-31"})]
    assert dated["usage_window"] == {"from": "2025-01-01", "to": "2025-12-31"}
    instant = expected_projection(concept, "instant-0b87c52")
    assert [s["resource"][-1] for s in instant["sources"]] == ["b"] and instant["usage_window"] is None
    inherited = {**dated, "sources": [{**dated["sources"][0], "usage_window": dated["usage_window"]}]}
    assert inherited_windows_cleared(inherited, concept)["sources"][0]["usage_window"] is None


def test_strict_findings_name_each_malformed_date_and_window_and_each_reached_boundary():
    from knowspec.conformance.fixtures.model import Bundle, Concept, Source
    from knowspec.conformance.oracles.okf_strict import strict_problems

    bundle = Bundle("s", (
        Concept("a", stale_after="2025-03-01", usage_window=("2025-05-01", "2025-04-01"),
                sources=(Source("https://example.com/x", last_modified="2025-01-01T00:00:00Z",
                                usage_window=("2025-01-01", "2025-01-02T00:00:00Z")),)),
        Concept("b", stale_after="2025-03-02"),
    ))

    def warn(file: str, code: str, spec_ref: str = "okf-v0.2#5.1") -> dict:
        return {"severity": "WARN", "file": file, "code": code, "spec_ref": spec_ref}

    report = [warn("a.md", "usage_window_order"), warn("a.md", "source_field_invalid"),
              warn("a.md", "stale", "okf-v0.2#5.5")]
    assert strict_problems(report, bundle, "date-3fcbb9f", "2025-03-01") == []
    assert strict_problems(report[:2], bundle, "date-3fcbb9f", "2025-03-01") == ["a.md: no WARN stale"]
    assert strict_problems(report[1:], bundle, "date-3fcbb9f", "2025-03-01") == ["a.md: no WARN usage_window_order"]
    assert strict_problems(report + [warn("b.md", "stale", "okf-v0.2#5.5")], bundle, "date-3fcbb9f", "2025-03-01") \
        == ["b.md: stale without such a fault"]
    assert strict_problems([{**report[0], "severity": "INFO"}] + report[1:], bundle, "date-3fcbb9f", "2025-03-01")
    # under the instant profile every date is malformed and nothing is stale
    instant = [warn("a.md", "stale_after_invalid"), warn("a.md", "usage_window_invalid"), warn("b.md", "stale_after_invalid")]
    assert strict_problems(instant, bundle, "instant-0b87c52", None) == []
