"""The cancellation check: it passes on the real server (stdio in both eras, HTTP, a short server
deadline) and fails on each cancellation mutant; its verdict on a late answer is pinned here."""

from __future__ import annotations

import shlex
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from knowspec.conformance.checks import CHECKS
from knowspec.conformance.checks.cancellation import Timing, judge_answer
from knowspec.conformance.config import RunConfig
from knowspec.conformance.events import CheckFinished
from knowspec.conformance.fixtures.model import Bundle, Concept
from knowspec.conformance.mutants.catalogue import CLIENT_MUTANTS
from knowspec.conformance.mutants.killrate import proxy_target
from knowspec.conformance.runner import run_to_end
from knowspec.conformance.target import Target, WireEvent, connect
from serving import free_port, serving

KNOWSPEC = shutil.which("knowspec") or str(Path(sys.executable).parent / "knowspec")
SERVE = [KNOWSPEC, "serve", "--stdio"]

needs_server = pytest.mark.skipif(not Path(KNOWSPEC).exists(), reason="knowspec console script not installed")


def _run(target: str, **options) -> CheckFinished:
    finished = run_to_end(RunConfig(target=target, family="okf", checks=("cancellation",), **options))
    [result] = finished.results
    return result


def _explain(result: CheckFinished) -> str:
    return f"{result.status}: {result.failure.message if result.failure else result.reason}"


# ---- the verdict on whatever answers a cancelled call -------------------------------------------
CANCEL_AT = 10.0
SLOW = Timing(files=16, duration=0.6, latency=0.003)


def _answer(at: float, kind: str = "response", is_error: bool = False, code=None) -> WireEvent:
    return WireEvent(seq=5, at=at, outgoing=False, kind=kind, id=7, is_error=is_error, code=code)


@pytest.mark.parametrize("answer,verdict", [
    (None, None),
    (_answer(10.05, "error", code=-32800), None),                       # 2025-era HTTP ends the stream so
    (_answer(10.3, is_error=True, code="operation_cancelled"), None),
    (_answer(9.99), None),                                              # answered before the cancel went out
    (_answer(10.1), None),                                              # crossed the cancel on the wire
    (_answer(10.5), "the cancel was ignored"),
    (_answer(10.05, is_error=True, code="operation_rejected"), "'operation_rejected'"),
    (_answer(10.05, "error", code=-32603), "JSON-RPC error -32603"),
])
def test_judge_answer(answer, verdict):
    found = judge_answer(answer, CANCEL_AT, SLOW)
    assert (found is None) if verdict is None else (verdict in found)


def test_a_late_success_from_a_fast_target_is_not_judged():
    fast = Timing(files=48, duration=0.1, latency=0.003)
    assert SLOW.decidable and not fast.decidable
    assert judge_answer(_answer(10.5), CANCEL_AT, fast) is None


# ---- the client mutants, one message at a time --------------------------------------------------
CALL = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "search_concepts"}}
CANCEL = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}


def test_client_mutants_name_their_rule_and_the_cancellation_check():
    cancel = {name: m for name, m in CLIENT_MUTANTS.items() if name.startswith("cancel_")}
    assert set(cancel) == {"cancel_ignored", "cancel_answered_wrong_code", "cancel_breaks_session"}
    for m in cancel.values():
        assert m.rule and m.killed_by == ("cancellation",)
    for m in CLIENT_MUTANTS.values():  # the others edit calls too (the pool defaults' mutants)
        assert m.rule and m.killed_by and set(m.killed_by) <= set(CHECKS)


def test_client_mutant_edits():
    assert CLIENT_MUTANTS["cancel_ignored"].edit(CANCEL, {}, {}) == ([], [])
    assert CLIENT_MUTANTS["cancel_ignored"].edit(CALL, {}, {}) == ([CALL], [])
    forward, answers = CLIENT_MUTANTS["cancel_answered_wrong_code"].edit(CANCEL, {3: CALL}, {})
    assert forward == [CANCEL] and answers[0]["id"] == 3
    assert answers[0]["result"]["structuredContent"]["code"] == "operation_rejected"
    assert CLIENT_MUTANTS["cancel_answered_wrong_code"].edit(CANCEL, {}, {}) == ([CANCEL], [])  # already answered
    state: dict = {}
    drop = CLIENT_MUTANTS["cancel_breaks_session"].edit
    assert [drop(m, {}, state)[0] for m in (CALL, CANCEL, CALL, CALL)] == [[CALL], [CANCEL], [], [CALL]]


# ---- end to end ----------------------------------------------------------------------------------


@needs_server
@pytest.mark.slow
@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_passes_on_the_real_server_over_stdio(era):
    result = _run("stdio:" + shlex.join(SERVE), era=era)
    assert result.status == "passed", _explain(result)


@pytest.fixture
def http_url(tmp_path):
    """Our server over HTTP: the suite signs in (bearer token) and writes bundles under a bundle root."""
    from knowspec.impl.config import Settings
    from knowspec.impl.docpool import auth
    from knowspec.conformance.target import rest_login

    port, bundles = free_port(), tmp_path / "bundles"
    auth.create_user(Settings(appdir=tmp_path).catalog_path, "walt", "pw", ["WRITER"])
    with serving([KNOWSPEC, "serve", "--http", f"127.0.0.1:{port}", "--appdir", str(tmp_path),
                  "--bundle-root", str(bundles)], port) as base:
        token = rest_login(base, "walt", "pw")[0]
        yield {"url": base + "/mcp", "bearer_token": token, "bundle_dir": bundles}


@needs_server
@pytest.mark.slow
def test_passes_on_the_real_server_over_http(http_url):
    """The 2025-era HTTP transport ends a cancelled request with -32800: allowed, not an answer."""
    result = _run(http_url["url"], era="legacy", bearer_token=http_url["bearer_token"],
                  bundle_dir=http_url["bundle_dir"])
    assert result.status == "passed", _explain(result)


@needs_server
def test_without_a_token_our_http_server_is_unreachable_for_the_suite_which_says_why(http_url):
    """The run had said only "MCPError: Server returned an error response"."""
    finished = run_to_end(RunConfig(target=http_url["url"], family="okf", checks=("cancellation",)))
    assert finished.exit_code == 2 and not finished.results
    assert "HTTP 401 to no bearer token" in finished.unreachable and "--bearer-token" in finished.unreachable


@needs_server
def test_a_refused_token_or_admin_login_is_named_when_the_session_cannot_open(http_url):
    bad_token = run_to_end(RunConfig(target=http_url["url"], family="okf", checks=("cancellation",),
                                     bearer_token="not-a-session"))
    assert bad_token.exit_code == 2 and "HTTP 401 to the bearer token given" in bad_token.unreachable
    base = http_url["url"].removesuffix("/mcp")
    bad_login = run_to_end(RunConfig(target=http_url["url"], family="okf", checks=("cancellation",),
                                     rest_url=base, admin_user="walt", admin_password="wrong"))
    assert bad_login.exit_code == 2
    assert "login as walt for the MCP session refused: HTTP 401" in bad_login.unreachable


@needs_server
@pytest.mark.slow
def test_a_server_deadline_answers_operation_cancelled():
    target = "stdio:" + shlex.join([*SERVE, "--call-timeout", "0.05"])
    body = "hay " * 250_000 + "needle"
    with tempfile.TemporaryDirectory() as tmp:
        path = Bundle("big", tuple(Concept(f"c{i}", text=body) for i in range(8))).write(Path(tmp))
        with connect(Target(target)) as conn:
            outcome = conn.call("search_concepts", {"bundle_path": str(path), "query": "needle"})
    assert outcome.is_error and outcome.structured["code"] == "operation_cancelled"
    assert outcome.structured["retryable"] is True
    result = _run(target)
    assert result.status == "passed", _explain(result)


@needs_server
@pytest.mark.slow
@pytest.mark.parametrize("mutant,why", [
    ("identity", None),
    ("cancel_ignored", "the cancel was ignored"),
    ("cancel_answered_wrong_code", "'operation_rejected'"),
    ("cancel_breaks_session", "session unusable after a cancelled call"),
])
def test_mutants_are_killed(mutant, why):
    result = _run(proxy_target(mutant, SERVE), call_timeout=3)
    if why is None:
        assert result.status == "passed", _explain(result)
    else:
        assert result.status == "failed" and why in result.failure.message, _explain(result)
