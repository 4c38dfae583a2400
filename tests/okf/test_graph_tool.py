"""get_semantic_graph: the v0.2 projection (structured) and the legacy JSON-LD (text)."""

from pathlib import Path
import base64
import json

import pytest

from knowspec.impl.context import CallContext
from knowspec.impl.errors import ToolError
from knowspec.impl.okf.graph import render
from knowspec.impl.okf.graph.nodes import Node, concept_iri, synthetic_iri, text
from knowspec.impl.okf.tools.query import get_semantic_graph

from optional_data import UPSTREAM_FIXTURES
from tool_args import tool_args

SCORECARD = str(Path(__file__).resolve().parents[1] / "fixtures" / "okf" / "v02" / "scorecard")
APPENDIX_A = str(UPSTREAM_FIXTURES / "v02" / "positive" / "appendix-a")


def write_bundle(root, files):
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return str(root)


def call(bundle, as_of=None, profile=None):
    return get_semantic_graph(tool_args("get_semantic_graph", bundle_path=bundle, as_of=as_of, temporal_profile=profile),
                              CallContext())


def nodes(out):
    return {n["@id"]: n for n in out.structured["@graph"]}


def b64(text):
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def test_iris_escape_like_go():
    assert concept_iri("computations/revenue") == "local:bundle:computations%2Frevenue"
    assert concept_iri("notes/my file") == "local:bundle:notes%2Fmy%20file"
    assert concept_iri("hash#name") == "local:bundle:hash%23name"
    assert concept_iri("a:b@c$&+=;,?") == "local:bundle:a:b@c$&+=%3B%2C%3F"
    assert synthetic_iri("source", "a", "000000") == f"urn:skosovsky:okf:graph:v0.2:source:{b64('a')}:{b64('000000')}"


def test_v02_scorecard_projection():
    out = call(SCORECARD, as_of="2026-03-31")
    graph = nodes(out)
    late = graph["local:bundle:computations%2Flate-parcels"]
    assert late["@type"] == "proj:Concept"
    assert late["stale"] == {"@value": True, "@type": "xsd:boolean"}  # boundary is inclusive
    assert late["staleAfter"] == {"@value": "2026-03-31", "@type": "xsd:date"}
    assert late["trustTier"] == "machine-confirmed" and sorted(late["tag"]) == ["lateness", "logistics"]
    on_time = graph["local:bundle:computations%2Fon-time-rate"]
    assert on_time["stale"]["@value"] is False and on_time["trustTier"] == "human-reviewed"
    scorecard = graph["local:bundle:metrics%2Fdelivery-scorecard"]
    assert scorecard["references"] == [{"@id": "local:bundle:computations%2Flate-parcels"},
                                       {"@id": "local:bundle:computations%2Fon-time-rate"}]
    first_source = graph[synthetic_iri("source", "computations/on-time-rate", "000000")]
    assert first_source["sourceID"] == "ops-board" and first_source["resourceKind"] == "ambiguous"
    assert first_source["usageCount"] == {"@value": "1200", "@type": "xsd:integer"}
    attribution = graph[synthetic_iri("attribution", "computations/on-time-rate", "ops-board")]
    assert attribution["attributedSource"] == {"@id": first_source["@id"]}
    assert attribution["resolved"]["@value"] is True
    param = graph[synthetic_iri("parameter", "computations/late-parcels", "000000")]
    assert param["name"] == "depot"
    executor = graph[synthetic_iri("asset", "references/runbooks/run-notebook.md")]
    assert executor["exists"]["@value"] is True and executor["resourceRole"] == "executor"
    attester = graph[synthetic_iri("asset", "references/attesters/row-count.py")]
    assert attester["exists"]["@value"] is False and attester["resourceRole"] == "attester"
    projection = graph["urn:skosovsky:okf:graph:v0.2:projection"]
    assert projection["profile"] == "skosovsky/okf-v0.2" and projection["versionSource"] == "declared"
    ids = [n["@id"] for n in out.structured["@graph"]]
    assert ids == sorted(ids, key=lambda i: i.encode())
    assert set(out.structured) == {"@context", "@graph"}


@pytest.mark.upstream_fixtures
def test_upstream_appendix_a_projection():
    out = call(APPENDIX_A, as_of="2026-06-15")
    graph = nodes(out)
    profit = graph["local:bundle:computations%2Fprofit"]
    assert profit["@type"] == "proj:Concept"
    assert profit["stale"] == {"@value": True, "@type": "xsd:boolean"}  # boundary is inclusive
    assert profit["staleAfter"] == {"@value": "2026-06-15", "@type": "xsd:date"}
    assert profit["trustTier"] == "machine-confirmed" and profit["tag"] == ["finance", "profit"]
    assert graph["local:bundle:computations%2Frevenue"]["stale"]["@value"] is False
    income = graph["local:bundle:metrics%2Fincome-statement"]
    assert income["references"] == [{"@id": "local:bundle:computations%2Fprofit"}, {"@id": "local:bundle:computations%2Frevenue"}]
    first_source = graph[synthetic_iri("source", "computations/revenue", "000000")]
    assert first_source["sourceID"] == "exec-rev-dash" and first_source["resourceKind"] == "ambiguous"
    assert first_source["usageCount"] == {"@value": "5000", "@type": "xsd:integer"}
    attribution = graph[synthetic_iri("attribution", "computations/revenue", "exec-rev-dash")]
    assert attribution["attributedSource"] == {"@id": first_source["@id"]}
    assert attribution["resolved"]["@value"] is True
    param = graph[synthetic_iri("parameter", "computations/profit", "000000")]
    assert param["name"] == "segment"
    executor = graph[synthetic_iri("asset", "references/skills/run-dbt.md")]
    assert executor["exists"]["@value"] is True and executor["resourceRole"] == "executor"
    projection = graph["urn:skosovsky:okf:graph:v0.2:projection"]
    assert projection["profile"] == "skosovsky/okf-v0.2" and projection["versionSource"] == "declared"
    ids = [n["@id"] for n in out.structured["@graph"]]
    assert ids == sorted(ids, key=lambda i: i.encode())
    assert set(out.structured) == {"@context", "@graph"}


def test_no_staleness_without_as_of():
    graph = nodes(call(SCORECARD))
    late = graph["local:bundle:computations%2Flate-parcels"]
    assert "stale" not in late and "stalenessAsOf" not in late and "staleAfter" in late


LEGACY_BUNDLE = {
    "notes/my file.md": "---\ntype: Note\n---\n[B](../b&c.md) and [H](../hash#name.md)\n",
    "b&c.md": "---\ntype: Note\n---\n",
    "hash#name.md": "---\ntype: Note\n---\n",
    "a-b.md": "---\ntype: Note\n---\n",
    "a.md": "---\ntype: Note\nrelations:\n  mentions:\n    - target: 'hash\\#name'\n    - target: ghost\n"
            "parts:\n  - id: sec\n    relations:\n      uses:\n        - target: a-b\n---\n",
}


def test_legacy_text_matches_the_documented_node(tmp_path):
    text = call(write_bundle(tmp_path, LEGACY_BUNDLE)).text
    assert text.endswith("}\n")
    doc = json.loads(text)
    node = next(n for n in doc["@graph"] if n["@id"] == "bundle:notes/my file")
    assert node == {
        "@id": "bundle:notes/my file",
        "@type": "okf:Concept",
        "references": [
            {"@type": "okf:Reference", "target": "bundle:b&c", "exists": True},
            {"@type": "okf:Reference", "target": "bundle:hash", "exists": False},
        ],
        "type": "Note",
    }
    assert '"target": "bundle:b\\u0026c"' in text
    assert '      "references": [\n        {\n          "@type": "okf:Reference",\n          "target"' in text


def test_legacy_order_relations_and_subresources(tmp_path):
    doc = json.loads(call(write_bundle(tmp_path, LEGACY_BUNDLE)).text)
    ids = [n["@id"] for n in doc["@graph"]]
    assert ids[:3] == ["bundle:a-b", "bundle:a", "bundle:a#sec"]  # file path order, subresource after
    a = doc["@graph"][1]
    assert a["mentions"] == [{"@id": "bundle:hash\\#name", "exists": True}, {"@id": "bundle:ghost", "exists": False}]
    sub = doc["@graph"][2]
    assert sub == {"@id": "bundle:a#sec", "@type": "okf:SubResource", "is_part_of": {"@id": "bundle:a"},
                   "uses": [{"@id": "bundle:a-b", "exists": True}]}
    assert doc["@context"]["mentions"] == {"@id": "okf:mentions", "@type": "@id"}
    assert doc["@context"]["is_part_of"] == {"@id": "okf:is_part_of", "@type": "@id"}
    assert list(doc["@context"]) == sorted(doc["@context"])


def test_v02_relation_nodes_and_escaped_iris(tmp_path):
    graph = nodes(call(write_bundle(tmp_path, LEGACY_BUNDLE)))
    assert "local:bundle:notes%2Fmy%20file" in graph and "local:bundle:hash%23name" in graph
    rels = [n for n in graph.values() if n["@type"] == "proj:ToolkitExtensionRelation"]
    by_target = {r["relationTarget"]["@id"]: r for r in rels}
    assert by_target["local:bundle:hash%23name"]["targetExists"]["@value"] is True
    assert by_target["local:bundle:ghost"]["targetExists"]["@value"] is False
    assert by_target["local:bundle:a-b"]["relationSource"] == {"@id": "local:bundle:a#sec"}


def test_malformed_root_version_fails_the_call(tmp_path):
    bundle = write_bundle(tmp_path, {"index.md": "---\nokf_version: 0.2\n---\n# I\n\n- [a](a.md)\n", "a.md": "---\ntype: Note\n---\n"})
    with pytest.raises(ToolError) as err:
        call(bundle)
    assert err.value.code == "invalid_request"
    assert err.value.message == 'render JSON-LD: invalid OKF version declaration: "0.2"'


def test_instant_profile_types_datetimes(tmp_path):
    bundle = write_bundle(tmp_path, {"a.md": '---\ntype: Note\nstale_after: "2026-09-23T18:00:00+07:00"\n---\n'})
    graph = nodes(call(bundle, as_of="2026-09-23T11:00:00Z", profile="instant-0b87c52"))
    a = graph["local:bundle:a"]
    assert a["staleAfter"] == {"@value": "2026-09-23T18:00:00+07:00", "@type": "xsd:dateTime"}
    assert a["stale"]["@value"] is True
    assert graph["urn:skosovsky:okf:graph:v0.2:projection"]["profile"] == "skosovsky/okf-v0.2-instant"


def _node(node_iri: str, **properties: str) -> Node:
    node = Node(node_iri, "Concept")
    for predicate, value in properties.items():
        node.add(predicate, text(value))
    return node


def _refusal(nodes) -> str:
    with pytest.raises(ToolError) as err:
        render.graph_utf8(nodes)
    assert err.value.code == "resource_limit"
    return err.value.message


def test_an_identifier_may_take_8192_runes_and_no_more():
    assert json.loads(render.graph_utf8([_node("x" * 8192)]))["@graph"][0]["@id"] == "x" * 8192
    assert _refusal([_node("x" * 8193)]) == "semantic graph identifier exceeds the MCP limit"


def test_a_projection_version_may_take_64_runes_and_no_more():
    render.graph_utf8([_node("p", projectionVersion="v" * 64)])
    assert _refusal([_node("p", projectionVersion="v" * 65)]) == "semantic graph projection version exceeds the MCP limit"


def test_the_budgets_fail_in_upstreams_order_bytes_then_nodes_then_the_first_node_in_document_order(monkeypatch):
    monkeypatch.setattr(render, "MAX_NODES", 2)
    long_version_first = [_node("b" + "x" * 8192), _node("a", projectionVersion="v" * 65)]
    assert _refusal(long_version_first) == "semantic graph projection version exceeds the MCP limit"
    assert _refusal(long_version_first + [_node("c")]) == "semantic graph contains too many nodes"
    monkeypatch.setattr(render, "MAX_RENDER_BYTES", 100)
    assert _refusal(long_version_first + [_node("c")]) == render.BYTE_LIMIT_MESSAGE


class _RecordingCheck:
    def __init__(self):
        self.items, self.finished = [], None

    def item(self, value):
        self.items.append(value["@id"])

    def finish(self, rest, count):
        self.finished = (sorted(rest), count)


def test_every_node_passes_the_output_check_before_the_document_is_finished():
    check = _RecordingCheck()
    render.graph_utf8([_node("b"), _node("a")], check)
    assert check.items == ["b", "a"] and check.finished == (["@context"], 2)


def test_same_call_twice_is_identical(tmp_path):
    bundle = write_bundle(tmp_path, LEGACY_BUNDLE)
    first, second = call(bundle), call(bundle)  # the second from the kept (compressed) renders
    assert first.text == second.text and json.dumps(first.structured) == json.dumps(second.structured)


def test_a_call_answered_from_the_kept_documents_reads_no_links(tmp_path, monkeypatch):
    from knowspec.impl.okf.model import Snapshot

    bundle = write_bundle(tmp_path, LEGACY_BUNDLE)
    real, read = Snapshot.navigation_targets, []

    def counted(self, concept_id, memo=None):
        read.append(concept_id)
        return real(self, concept_id, memo)

    monkeypatch.setattr(Snapshot, "navigation_targets", counted)
    first = call(bundle)
    assert {"b&c", "hash#name", "notes/my file"} <= set(read)  # the renders read every concept's
    read.clear()
    second = call(bundle)
    assert read == [] and second.text == first.text


AC = "---\ntype: Attested Computation\nruntime: sql\n{extra}---\n{body}"


@pytest.mark.parametrize("extra,body,mode", [
    ("computation: /comp/q.sql\n", "text\n", "file"),
    ("", "no code here\n", "absent"),
    ("", "# Computation\n\n```sql\nselect 1\n```\n", "inline"),
    ("", "# Computation\n\n```sql\nselect 1\n```\n\n```sql\nselect 2\n```\n", "ambiguous"),
    ("computation: 5\n", "text\n", "malformed"),
])
def test_computation_modes(tmp_path, extra, body, mode):
    bundle = write_bundle(tmp_path, {"c.md": AC.format(extra=extra, body=body), "comp/q.sql": "select 1\n"})
    graph = nodes(call(bundle))
    contract = graph[synthetic_iri("computation-contract", "c", "000000")]
    assert contract["computationMode"] == mode
    assert contract["runtime"] == "sql" and contract["contractOf"] == {"@id": "local:bundle:c"}
    if mode == "file":
        asset = graph[contract["computationNode"]["@id"]]
        assert asset["bundlePath"] == "comp/q.sql" and asset["exists"]["@value"] is True
        assert asset["resourceRole"] == "computation"


def test_no_contract_for_other_types(tmp_path):
    graph = nodes(call(write_bundle(tmp_path, {"c.md": "---\ntype: Note\nruntime: sql\n---\n"})))
    assert not [n for n in graph.values() if n["@type"] == "proj:AttestedComputationContract"]


def test_malformed_status_is_unresolved_and_legacy_timestamp_generation(tmp_path):
    bundle = write_bundle(tmp_path, {"a.md": "---\ntype: Note\nstatus: [x]\ntimestamp: 2026-06-21T00:00:00Z\n---\n"})
    graph = nodes(call(bundle))
    assert graph["local:bundle:a"]["effectiveStatus"] == "unresolved"
    gen = graph[synthetic_iri("generation", "a", "000000")]
    assert gen["legacyFallback"]["@value"] is True
    assert gen["at"] == {"@value": "2026-06-21T00:00:00Z", "@type": "xsd:dateTime"}
    legacy = json.loads(call(bundle).text)["@graph"][0]
    assert legacy["timestamp"] == "2026-06-21T00:00:00Z"


def test_legacy_citations_become_fallback_sources_only_without_sources(tmp_path):
    body = "# Claim\n\nText.[1]\n\n# Citations\n\n[1] [Old source](https://example.invalid/old)\n"
    bundle = write_bundle(tmp_path, {
        "legacy.md": "---\ntype: Note\n---\n" + body,
        "mixed.md": "---\ntype: Note\nsources:\n  - id: s\n    resource: https://example.invalid/new\n---\n" + body,
    })
    graph = nodes(call(bundle))
    legacy = graph[synthetic_iri("source", "legacy", "legacy-000000")]
    assert legacy["resource"] == "https://example.invalid/old" and legacy["title"] == "Old source"
    assert legacy["legacyCitationNumber"] == {"@value": "1", "@type": "xsd:integer"}
    assert legacy["legacyFallback"]["@value"] is True
    mixed = [n for n in graph.values() if n["@type"] == "proj:ProvenanceSource" and n["sourceOf"]["@id"] == "local:bundle:mixed"]
    assert [n["resource"] for n in mixed] == ["https://example.invalid/new"]


def test_the_graph_renders_keep_no_body_analysis_they_made(tmp_path):
    # The renders are kept per snapshot revision: analyses kept from inside their build would only
    # pin the build's freed memory (a footnote reference and a Citations section need the parse).
    body = "Text with a note.[^n]\n\n[^n]: The note.\n\n# Citations\n\n[1] [Doc](https://x.test/doc)\n"
    bundle = write_bundle(tmp_path, {"c.md": f"---\ntype: Note\n---\n{body}"})
    out = call(bundle)
    from knowspec.impl.okf.model import load_snapshot

    concept = load_snapshot(bundle, CallContext()).concepts["c"]
    assert concept.kept_markdown() is None
    assert any("n" in json.dumps(node) for node in out.structured["@graph"])
    assert concept.markdown.footnote_refs  # what the renders read is there when a reader keeps it


def test_a_relation_type_yaml_reads_as_a_boolean_word_is_rendered(tmp_path):
    """An unquoted ``true`` naming a relation type is a key the direct legacy writer does not take
    for a plain ``str``: ``json`` writes the nodes and the ``@context`` holding it, as it writes
    the whole document."""
    from knowspec.impl import runtime as process
    from knowspec.impl.okf.graph.legacy import legacy_document, render_legacy
    from knowspec.impl.okf.model import load_snapshot

    bundle = write_bundle(tmp_path, {"a.md": "---\ntype: Note\nrelations:\n  true:\n    - target: b\n---\nA\n",
                                     "b.md": "---\ntype: Note\n---\nB\n"})
    out = call(bundle)
    with process.activated():
        expected = render_legacy(legacy_document(load_snapshot(bundle, CallContext())))
    assert out.text == expected
    assert json.loads(out.text)["@context"]["true"] == {"@id": "okf:true", "@type": "@id"}


def test_the_v02_nodes_come_a_concept_at_a_time_so_the_graph_is_never_all_alive(tmp_path):
    import weakref

    from knowspec.impl.okf.graph.v02 import project_nodes
    from knowspec.impl.okf.model import load_snapshot
    from knowspec.impl.okf.tools.cards import temporal_choice

    bundle = write_bundle(tmp_path, {f"c{i:02d}.md": f"---\ntype: Note\ntitle: C{i}\n---\n" for i in range(30)})
    temporal = temporal_choice(None, None)
    given: list[weakref.ref] = []
    most = 0
    for node in project_nodes(load_snapshot(bundle, CallContext()), temporal.profile, temporal.as_of):
        given.append(weakref.ref(node))
        most = max(most, sum(ref() is not None for ref in given))
        del node
    assert len(given) == 31  # the concepts and the projection
    assert most == 1  # each let go once the next concept is built


def test_a_bare_resource_path_is_an_asset_and_a_path_out_of_the_root_an_unresolved_one(tmp_path):
    """A concept's ``resource: data/table.csv`` had been ``ambiguous`` with no asset node."""
    bundle = write_bundle(tmp_path, {
        "sales/orders.md": "---\ntype: Table\nresource: data/table.csv\nsources:\n"
                           "  - resource: all queries in project X\n  - resource: ../../outside.txt\n---\n",
        "sales/data/table.csv": "id\n1\n",
        "other.md": "---\ntype: Note\nresource: /sales/data/table.csv\n---\n"})
    graph = nodes(call(bundle))
    orders = graph["local:bundle:sales%2Forders"]
    asset = graph[synthetic_iri("asset", "sales/data/table.csv")]
    assert orders["resourceKind"] == "relative" and orders["resourceNode"] == {"@id": asset["@id"]}
    assert asset["bundlePath"] == "sales/data/table.csv" and asset["exists"]["@value"] is True
    assert sorted(asset["resourceKind"]) == ["bundle-relative", "relative"]          # one node, both namings
    assert {r["@id"] for r in asset["referencedBy"]} == {"local:bundle:sales%2Forders", "local:bundle:other"}
    sources = {n["resource"]: n for n in graph.values() if n["@type"] == "proj:ProvenanceSource"}
    assert sources["all queries in project X"]["resourceKind"] == "scope"
    assert "resourceNode" not in sources["all queries in project X"]
    outside = graph[sources["../../outside.txt"]["resourceNode"]["@id"]]
    assert outside["@id"] == synthetic_iri("unresolved-asset", "sales/orders", "source", "../../outside.txt")
    assert "bundlePath" not in outside and outside["exists"]["@value"] is False and outside["resourceRole"] == "source"
