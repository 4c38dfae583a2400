"""Mutants break something on the wire, and the suite kills them through the proxy."""

from __future__ import annotations

import json
import sys

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
NOT_FOUND = json.loads(json.dumps(ERROR).replace("resource_limit", "concept_not_found"))
SAMPLES += [(_call(tool, {"query": "q", "kind": "k", "key": "x"}), _ok({"results": _RESULTS}))
            for tool in ("doc_search", "help_search", "doc_links")]
SAMPLES += [(_call("doc_search", {"query": "q", "mode": "vector"}), _ok({"results": _VECTOR})),
            (_call("read_concept", ARGS), NOT_FOUND),
            (_call("read_concept", ARGS), _ok({"id": "a", "path": "a.md", "frontmatter_yaml": "type: Note\ntitle: A\n",
                                               "body": "x\ny", "projection": {"stale_after": "2025-01-01"}}))]


SAMPLED_TOOLS = {"search_concepts", "get_neighbors", "doc_search", "help_search", "doc_links", "read_concept"}


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
])
def test_mutants_are_killed_through_the_proxy(mutants, checks, toy_contract):
    base = RunConfig(target="", contract_path=toy_contract, max_examples=6, checks=checks)
    results = list(kill_rate(base, [sys.executable, str(TARGETS / "toy_server.py")], mutants))
    assert results[0].name == "identity" and results[0].killed_by == ()
    assert {r.name: r.killed for r in results[1:]} == dict.fromkeys(mutants, True)


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


@pytest.mark.slow
def test_host_mode_kills_server_side_mutants_a_proxy_cannot_fake(tmp_path):
    """CAS, ACL before ranking and query folding live in the server: the host switches them in-process."""
    from pathlib import Path

    from knowspec.conformance.mutants.killrate import host_kill_rate

    host = Path(__file__).parent / "mutant_host.py"
    server = f"{sys.executable} {host} --control {{control}} --pool {{pool}} --http 127.0.0.1:{{port}}"
    names = ["apply_patch_no_compare_and_swap", "doc_search_acl_after_ranking", "query_fold_keeps_dotless_i"]
    results = host_kill_rate(RunConfig(target="", max_examples=2, shared_session=True), server, names, jobs=1)
    baseline = results.pop()
    assert baseline.killed_by == ()
    assert {r.name: r.killed for r in results} == dict.fromkeys(names, True)
