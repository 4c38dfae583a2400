"""The v0.2 graph's provenance nodes are judged on what the contract fixes, and left free where it
is silent (conformance/oracles/okf_graph_children.py)."""

from __future__ import annotations

import base64

from knowspec.conformance.fixtures.model import Bundle, Concept, Event, Relation, Section, Source
from knowspec.conformance.oracles.okf_graph_children import (
    attribution_problems, child_ordinal, generation_problems, provenance_problems, relation_problems, source_problems,
    verification_problems,
)


def b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def child(kind: str, concept_id: str, ordinal: str, cls: str, owner_key: str, **fields) -> dict:
    return {"@id": f"urn:skosovsky:okf:graph:v0.2:{kind}:{b64(concept_id)}:{b64(ordinal)}", "@type": f"proj:{cls}",
            owner_key: {"@id": f"local:bundle:{concept_id}"}, **fields}


def at(value: str) -> dict:
    return {"@value": value, "@type": "xsd:dateTime"}


def flag(value: bool) -> dict:
    return {"@value": value, "@type": "xsd:boolean"}


def integer(value: int) -> dict:
    return {"@value": str(value), "@type": "xsd:integer"}


def generation(concept_id: str = "c", **fields) -> dict:
    return child("generation", concept_id, "000000", "Generation", "generationOf", **fields)


def verification(n: int, actor: str, when: str) -> dict:
    return child("verification", "c", f"{n:06d}", "Verification", "verificationOf", actor=actor, at=at(when))


def test_a_child_iri_is_the_prefix_any_kind_the_concepts_id_and_a_six_digit_ordinal_in_base64url():
    iri = f"urn:skosovsky:okf:graph:v0.2:source:{b64('ops/retry')}:{b64('legacy-000001')}"
    assert child_ordinal(iri, "ops/retry") == "legacy-000001"
    assert child_ordinal(iri, "ops/other") is None
    assert child_ordinal(f"urn:skosovsky:okf:graph:v0.2:g:{b64('c')}:{b64('0')}", "c") is None
    padded = base64.urlsafe_b64encode(b"c").decode()
    assert "=" in padded and child_ordinal(f"urn:skosovsky:okf:graph:v0.2:g:{padded}:{b64('000000')}", "c") is None


def test_a_generated_event_gives_its_valid_halves_and_an_invalid_actor_as_written_or_none():
    concept = Concept("c", generated=Event("team:x", "2025-01-02T03:04:05Z"))
    assert generation_problems(concept, [generation(at=at("2025-01-02T03:04:05Z"))]) == []
    assert generation_problems(concept, [generation(at=at("2025-01-02T05:04:05+02:00"))]) == []
    assert generation_problems(concept, [generation(actor="team:x", at=at("2025-01-02T03:04:05Z"))]) == []
    assert generation_problems(concept, [generation(actor="team:y", at=at("2025-01-02T03:04:05Z"))])
    blank = Concept("c", generated=Event(" ", "2025-01-02T03:04:05Z"))
    assert generation_problems(blank, [generation(actor=" ", at=at("2025-01-02T03:04:05Z"))]) == []
    assert generation_problems(Concept("c", generated=Event("", "2025-01-02T03:04:05Z")),
                               [generation(actor="", at=at("2025-01-02T03:04:05Z"))])
    assert generation_problems(concept, []) == ["c: Generation: missing"]


def test_a_generated_event_with_neither_half_valid_may_be_a_node_or_none():
    concept = Concept("c", generated=Event("", "soon"))
    assert generation_problems(concept, []) == []
    assert generation_problems(concept, [generation()]) == []
    assert generation_problems(concept, [generation(at=at("soon"))])


def test_the_legacy_timestamp_gives_a_flagged_generation_only_without_a_generated_key():
    stamped = Concept("c", timestamp="2024-05-06T07:08:09Z")
    assert generation_problems(stamped, [generation(at=at("2024-05-06T07:08:09Z"), legacyFallback=flag(True))]) == []
    assert generation_problems(stamped, [generation(at=at("2024-05-06T07:08:09Z"))])
    assert generation_problems(stamped, [])
    both = Concept("c", generated=Event("writer/1.0", "not a time"), timestamp="2024-05-06T07:08:09Z")
    assert generation_problems(both, [generation(actor="writer/1.0")]) == []
    assert generation_problems(both, [generation(actor="writer/1.0", legacyFallback=flag(False))]) == []
    assert generation_problems(both, [generation(actor="writer/1.0", at=at("2024-05-06T07:08:09Z"))])
    assert generation_problems(Concept("c"), [generation()]) == ["c: Generation: a node without generated or timestamp"]


def test_verifications_are_the_valid_events_an_invalid_actor_allowed_and_ordinals_by_at_then_by():
    concept = Concept("c", verified=(Event("human:b", "2025-01-04T00:00:00Z"), Event("process:a", "2025-01-03T00:00:00Z"),
                                     Event("team:x", "2025-01-01T00:00:00Z"), Event("", "2025-01-01T00:00:00Z")))
    ordered = [verification(0, "process:a", "2025-01-03T00:00:00Z"), verification(1, "human:b", "2025-01-04T00:00:00Z")]
    assert verification_problems(concept, ordered) == []
    with_invalid = [verification(0, "team:x", "2025-01-01T00:00:00Z"),
                    verification(1, "process:a", "2025-01-03T00:00:00Z"), verification(2, "human:b", "2025-01-04T00:00:00Z")]
    assert verification_problems(concept, with_invalid) == []
    assert verification_problems(concept, ordered[:1])
    assert verification_problems(concept, ordered + [verification(2, "", "2025-01-01T00:00:00Z")])
    swapped = [verification(0, "human:b", "2025-01-04T00:00:00Z"), verification(1, "process:a", "2025-01-03T00:00:00Z")]
    assert "ordinals not ordered" in verification_problems(concept, swapped)[0]


def test_the_order_of_verifications_is_not_judged_where_text_and_instant_orders_differ():
    concept = Concept("c", verified=(Event("human:a", "2025-01-01T01:00:00+02:00"), Event("human:b", "2025-01-01T00:30:00Z")))
    either = [verification(0, "human:a", "2025-01-01T01:00:00+02:00"), verification(1, "human:b", "2025-01-01T00:30:00Z")]
    assert verification_problems(concept, either) == []
    assert verification_problems(concept, either[::-1]) == []


def source(n: str, **fields) -> dict:
    return child("source", "c", n, "ProvenanceSource", "sourceOf", **fields)


def test_sources_are_the_valid_entries_with_their_fields_and_an_integer_literal_usage_count():
    concept = Concept("c", sources=(Source("https://example.com/a", id="a", author="IETF", usage_count=3), Source(" ")))
    node = source("000000", sourceID="a", resource="https://example.com/a", resourceKind="url", author="IETF",
                  usageCount=integer(3))
    assert source_problems(concept, [node]) == []
    assert source_problems(concept, [{**node, "usageCount": 3}])
    assert source_problems(concept, [{**node, "resourceKind": "relative"}])
    assert source_problems(concept, [node, source("000001", resource=" ", resourceKind="relative")])


def test_citation_entries_are_flagged_sources_with_their_numbers_only_without_a_sources_key():
    cited = (("Retry RFC", "https://example.com/rfc"),)
    node = source("legacy-000000", resource="https://example.com/rfc", resourceKind="url", title="Retry RFC",
                  legacyFallback=flag(True), legacyCitationNumber=integer(1))
    assert source_problems(Concept("c", citations=cited), [node]) == []
    assert source_problems(Concept("c", citations=cited), [{k: v for k, v in node.items() if k != "legacyFallback"}])
    with_sources = Concept("c", citations=cited, sources=(Source("https://example.com/a"),))
    assert source_problems(with_sources, [node])


def test_a_footnote_label_is_an_attribution_resolved_by_the_sources_with_that_label():
    concept = Concept("c", text="Claim.[^RFC]\n\n[^rfc]: The RFC", sources=(Source("https://example.com/rfc", id="Rfc"),))
    src = source("000000", sourceID="Rfc", resource="https://example.com/rfc", resourceKind="url")
    node = child("attribution", "c", "rfc", "ClaimAttribution", "attributionOf", sourceID="rfc",
                 referenceCount=integer(1), definitionCount=integer(1), resolved=flag(True),
                 attributedSource={"@id": src["@id"]})
    assert attribution_problems(concept, [node], [src]) == []
    assert attribution_problems(concept, [{**node, "resolved": flag(False)}], [src])
    assert attribution_problems(concept, [], [src]) == ["c: ClaimAttribution: no node for the label 'rfc'"]
    only_sources = Concept("c", sources=(Source("https://example.com/rfc", id="rfc"),))
    assert attribution_problems(only_sources, [], [src]) == []


def test_a_provenance_node_of_no_concept_of_the_bundle_is_a_problem():
    bundle = Bundle("b", (Concept("c"),))
    assert provenance_problems([generation("ghost", at=at("2025-01-01T00:00:00Z"))], bundle) == [
        "proj:Generation node of 'ghost', which is no concept of the bundle"]


def relation(n: int, source: str, rel_type: str, target: str, exists: bool) -> dict:
    return {"@id": f"urn:skosovsky:okf:graph:v0.2:relation:{b64(source.split('#')[0])}:{b64(f'{n:06d}')}",
            "@type": "proj:ToolkitExtensionRelation", "extensionNamespace": "ns", "relationType": rel_type,
            "relationSource": {"@id": f"local:bundle:{source}"}, "relationTarget": {"@id": f"local:bundle:{target}"},
            "targetExists": flag(exists)}


def test_every_relation_is_a_node_resolved_or_not_and_a_subresources_relation_starts_at_it():
    bundle = Bundle("b", (
        Concept("a", relations=(Relation("uses", "b", "part"), Relation("uses", "b", "nope"), Relation("cites", "gone"))),
        Concept("b", fragments=("part",), sections=(Section("s1", (Relation("uses", "a"),)),)),
    ))
    nodes = [relation(0, "a", "uses", "b#part", True), relation(1, "a", "uses", "b#nope", False),
             relation(2, "a", "cites", "gone", False), relation(0, "b#s1", "uses", "a", True)]
    assert relation_problems(nodes, bundle) == []
    assert relation_problems(nodes[:2] + nodes[3:], bundle)
    assert relation_problems(nodes[:1] + [relation(1, "a", "uses", "b#nope", True)] + nodes[2:], bundle)
    assert relation_problems(nodes[:3] + [relation(0, "b", "uses", "a", True)], bundle)


def test_an_ids_own_hash_is_percent_encoded_so_only_a_raw_one_starts_the_fragment():
    bundle = Bundle("b", (Concept("hash#name", relations=(Relation("uses", "hash#name", "part"),)),))
    node = relation(0, "hash%23name", "uses", "hash%23name#part", False)
    node["@id"] = f"urn:skosovsky:okf:graph:v0.2:relation:{b64('hash#name')}:{b64('000000')}"
    assert relation_problems([node], bundle) == []


def test_a_sources_own_window_is_an_override_and_the_shared_one_may_be_written_as_inherited_or_not():
    concept = Concept("c", usage_window=("2025-01-01", "2025-12-31"), sources=(
        Source("https://example.com/a", last_modified="2025-02-03"),
        Source("https://example.com/b", usage_window=("2025-03-01", "2025-03-31"))))
    date = {"@type": "xsd:date"}
    own = source("000001", resource="https://example.com/b", resourceKind="url", usageFrom={**date, "@value": "2025-03-01"},
                 usageTo={**date, "@value": "2025-03-31"}, sourceUsageWindowOverride=flag(True))
    plain = source("000000", resource="https://example.com/a", resourceKind="url",
                   lastModified={**date, "@value": "2025-02-03"})
    inherits = {**plain, "usageFrom": {**date, "@value": "2025-01-01"}, "usageTo": {**date, "@value": "2025-12-31"},
                "sourceUsageWindowOverride": flag(False)}
    assert source_problems(concept, [plain, own]) == []
    assert source_problems(concept, [inherits, own]) == []
    assert source_problems(concept, [plain, {k: v for k, v in own.items() if k != "sourceUsageWindowOverride"}])
    assert source_problems(concept, [{**inherits, "sourceUsageWindowOverride": flag(True)}, own])
    assert source_problems(concept, [{**plain, "lastModified": "2025-02-03"}, own])
    assert source_problems(concept, [plain, own], "instant-0b87c52")  # date-only values are malformed there


def test_a_json_object_where_a_value_belongs_is_a_problem_never_a_crash():
    concept = Concept("c", sources=(Source("https://example.com/a"),), verified=(Event("human:a", "2025-01-01T00:00:00Z"),))
    odd = {"not": "a value"}
    assert source_problems(concept, [source("000000", resource=odd, resourceKind="url", usageCount=odd)])
    assert verification_problems(concept, [verification(0, "human:a", "2025-01-01T00:00:00Z") | {"actor": odd}])
    bundle = Bundle("b", (Concept("c", relations=(Relation("uses", "c"),)),))
    assert relation_problems([relation(0, "c", "uses", "c", True) | {"relationType": odd}], bundle)

