"""Rules the input checks apply: declared handler re-checks, distinctive echoes, drawn kinds."""

from __future__ import annotations

import functools

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from knowspec.conformance.checks.common import unsuccessful
from knowspec.conformance.failures import NO_STRUCTURE
from knowspec.conformance.checks.differential import _neighbor_cases
from knowspec.conformance.checks.inputs import _distinctive, invalid_arguments, pointed_at, violates_recheck
from knowspec.conformance.contract import load_contract
from knowspec.conformance.generate import acceptable_error_codes
from knowspec.conformance.target import CallOutcome

RECHECKS = ({"argument": "query", "rule": "non_blank"}, {"argument": "query", "rule": "letter_or_number"})


def test_declared_rechecks_excuse_only_the_inputs_they_name():
    assert violates_recheck(RECHECKS, {"query": "   "})
    assert violates_recheck(RECHECKS, {"query": ":"})
    assert not violates_recheck(RECHECKS, {"query": "çay"})
    assert not violates_recheck(RECHECKS, {"query": "٣"})  # an Arabic-Indic digit is a number
    assert not violates_recheck((), {"query": ":"})  # undeclared: a refusal is a failure


def test_plain_words_a_server_may_use_are_not_echo_evidence():
    assert not _distinctive("advertised")
    assert not _distinctive("short")
    assert _distinctive("/srv/secret/kb")
    assert _distinctive("x" * 30)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(_neighbor_cases(1, 100))
def test_generated_neighbour_calls_always_name_at_least_one_kind(case):
    _, calls = case
    assert all(kinds for _, _, kinds, _ in calls)


@functools.cache
def _tool(name: str):
    return next(t for t in load_contract().tools if t.name == name)


def test_a_case_whose_only_fault_is_its_bundle_path_keeps_that_path():
    """Swapping in a real bundle path had made a quarter of the generated cases valid (the path
    was their one fault), and their failures were reported as invalid-input ones."""
    tool, real = _tool("list_concepts"), "/srv/conform/bundle"
    assert pointed_at(tool, real, {"bundle_path": ""}) == {"bundle_path": ""}
    assert pointed_at(tool, real, {"bundle_path": "", "surplus": 1}) == {"bundle_path": real, "surplus": 1}
    assert pointed_at(tool, real, {"bundle_path": "rel", "surplus": 1}) == {"bundle_path": real, "surplus": 1}


@pytest.mark.parametrize("name", ["list_concepts", "read_concept", "write_concept", "search_concepts"])
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_generated_invalid_cases_keep_a_real_bundle_path_whenever_they_stay_invalid_with_it(name, data):
    tool = _tool(name)
    args = data.draw(invalid_arguments(tool, "/srv/conform/bundle"))
    if isinstance(args.get("bundle_path"), str) and len(args["bundle_path"]) < 4096:
        assert (args["bundle_path"] == "/srv/conform/bundle"
                or not acceptable_error_codes(tool.input_schema, {**args, "bundle_path": "/srv/conform/bundle"}))


def test_a_call_that_gave_nothing_to_judge_says_whether_it_failed_or_lacked_structure():
    refused = CallOutcome({}, is_error=True, structured={"code": "concept_not_found", "message": "no such concept"},
                          raw={})
    assert unsuccessful(refused) == "it failed (concept_not_found: no such concept)"
    assert unsuccessful(CallOutcome({}, texts=('{"concepts": []}',), raw={})) == NO_STRUCTURE
    assert unsuccessful(CallOutcome({}, structured={"concepts": []}, raw={})) is None


def _limit_refusal(field: str) -> CallOutcome:
    diagnostic = {"code": "invalid_input", "severity": "ERROR", "file": "", "field": field, "message": "reduce it",
                  "spec_ref": "", "policy_failure": False}
    return CallOutcome({}, is_error=True, raw={}, structured={
        "code": "resource_limit", "message": "too much", "retryable": False, "diagnostics": [diagnostic]})


def test_a_recovery_step_naming_the_query_is_no_blame():
    """read.md §4.2: too many query terms answer resource_limit with a recovery_step on query."""
    from pathlib import Path

    from knowspec.conformance.checks.inputs import _blames_a_limit
    from knowspec.conformance.checks.registry import BundleStore, CheckContext
    from knowspec.conformance.config import RunConfig

    contract = load_contract()
    ctx = CheckContext(None, contract, RunConfig(target="stdio:x"), {}, BundleStore(Path("/x")),
                       contract.tool("search_sections"))
    outcome = _limit_refusal("query")
    outcome.structured["diagnostics"][0]["code"] = "recovery_step"
    assert _blames_a_limit(ctx, outcome) is False


@pytest.mark.parametrize(("field", "blamed"), [("limit", True), ("/limit", True), ("arguments.limit", True),
                                               ("", False), ("bundle_path", False), ("files", False)])
def test_a_bundle_tools_resource_limit_on_valid_input_fails_only_when_it_names_a_limited_argument(field, blamed):
    """A narrowed limit had passed on every OKF tool: bundle caps may answer resource_limit, limits may not."""
    from pathlib import Path

    from knowspec.conformance.checks.inputs import _blames_a_limit
    from knowspec.conformance.checks.registry import BundleStore, CheckContext
    from knowspec.conformance.config import RunConfig

    contract = load_contract()
    ctx = CheckContext(None, contract, RunConfig(target="stdio:x"), {}, BundleStore(Path("/x")),
                       contract.tool("search_sections"))
    assert _blames_a_limit(ctx, _limit_refusal(field)) is blamed


def test_lists_the_contract_leaves_unordered_are_compared_as_multisets():
    """doc_entity's relations_in has no order in the contract: a server listing it otherwise had failed."""
    from knowspec.conformance.checks.docpool_import import entity_differences

    a, b = {"rel": "opens", "kind": "form", "key": "A"}, {"rel": "part_of", "kind": "module", "key": "B"}
    assert entity_differences({"relations_in": [a, b]}, {"relations_in": [b, a]}) == {}
    assert entity_differences({"relations": [a, b]}, {"relations": [b, a]}) == {"relations": [b, a]}  # ordered
    assert entity_differences({"relations_in": [a, b]}, {"relations_in": [a]}) == {"relations_in": [a]}


def test_notifications_and_server_requests_answer_no_request_line():
    """A server logging, or pinging its client, had been counted as answering a line twice."""
    from knowspec.conformance.checks.protocol_lines import _is_response

    assert not _is_response({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}})
    assert not _is_response({"jsonrpc": "2.0", "id": "s1", "method": "ping"})
    assert _is_response({"jsonrpc": "2.0", "id": 7, "result": {}})
    assert _is_response({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
    assert _is_response({"unparseable": "garbage"})  # still judged: it is no answer


@pytest.mark.parametrize(("value", "whole"), [(5, True), (5.0, True), (5.5, False), (True, False), ("5", False)])
def test_an_integer_may_be_written_as_a_whole_float(value, whole):
    from knowspec.conformance.checks.okf_oracles import _whole

    assert _whole(value) is whole


def test_an_okf_error_text_is_its_message_except_write_concepts_rejection_report():
    from knowspec.conformance.checks.common import _rejection_report

    env = {"code": "operation_rejected", "message": "tool operation was rejected"}
    report = '{"status":"rejected","path":"a.md","diagnostics":[]}'
    assert _rejection_report("write_concept", env, (report,))
    assert not _rejection_report("apply_concept_patch", env, (report,))
    assert not _rejection_report("write_concept", {**env, "code": "invalid_request"}, (report,))
    assert not _rejection_report("write_concept", env, ("error: tool operation was rejected",))
    parse_error = '{"status":"error","diagnostics":[]}'  # read.md §4.3: a bundle that does not parse
    assert _rejection_report("search_concepts", env, (parse_error,))


class _LeakingConnection:
    """Answers every call with an error naming ``folder``, as a careless storage message would."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def call(self, name, arguments, timeout):
        env = {"code": "pool_unavailable", "message": f"cannot open {self.folder}/docs.db", "retryable": False,
               "diagnostics": []}
        return CallOutcome(arguments, is_error=True, structured=env, texts=(env["message"],), raw={})


def _pool_context(folder, connection):
    from pathlib import Path

    from knowspec.conformance.checks.registry import BundleStore, CheckContext
    from knowspec.conformance.config import RunConfig

    contract = load_contract()
    config = RunConfig(target="stdio:x", pool_fixture=folder, max_examples=3)
    advertised = {t.name: {"name": t.name} for t in contract.tools}
    return CheckContext(connection, contract, config, advertised, BundleStore(Path("/x")), contract.tool("doc_get"))


def test_the_pool_folder_in_a_doc_tools_answer_is_a_leak(tmp_path):
    """Only the bundle folder had been looked for: a docs.db path in every doc_* error passed."""
    from knowspec.conformance.checks.leakage import no_pool_path_leakage
    from knowspec.conformance.failures import CheckFailed

    with pytest.raises(CheckFailed, match="absolute path of the pool's folder"):
        no_pool_path_leakage(_pool_context(tmp_path, _LeakingConnection(str(tmp_path))))
    no_pool_path_leakage(_pool_context(tmp_path, _LeakingConnection("/somewhere/else")))  # not this run's folder


@pytest.mark.parametrize("typed", [".", "pool"])
def test_a_pool_folder_named_relatively_is_looked_for_as_its_absolute_path(tmp_path, monkeypatch, typed):
    """"pool" or "." as typed had been secrets found in every correct answer."""
    from knowspec.conformance.checks.leakage import _pool_folders

    monkeypatch.chdir(tmp_path)
    (tmp_path / "pool").mkdir()
    folders = _pool_folders(_pool_context(typed, _LeakingConnection("")))
    assert folders and all(f.startswith("/") and f.endswith(typed.strip(".") or tmp_path.name) for f in folders)
