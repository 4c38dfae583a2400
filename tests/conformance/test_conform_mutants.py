"""Mutants break something on the wire, and the suite kills them through the proxy."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from toy_paths import TARGETS
from knowspec.conformance.config import RunConfig
from knowspec.conformance.mutants.catalogue import MUTANTS
from knowspec.conformance.mutants.killrate import kill_rate


def _call(tool: str, args: dict) -> dict:
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": args}}


def _ok(structured: dict) -> dict:
    return {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": json.dumps(structured)}],
                                                  "structuredContent": structured, "isError": False}}


def _card(cid: str) -> dict:
    return {"id": cid, "title": cid.upper()}


SEARCH = _ok({"query": "q", "total": 4, "truncated": True, "hits": [
    {"concept": _card("a"), "match": "id"}, {"concept": _card("b"), "match": "title"},
    {"concept": _card("c"), "match": "title"}]})
NEIGHBORS = _ok({"concept": _card("a"), "direction": "both", "kinds": ["navigation", "relation", "source"],
                 "total": 2, "truncated": False, "sources": [{"id": "a", "resource": "r", "title": ""},
                                                             {"id": "b", "resource": "r", "title": ""}],
                 "edges": [{"kind": "navigation", "from": "a", "to": "b", "relation_type": None},
                           {"kind": "relation", "from": "b", "to": "a", "relation_type": "uses"}]})
ENVELOPE = {"code": "resource_limit", "message": "too big", "retryable": False, "diagnostics": [
    {"code": "invalid_input", "severity": "ERROR", "file": "", "field": "limit", "message": "m", "spec_ref": "",
     "policy_failure": False}]}
ERROR = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "too big"}],
                                               "structuredContent": ENVELOPE, "isError": True}}
SCHEMA_ERROR = json.loads(json.dumps(ERROR).replace("resource_limit", "schema_validation"))
UNKNOWN = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "unknown tool"}}
LISTING = {"jsonrpc": "2.0", "id": 1, "result": {"tools": [
    {"name": "search_concepts", "inputSchema": {"type": "object", "properties": {"limit": {"maximum": 100}}},
     "outputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    {"name": "get_neighbors", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}}]}}
ARGS = {"bundle_path": "/abs/bundle", "query": "q"}
SAMPLES = [(_call("search_concepts", ARGS), SEARCH), (_call("get_neighbors", ARGS), NEIGHBORS),
           (_call("search_concepts", ARGS), ERROR), (_call("search_concepts", ARGS), SCHEMA_ERROR),
           (_call("search_concepts", {**ARGS, "query": "z"}), _ok({"query": "z", "total": 0, "truncated": False,
                                                                   "hits": []})),
           (_call("nope", {}), UNKNOWN), ({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, LISTING)]
_RESULTS = [{"collection": "c", "slug": "a", "title": "A", "breadcrumb": "X > A", "score": -2.0, "confidence": 0.875,
             "method": "fts", "links": [{"kind": "module", "key": "M"}], "form_class": "TfrmA"},
            {"collection": "c", "slug": "b", "title": "B", "breadcrumb": "X > B", "score": -1.0, "confidence": 0.5,
             "method": "fts", "links": [], "form_class": None}]
_VECTOR = [dict(r, method="vector", score=s) for r, s in zip(_RESULTS, (0.9, 0.8))]
_TIED_FTS = [dict(r, score=-1.25, snippet=f"…the [{r['slug']}] word…") for r in _RESULTS]
_FUSED = [dict(r, method="fts+vector", score=s) for r, s in zip(_RESULTS, (0.041, 0.032))]
NOT_FOUND = json.loads(json.dumps(ERROR).replace("resource_limit", "concept_not_found"))
SAMPLES += [(_call(tool, {"query": "q", "kind": "k", "key": "x"}), _ok({"results": _RESULTS}))
            for tool in ("doc_search", "help_search", "doc_links")]
SAMPLES += [(_call("doc_search", {"query": "q", "mode": "vector"}), _ok({"results": _VECTOR})),
            (_call("doc_search", {"query": "q"}), _ok({"results": _TIED_FTS})),
            (_call("doc_search", {"query": "q", "mode": "hybrid"}), _ok({"results": _FUSED})),
            (_call("help_search", {"query": "q"}), _ok({"results": [{k: v for k, v in r.items() if k != "method"}
                                                                    for r in _TIED_FTS]})),
            (_call("read_concept", ARGS), NOT_FOUND), (_call("get_neighbors", ARGS), NOT_FOUND),
            (_call("read_concept", ARGS), _ok({"id": "a", "path": "a.md", "frontmatter_yaml": "type: Note\ntitle: A\n",
                                               "body": "x\ny", "projection": {"stale_after": "2025-01-01"}}))]



def _section_hit(cid: str, heading: str, lines: tuple[int, int], score: float) -> dict:
    return {"concept_id": cid, "path": f"{cid}.md", "heading": heading,
            "locator": f"{cid}.md#L{lines[0]}-L{lines[1]}", "line_start": lines[0], "line_end": lines[1],
            "content_sha256": "1" * 64, "snippet": f"# {heading}\nDeadline permits jitter.", "score": score,
            "matched_terms": ["jitter", "deadline"]}


SAMPLES += [(_call("search_sections", {**ARGS, "query": "jitter deadline", "limit": 2}),
             _ok({"query": "jitter deadline", "terms": ["jitter", "deadline"], "snapshot_revision": "2" * 64,
                  "total": 3, "truncated": True, "hits": [_section_hit("a", "Retry", (4, 5), 1.5),
                                                          _section_hit("b", "Backoff", (7, 9), 0.5)]}))]


def _full_card(cid: str, tags: list[str], trust: str = "unverified", stale: bool | None = None) -> dict:
    return {"id": cid, "path": f"{cid}.md", "type": "Note", "title": cid.upper(), "description": "", "tags": tags,
            "status": "stable", "trust": trust, "stale": stale, "stale_after": "2025-03-01" if stale is not None else None,
            "status_state": {"present": False, "valid": True, "raw": None, "effective": "stable"}}


_SOURCE = {"id": "rfc", "resource": "https://example.com/rfc", "title": "RFC", "author": "IETF", "usage_count": "3",
           "last_modified": None, "usage_window": None}
SAMPLES += [
    (_call("search_concepts", {**ARGS, "as_of": "2025-03-01"}),
     _ok({"query": "q", "as_of": "2025-03-01", "total": 1, "truncated": False,
          "hits": [{"concept": _full_card("a", ["ops", "net"], stale=True), "match": "id"}]})),
    (_call("get_neighbors", {**ARGS, "concept_id": "a"}),
     _ok({"concept": _full_card("a", [], stale=False), "direction": "both", "kinds": ["navigation"], "total": 1,
          "truncated": False, "sources": [], "edges": [{"kind": "navigation", "from": "a", "to": "b",
                                                         "relation_type": None, "source": _full_card("a", []),
                                                         "target": _full_card("b", ["net"])}]})),
    (_call("read_concept", {**ARGS, "concept_id": "a"}), _ok({"id": "a", "path": "a.md", "projection": {
        "title": "A", "tags": ["ops", "net"], "trust": "unverified",
        "sources": [_SOURCE, {**_SOURCE, "id": "", "usage_window": {"from": "2025-03-01", "to": "2025-03-31"}}],
        "usage_window": {"from": "2025-01-01", "to": "2025-12-31"},
        "generated": {"by": "writer/1.0", "at": "2025-01-02T03:04:05Z"},
        "computation": {"runtime": "python3", "parameters": [], "computation": "run.py", "executor": None,
                        "attester": None},
        "attributions": [{"id": "rfc", "normalized_id": "rfc", "sources": [_SOURCE],
                          "references": [{"id": "rfc", "raw": "[^rfc]"}], "definitions": []}]}})),
    (_call("read_concept", {**ARGS, "concept_id": "b"}), _ok({"id": "b", "path": "b.md", "projection": {"title": "B"},
                                                             "legacy_fallback": {"generated_from_timestamp": True,
                                                                                 "sources_from_citations": True}})),
]


SAMPLED_TOOLS = {"search_concepts", "get_neighbors", "doc_search", "help_search", "doc_links", "read_concept",
                 "search_sections"}


@pytest.mark.parametrize("name", sorted(n for n, m in MUTANTS.items() if set(m.tools) & SAMPLED_TOOLS))
def test_every_mutation_changes_some_response(name):
    mutate = MUTANTS[name].mutate
    state: dict = {}
    changed = False
    for _ in range(2):  # stateful mutants (cache, alternation) act on a repeat
        for request, response in SAMPLES:
            before = json.dumps(response, sort_keys=False)
            after = json.dumps(mutate(request, json.loads(before), state), sort_keys=False)
            changed |= before != after
    assert changed


def test_catalogue_names_the_breaking_rule_and_expected_killers():
    from knowspec.conformance.checks import CHECKS

    assert len(MUTANTS) >= 40
    for m in MUTANTS.values():
        assert m.rule and m.killed_by and set(m.killed_by) <= set(CHECKS)


@pytest.mark.parametrize("mutants,checks", [
    (["search_reverse_hits"], ("result_ordering",)),
    (["leak_bundle_path", "list_drops_get_neighbors"], ("no_path_leakage", "tools_list")),
    (["swap_concurrent_answers"], ("concurrent_calls",)),
    (["success_as_text_only"], ("result_ordering",)),  # it had passed with nothing judged
])
def test_mutants_are_killed_through_the_proxy(mutants, checks, toy_contract):
    base = RunConfig(target="", contract_path=toy_contract, max_examples=6, checks=checks)
    results = list(kill_rate(base, [sys.executable, str(TARGETS / "toy_server.py")], mutants))
    assert results[0].name == "identity" and results[0].killed_by == ()
    assert {r.name: r.killed for r in results[1:]} == dict.fromkeys(mutants, True)


KNOWSPEC = shutil.which("knowspec") or str(Path(sys.executable).parent / "knowspec")
def killed_by_our_server(tools: tuple[str, ...], checks: tuple[str, ...], names: list[str]) -> dict:
    """``{mutant: the cases that caught it}`` over our stdio server at two examples a property,
    once the unmutated server is seen to pass every case (skipped without the console script)."""
    if not Path(KNOWSPEC).exists():
        pytest.skip("knowspec console script not installed")
    base = RunConfig(target="", family="okf", tools=tools, checks=checks, max_examples=2)
    results = list(kill_rate(base, [KNOWSPEC, "serve", "--stdio"], names))
    assert results[0].name == "identity" and results[0].killed_by == () and not results[0].unreachable
    return {r.name: r.killed_by for r in results[1:]}


SECTION_DATA_MUTANTS = ["search_sections_heading_blanked", "search_sections_line_end_plus_one",
                        "search_sections_scores_scaled", "search_sections_snippet_shifted",
                        "search_sections_revision_other"]


@pytest.mark.slow
def test_section_data_mutants_are_killed_by_the_sections_oracle_while_the_real_server_passes():
    """Sorted, schema-valid answers with a wrong heading, line_end, score, snippet or fingerprint
    pass every rule but the data; oracle_search_sections compares the data with the bundle's."""
    assert killed_by_our_server(("search_sections",), ("oracle_search_sections",), SECTION_DATA_MUTANTS) == \
        dict.fromkeys(SECTION_DATA_MUTANTS, ("oracle_search_sections[search_sections]",))


CARD_DATA_MUTANTS = {
    "oracle_search_cards[search_concepts]": ["search_card_title_edited", "search_card_tags_reversed",
                                             "search_card_stale_flipped", "search_card_trust_raised"],
    "oracle_neighbor_cards[get_neighbors]": ["neighbors_focus_card_stale_after_nulled",
                                             "neighbors_target_card_tags_dropped",
                                             "neighbors_source_card_of_other_concept"],
    "oracle_read_concept[read_concept]": ["read_concept_projection_tag_dropped",
                                          "read_concept_projection_tags_reversed",
                                          "read_concept_projection_trust_raised",
                                          "read_concept_projection_source_author_blanked",
                                          "read_concept_projection_generated_at_nulled",
                                          "read_concept_projection_source_window_dropped",
                                          "read_concept_projection_shared_window_dropped",
                                          "read_concept_projection_attribution_reference_dropped",
                                          "read_concept_projection_title_of_previous_read"],
}


@pytest.mark.slow
def test_card_and_projection_mutants_are_killed_by_their_card_oracle_while_the_real_server_passes():
    """Schema-valid answers whose hits and edges are right but whose cards or projection say
    something else about the concept (a title, tags, trust, stale, another concept's card) pass
    every rule but the data; the card oracles compare the data with the frontmatter written."""
    names = [name for group in CARD_DATA_MUTANTS.values() for name in group]
    assert killed_by_our_server(("search_concepts", "get_neighbors", "read_concept"),
                                ("oracle_search_cards", "oracle_neighbor_cards", "oracle_read_concept"), names) == {
        name: (case,) for case, group in CARD_DATA_MUTANTS.items() for name in group}


TEXT_MUTANTS = {"list_concepts_text_keys_reordered": ("oracle_list_concepts[list_concepts]",),
                "validate_bundle_text_with_codes": ("oracle_validate_bundle[validate_bundle]",),
                "temporal_preview_text_json": ("oracle_temporal_upgrade[apply_temporal_upgrade]",  # one case per tool
                                               "oracle_temporal_upgrade[preview_temporal_upgrade]"),
                "graph_text_compact": ("oracle_semantic_graph[get_semantic_graph]",),
                "graph_text_keys_reversed": ("oracle_semantic_graph[get_semantic_graph]",),
                "graph_text_concept_dropped": ("oracle_semantic_graph[get_semantic_graph]",),
                "graph_text_timestamp_dropped": ("oracle_semantic_graph[get_semantic_graph]",),
                "graph_text_broken_references_dropped": ("oracle_semantic_graph[get_semantic_graph]",),
                "graph_text_repeated_references_collapsed": ("oracle_semantic_graph[get_semantic_graph]",),
                "graph_text_subresources_dropped": ("oracle_semantic_graph[get_semantic_graph]",),
                "graph_text_undeclared_fragment_exists": ("oracle_semantic_graph[get_semantic_graph]",)}


@pytest.mark.slow
def test_custom_text_mutants_are_killed_while_the_real_server_passes():
    """Texts that hold the same JSON value in other bytes, a field upstream leaves out, or JSON
    where upstream writes nothing: structured content right, only the text differs."""
    tools = ("list_concepts", "validate_bundle", "preview_temporal_upgrade", "apply_temporal_upgrade",
             "get_semantic_graph")
    checks = ("oracle_list_concepts", "oracle_validate_bundle", "oracle_temporal_upgrade", "oracle_semantic_graph")
    assert killed_by_our_server(tools, checks, list(TEXT_MUTANTS)) == TEXT_MUTANTS


LEGACY_TIMESTAMP_MUTANTS = {"list_concepts_trust_raised": ("oracle_list_concepts[list_concepts]",),
                            "list_concepts_generated_at_nulled": ("oracle_list_concepts[list_concepts]",),
                            "list_concepts_timestamp_fallback_unflagged": ("oracle_list_concepts[list_concepts]",),
                            "list_concepts_citations_unflagged": ("oracle_list_concepts[list_concepts]",),
                            "list_concepts_citations_always_flagged": ("oracle_list_concepts[list_concepts]",),
                            "read_concept_timestamp_fallback_unflagged": ("oracle_read_concept[read_concept]",),
                            "read_concept_citations_fallback_unflagged": ("oracle_read_concept[read_concept]",),
                            "list_concepts_computation_absent": ("oracle_list_concepts[list_concepts]",),
                            "read_concept_projection_computation_nulled": ("oracle_read_concept[read_concept]",)}


@pytest.mark.slow
def test_list_card_and_legacy_timestamp_mutants_are_killed_while_the_real_server_passes():
    """list_concepts cards whose trust, generated_at, legacy flags or computation summary say
    something else, and a read_concept that hides a v0.1 fallback or a computation contract, pass
    every rule but the data."""
    assert killed_by_our_server(("list_concepts", "read_concept"), ("oracle_list_concepts", "oracle_read_concept"),
                                list(LEGACY_TIMESTAMP_MUTANTS)) == LEGACY_TIMESTAMP_MUTANTS


GRAPH_DATA_MUTANTS = {name: ("oracle_semantic_graph[get_semantic_graph]",) for name in (
    "graph_drops_references", "graph_drops_broken_references", "graph_concept_trust_raised",
    "graph_concept_unresolved_status_stable", "graph_concept_tags_dropped", "graph_concept_resource_relative",
    "graph_concept_stale_flipped", "graph_concept_staleness_as_of_dropped", "graph_instant_profile_named_as_date",
    "graph_broken_relation_dropped", "graph_broken_relation_exists", "graph_subresource_relation_from_concept",
    "graph_generation_dropped",
    "graph_generation_fallback_unflagged", "graph_verification_dropped", "graph_verifications_reordered",
    "graph_source_dropped", "graph_citation_source_unflagged", "graph_source_usage_count_plain",
    "graph_attribution_unresolved", "graph_source_window_override_dropped", "graph_source_last_modified_plain")}
ASSET_MUTANTS = {name: ("oracle_graph_assets[get_semantic_graph]",) for name in (
    "graph_bare_resource_ambiguous", "graph_asset_dropped", "graph_asset_exists_flipped",
    "graph_contract_executor_node_dropped", "graph_executor_asset_role_concept")}
CONTRACT_MUTANTS = {name: ("oracle_graph_computations[get_semantic_graph]",) for name in (
    "graph_contract_file_mode_inline", "graph_computation_parameter_dropped")}


@pytest.mark.slow
def test_graph_data_mutants_are_killed_by_the_graph_oracle_while_the_real_server_passes():
    """A v0.2 graph that lists only the links to existing concepts, whose concept nodes say
    another trust, status, tags, resource kind or staleness (or an instant projection is named as a
    date one), whose relation nodes leave out or resolve a
    broken relation or lose a subresource source, or whose provenance nodes (Generation, Verification,
    ProvenanceSource, ClaimAttribution) lose, reorder or retype what the frontmatter says, passes
    every rule but the contract's data."""
    assert killed_by_our_server(("get_semantic_graph",), ("oracle_semantic_graph",),
                                list(GRAPH_DATA_MUTANTS)) == GRAPH_DATA_MUTANTS


@pytest.mark.slow
def test_asset_mutants_are_killed_by_the_asset_oracle_while_the_real_server_passes():
    """A graph whose bare resource path reads as ambiguous, that loses a ReferencedAsset or flips
    its exists flag, or whose contract loses its executor's asset node or files that asset under
    another role, passes every other rule."""
    assert killed_by_our_server(("get_semantic_graph",), ("oracle_graph_assets",),
                                list(ASSET_MUTANTS)) == ASSET_MUTANTS


@pytest.mark.slow
def test_contract_mutants_are_killed_by_the_computation_oracle_while_the_real_server_passes():
    """A graph whose file-mode contract reads as inline, or that loses a ComputationParameter,
    passes every other rule."""
    assert killed_by_our_server(("get_semantic_graph",), ("oracle_graph_computations",),
                                list(CONTRACT_MUTANTS)) == CONTRACT_MUTANTS


STRICT_MUTANTS = {name: ("oracle_validate_bundle[validate_bundle]",) for name in (
    "validate_strict_window_order_dropped", "validate_strict_stale_dropped")}


@pytest.mark.slow
def test_strict_finding_mutants_are_killed_by_the_validate_oracle_while_the_real_server_passes():
    """A strict report that leaves out a reversed window or a reached boundary (its counts kept
    consistent) passes every rule but the temporal findings the contract names."""
    assert killed_by_our_server(("validate_bundle",), ("oracle_validate_bundle",), list(STRICT_MUTANTS)) == STRICT_MUTANTS


def test_the_catalogue_covers_every_contract_tool_with_120_mutants():
    from knowspec.conformance.contract import load_contract
    from knowspec.conformance.mutants.killrate import HOST_MUTANTS, tools_of

    tools = {t.name for t in load_contract(None).tools}
    covered = {t for name in HOST_MUTANTS for t in tools_of(name)}
    assert len(HOST_MUTANTS) >= 120 and covered == tools


def test_every_server_mutant_is_implemented_by_the_mutant_host():
    import importlib.util
    from pathlib import Path

    from knowspec.conformance.mutants.server_catalogue import SERVER_MUTANTS

    spec = importlib.util.spec_from_file_location("mutant_host", Path(__file__).parent / "mutant_host.py")
    host = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(host)
    assert set(host.SERVER_PATCHES) == set(SERVER_MUTANTS)


def test_mutants_of_one_tool_set_share_a_worker():
    from knowspec.conformance.mutants.killrate import partition, scope_of

    names = ["list_concepts_reverse", "list_concepts_drop_last_card", "doc_get_links_reversed", "graph_unsorted"]
    buckets = partition(names, 2)
    assert sorted(n for b in buckets for n in b) == sorted(names)
    for bucket in buckets:
        others = [n for b in buckets if b is not bucket for n in b]
        assert not {scope_of(n) for n in bucket} & {scope_of(n) for n in others}


class _FakeWorker:
    """A HostWorker whose runs are scripted: {(mutant, checks, skipped): failing cases}."""

    def __init__(self, runs: dict) -> None:
        from knowspec.conformance.config import RunConfig

        self.runs, self.calls, self.active = runs, [], "identity"
        self.base, self.baselines = RunConfig(target=""), {}

    def select(self, name: str) -> None:
        self.active = name

    def failing(self, scope, checks=(), skip=()):
        self.calls.append((self.active, tuple(checks), tuple(skip)))
        failed = self.runs.get((self.active, tuple(checks), tuple(skip)), set())
        return {c for c in failed if not checks or c.split("[")[0] in checks}, False


def _judge(runs: dict, name: str):
    """HostWorker.judge over the scripted runs; (result, the runs it asked for)."""
    from knowspec.conformance.mutants.killrate import HostWorker

    worker = _FakeWorker(runs)
    worker.unmutated_failures = HostWorker.unmutated_failures.__get__(worker)
    return HostWorker.judge(worker, name), worker.calls


def test_a_mutant_is_judged_by_its_expected_checks_first_and_only_them_when_they_kill():
    runs = {("search_reverse_hits", ("result_ordering",), ()): {"result_ordering[search_concepts]"}}
    result, calls = _judge(runs, "search_reverse_hits")
    assert result.killed and result.killed_by == ("result_ordering[search_concepts]",)
    assert result.judged_with == "expected checks"
    assert [c for c in calls if c[0] == "search_reverse_hits"] == [("search_reverse_hits", ("result_ordering",), ())]


def test_a_mutant_its_expected_checks_miss_is_judged_by_every_other_check():
    runs = {("search_reverse_hits", (), ("result_ordering",)): {"differential_search[search_concepts]"}}
    result, calls = _judge(runs, "search_reverse_hits")
    assert result.killed and result.judged_with == "every check on its tools"
    assert ("search_reverse_hits", (), ("result_ordering",)) in calls


def test_a_case_failing_unmutated_too_is_no_kill():
    failing = {"result_ordering[search_concepts]"}
    runs = {("search_reverse_hits", ("result_ordering",), ()): failing, ("identity", ("result_ordering",), ()): failing}
    result, _ = _judge(runs, "search_reverse_hits")
    assert not result.killed and result.killed_by == ()


def test_rest_mutants_are_judged_over_rest_and_named_as_such():
    from knowspec.conformance.mutants.cli import tool_counts
    from knowspec.conformance.mutants.killrate import MutantResult, scope_of
    from knowspec.conformance.mutants.server_catalogue import SERVER_MUTANTS

    rest = [n for n, m in SERVER_MUTANTS.items() if m.kind == "rest"]
    assert len(rest) >= 8 and all(scope_of(n)[3] for n in rest)
    assert not scope_of("doc_search_ignores_acl")[3]
    counts = tool_counts([MutantResult(rest[0], True, ("rest_sessions",), kind="rest"),
                          MutantResult("x", False, (), tools=("doc_get", "doc_search"), kind="acl")])
    assert counts == {"(REST)": (1, 1), "doc_get": (0, 1), "doc_search": (0, 1)}


HOST = Path(__file__).parent / "mutant_host.py"
HOST_SERVER = (f"{sys.executable} {HOST} --control {{control}} --pool {{pool}} --admin {{admin}} --reader {{reader}} "
               "--http 127.0.0.1:{port}")


@pytest.mark.slow
def test_host_mode_kills_server_side_mutants_a_proxy_cannot_fake(tmp_path):
    """CAS, ACL before ranking, query folding and the REST session gate live in the server: the
    host switches them in-process. A response edit must reach the wire over HTTP too (the server
    encodes answers off the event loop; the host must edit the real answer, not a placeholder)."""
    from knowspec.conformance.mutants.killrate import host_kill_rate

    names = ["apply_patch_no_compare_and_swap", "doc_search_acl_after_ranking", "query_fold_keeps_dotless_i",
             "rest_login_accepts_wrong_password", "success_flagged_as_error"]
    results = host_kill_rate(RunConfig(target="", max_examples=2, shared_session=True), HOST_SERVER, names, jobs=1)
    baseline = results.pop()
    assert baseline.killed_by == ()
    assert {r.name: r.killed for r in results} == dict.fromkeys(names, True)
    assert all(not r.unreachable for r in results)
