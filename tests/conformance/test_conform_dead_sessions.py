"""A call the target leaves unanswered is the target's failure, never an answer to judge.

The client SDK answers for a silent or vanished target with JSON-RPC errors of its own (a
deadline, a closed connection, an HTTP status without a JSON-RPC body). Judged as answers, the
same stand-in twice passed ``determinism`` on a dead session and a run against a target that
drops every call exited 0.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import mcp.types as types
import pytest

from toy_paths import TARGETS, toy_target
from knowspec.conformance.checks.registry import BUDGET_GRACE, CheckContext
from knowspec.conformance.config import RunConfig
from knowspec.conformance.contract import load_contract
from knowspec.conformance.failures import CaseAborted
from knowspec.conformance.runner import EXIT_FAILURES, EXIT_INTERRUPTED, run_to_end
from knowspec.conformance.target import CallOutcome, Target, connect, sdk_stand_in
from serving import free_port, serving

KNOWSPEC = str(Path(sys.executable).parent / "knowspec")
OKF_CONTRACT = load_contract(None).for_family("okf")
DEAD_SESSION_CHECKS = ("determinism", "concurrent_calls", "no_path_leakage")
ARGS = {"bundle_path": "/nowhere", "query": "a"}


@pytest.mark.parametrize("code,message", [
    (types.REQUEST_TIMEOUT, "Request 'tools/call' timed out"),
    (types.CONNECTION_CLOSED, "Connection closed"),
    (types.CONNECTION_CLOSED, "SSE stream ended without a response"),
    (types.INTERNAL_ERROR, "Server returned an error response"),
    (types.INVALID_REQUEST, "Session terminated"),
    (types.INVALID_REQUEST, "server answered a request with 202 Accepted"),
    (types.PARSE_ERROR, "Failed to parse JSON response: Expecting value"),
])
def test_the_sdks_stand_ins_are_recognised(code, message):
    assert sdk_stand_in(code, message)


@pytest.mark.parametrize("code,message", [
    (types.REQUEST_TIMEOUT, "upstream timed out"),            # a target's own -32001
    (types.CONNECTION_CLOSED, "server overloaded"),           # a target's own -32000
    (types.INTERNAL_ERROR, "boom"),
    (types.INVALID_PARAMS, "Session terminated"),             # the SDK's words under another code
])
def test_a_targets_own_errors_are_not_stand_ins(code, message):
    assert sdk_stand_in(code, message) is None


def test_a_silent_call_is_a_transport_failure_and_breaks_the_session():
    with connect(Target(toy_target("silent_calls"))) as conn:
        outcome = conn.call("search_concepts", ARGS, timeout=1.0)
        assert outcome.rpc_error is None
        assert outcome.timed_out and "no answer within" in outcome.transport_error
        assert conn.broken == outcome.transport_error


def test_a_target_that_dies_mid_call_is_a_transport_failure():
    with connect(Target(toy_target("dies_on_call"))) as conn:
        outcome = conn.call("search_concepts", ARGS, timeout=20.0)
        assert outcome.rpc_error is None and not outcome.timed_out
        assert "connection to the target closed" in outcome.transport_error
        assert outcome.transport_error.endswith("the server's stderr ends: toy-okf: out of patience, exiting")
        assert conn.broken


def test_a_json_rpc_error_the_target_sent_stays_its_answer():
    with connect(Target(toy_target("jsonrpc_errors"))) as conn:
        outcome = conn.call("search_concepts", {"limit": "not a number"}, timeout=20.0)
        assert outcome.rpc_error == (types.INVALID_PARAMS, "bad arguments")
        assert outcome.transport_error is None and conn.broken is None


@pytest.fixture(scope="module")
def failing_http_url():
    port = free_port()
    argv = [sys.executable, str(TARGETS / "toy_server.py"), "--http", str(port), "--variant", "status_500_calls"]
    with serving(argv, port) as base:
        yield base + "/mcp"


def test_an_http_error_status_without_a_json_rpc_body_is_a_transport_failure(failing_http_url):
    with connect(Target(failing_http_url)) as conn:
        outcome = conn.call("search_concepts", ARGS, timeout=20.0)
        assert outcome.rpc_error is None
        assert "HTTP error status without a JSON-RPC error" in outcome.transport_error


def _dead_run(target: str, toy_contract, **extra) -> object:
    settings = {"max_examples": 4, "workers": 1, "checks": DEAD_SESSION_CHECKS, **extra}
    return run_to_end(RunConfig(target=target, contract_path=toy_contract, **settings))


@pytest.mark.parametrize("variant", ["dies_on_call", "status_500_calls"])
def test_checks_fail_against_a_target_that_answers_no_call(variant, toy_contract, failing_http_url):
    target = failing_http_url if variant == "status_500_calls" else toy_target(variant)
    finished = _dead_run(target, toy_contract)
    assert finished.exit_code == EXIT_FAILURES
    judged = [r for r in finished.results if r.status != "skipped"]
    assert judged and all(r.status == "failed" for r in judged), [(r.case_id, r.status, r.reason) for r in judged]
    assert all(r.failure.message.startswith("transport failure") for r in judged)


def test_a_broken_session_is_replaced_before_the_next_case(toy_contract):
    finished = _dead_run(toy_target("dies_on_call"), toy_contract)
    judged = [r for r in finished.results if r.status != "skipped"]
    # the first case runs on the runner's own session (tools/list), each later one on a new one
    assert finished.timings["sessions_opened"] == len(judged) - 1


class _SilentConnection:
    """Stands in for a session whose target never answers: every call times out at its deadline."""

    def __init__(self):
        self.timeouts: list[float] = []

    def call(self, name, arguments, timeout):
        self.timeouts.append(timeout)
        return CallOutcome(arguments, transport_error="no answer within the call's deadline", timed_out=True)


def _context(deadline):
    conn = _SilentConnection()
    ctx = CheckContext(conn, OKF_CONTRACT, RunConfig(target="stdio:x", call_timeout=30.0), {}, None,
                       tool=OKF_CONTRACT.tools[0], deadline=deadline)
    return ctx, conn


def test_a_call_that_would_outlast_the_budget_is_cut_and_its_case_skipped():
    ctx, conn = _context(deadline=time.monotonic() + 1.0)
    with pytest.raises(CaseAborted) as aborted:
        ctx.call({})
    assert aborted.value.status == "skipped" and "during a call" in aborted.value.message
    assert 0 < conn.timeouts[0] <= 1.0 + BUDGET_GRACE


def test_no_call_starts_once_the_budget_and_its_grace_are_spent():
    ctx, conn = _context(deadline=time.monotonic() - BUDGET_GRACE - 1)
    with pytest.raises(CaseAborted) as aborted:
        ctx.call({})
    assert aborted.value.status == "skipped" and conn.timeouts == []


def test_a_target_that_answers_no_case_in_a_row_is_not_run_further(toy_contract, monkeypatch):
    """Silent after tools/list, a server held a run ~20 minutes at the default deadline (three
    cases of each tool); here the two toy tools stand for many."""
    from knowspec.conformance import runner

    monkeypatch.setattr(runner, "SILENT_TARGET_CASES", 4)
    finished = _dead_run(toy_target("silent_calls"), toy_contract, call_timeout=1.0,
                         checks=("determinism", "no_path_leakage", "truncation", "result_ordering"))
    statuses = [(r.case_id, r.status) for r in finished.results]
    unanswered = [r for r in finished.results if r.status == "failed"]
    assert len(unanswered) == 4 and {r.tool for r in unanswered} == {"search_concepts", "get_neighbors"}, statuses
    rest = [r for r in finished.results if r.status != "failed"]
    assert rest and all(r.status == "skipped" and "the last 4 cases, of any tool" in r.reason for r in rest), statuses


def test_without_a_budget_a_silent_call_fails_its_case_after_the_call_timeout():
    ctx, conn = _context(deadline=None)
    with pytest.raises(CaseAborted) as aborted:
        ctx.call({})
    assert aborted.value.status == "failed" and aborted.value.message.startswith("transport failure")
    assert conn.timeouts == [30.0]


def test_a_silent_target_cannot_stretch_the_time_budget(toy_contract):
    """With a 120 s call timeout and a 3 s budget the run ends long before one call could time out."""
    finished = _dead_run(toy_target("silent_calls"), toy_contract, time_budget=3.0, call_timeout=120.0,
                         checks=("determinism",))
    assert [r.status for r in finished.results] == ["skipped"] * len(finished.results)
    assert all("time budget exhausted" in r.reason for r in finished.results)
    assert finished.duration < 60.0


def _alive_with(marker: str, besides: int) -> list[int]:
    """Pids (not zombies, not ``besides``) whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == besides:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def _wait(predicate, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to find the targets")
def test_sigterm_stops_the_targets_removes_the_bundles_and_still_reports(tmp_path, toy_contract):
    marker = f"conform-sigterm-{uuid.uuid4().hex}"
    scratch, report = tmp_path / "tmp", tmp_path / "report.json"
    scratch.mkdir()
    argv = [KNOWSPEC, "conform", "--target", f"{toy_target('silent_calls')} --marker {marker}",
            "--contract", str(toy_contract), "--check", "determinism", "--workers", "2", "--json", str(report)]
    run = subprocess.Popen(argv, env={**os.environ, "TMPDIR": str(scratch)},
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert _wait(lambda: len(_alive_with(marker, run.pid)) >= 2, 60), "the workers' targets did not start"
        time.sleep(1.0)   # their calls are in flight (the target never answers one)
        run.send_signal(signal.SIGTERM)
        assert run.wait(60) == EXIT_INTERRUPTED, run.stderr.read().decode()[-2000:]
    finally:
        if run.poll() is None:
            run.kill()
    assert _wait(lambda: not _alive_with(marker, run.pid), 10), "a stdio target outlived the interrupted run"
    assert not list(scratch.glob("knowspec-conform-*"))
    written = json.loads(report.read_text())
    assert written["exit_code"] == EXIT_INTERRUPTED and "interrupted" in written["interrupted"]
    not_run = [a for a in written["skipped_areas"] if a["area"].endswith("case(s) not run")]
    assert not_run and "interrupted" in not_run[0]["why"]   # the cases in flight, not advice about data


def test_a_stdio_target_gets_the_callers_environment(monkeypatch):
    """A setting the user exported for the server they typed reaches it (the SDK's default would drop it)."""
    monkeypatch.setenv("TOY_ENV_MARK", "exported by the caller")
    with connect(Target(toy_target())) as conn:
        assert {t["description"] for t in conn.list_tools()} == {"exported by the caller"}


def test_a_tool_whose_calls_hang_is_not_run_past_three_unanswered_cases(toy_contract):
    """A hung handler cost every case a whole call deadline (160 s for one tool in a review)."""
    from knowspec.conformance.runner import HUNG_TOOL_CASES

    finished = _dead_run(toy_target("silent_calls"), toy_contract, call_timeout=1.0, tools=("search_concepts",),
                         checks=("determinism", "concurrent_calls", "no_path_leakage", "truncation",
                                 "result_ordering", "differential_search"))
    statuses = [(r.check_id, r.status) for r in finished.results]
    hung = [r for r in finished.results if r.status == "failed"]
    assert len(hung) == HUNG_TOOL_CASES, statuses
    assert all("no answer within the call's deadline" in r.failure.message for r in hung)
    rest = finished.results[HUNG_TOOL_CASES:]
    assert rest and all(r.status == "skipped" and r.reason.startswith("not run: 3 earlier cases of search_concepts")
                        for r in rest), statuses
    assert finished.exit_code == EXIT_FAILURES
