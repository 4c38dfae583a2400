"""Each check passes on the good toy server and fails, under its own id, on the variant that breaks it."""

from __future__ import annotations

import pytest

from knowspec.conformance.checks import CHECKS
from knowspec.conformance.checks.docpool_import import POOL_CHECKS
from knowspec.conformance.config import RunConfig
from knowspec.conformance.runner import EXIT_FAILURES, EXIT_OK, run_to_end

# variant of the toy server -> the check that must catch it
BROKEN = {
    "missing_tool": "tools_list",
    "schema_drift": "tools_list",
    "unknown_tool_result": "unknown_tool",
    "reject_unicode": "input_valid_accepted",
    "no_validation": "input_invalid_rejected",
    "jsonrpc_errors": "input_invalid_rejected",
    "wrong_limit_code": "boundary_limits",
    "echo_value": "boundary_limits",
    "bad_output": "output_schema",
    "bad_envelope": "output_schema",
    "text_mismatch": "text_fallback",
    "python_json_text": "text_encoding",
    "reorder": "result_ordering",
    "flip_truncated": "truncation",
    "nondeterministic": "determinism",
    "racy": "concurrent_calls",
    "leak_path": "no_path_leakage",
    "drop_hit": "differential_search",
    "bad_neighbors_order": "differential_neighbors",
    "dies_on_cancel": "cancellation",
    "drops_bad_lines": "every_line_answered",
    "prints_to_stdout": "stdout_only_messages",
    "quadratic_validation": "hostile_validation_nonblocking",
}


@pytest.fixture(scope="module")
def good_run(toy_contract, target_for):
    return run_to_end(RunConfig(target=target_for("good"), contract_path=toy_contract, max_examples=10))


def test_good_server_passes_every_check(good_run):
    bad = [(r.case_id, r.failure.message if r.failure else r.reason)
           for r in good_run.results if r.status not in ("passed", "skipped")]
    assert bad == []
    assert good_run.exit_code == EXIT_OK


# REST ones: test_rest_checks, test_pool_import; the write-tool one: test_apply_isolation_check
MCP_CHECKS = set(CHECKS) - {"rest_importdoc", "rest_sessions", *POOL_CHECKS, "no_mixed_reads_during_apply",
                            "no_pool_path_leakage"}  # doc tools only: judged in test_conform_input_rules
# per-tool oracles judge tools the toy lacks: the real server and the kill rate judge them (test_conform_mutants)
MCP_CHECKS -= {c for c in CHECKS if c.startswith("oracle_")}


def test_every_check_runs_and_passes_somewhere_on_the_good_server(good_run):
    passed = {r.check_id for r in good_run.results if r.status == "passed"}
    assert passed == MCP_CHECKS


def test_every_check_has_a_breaking_variant():
    assert set(BROKEN.values()) == MCP_CHECKS


@pytest.mark.parametrize("variant,check_id", sorted(BROKEN.items()))
def test_broken_variant_fails_with_the_check_id(variant, check_id, toy_contract, target_for):
    finished = run_to_end(RunConfig(target=target_for(variant), contract_path=toy_contract, max_examples=10,
                                    checks=(check_id,)))
    failed = {r.check_id for r in finished.results if r.status == "failed"}
    assert failed == {check_id}, [(r.case_id, r.status, r.reason) for r in finished.results]
    assert finished.exit_code == EXIT_FAILURES
    failure = next(r.failure for r in finished.results if r.status == "failed")
    assert failure.message and failure.rule
