"""Cancellation and deadlines: a cancelled call never turns into a late success, and the session lives on.

Rules: spec/errors.toml ``operation_cancelled`` ("the request was cancelled or its deadline passed;
no partial success") and the MCP cancellation utility: after ``notifications/cancelled`` the
receiver should not answer, though an answer that crossed the cancel on the wire may still come.

A late success only proves a violation when the call could not have finished before the cancel
reached the server. So the check makes the call slow on a generated bundle (sized against the
target's own speed), sends the cancel early, and judges answers by their times on the wire
(``WireLog``): a success within ``slack`` of the cancel is the allowed race, a success long after it
is a cancel the target ignored. Targets too fast to tell the two apart are only held to the rest.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

from knowspec.conformance.checks.common import schema_errors
from knowspec.conformance.checks.registry import CheckContext, check, holds_tools
from knowspec.conformance.failures import NO_ENVELOPE, TRANSPORT_FAILURE, CheckFailed
from knowspec.conformance.fixtures.model import Bundle, Concept
from knowspec.conformance.target import CallOutcome, WireEvent

RULE = ("spec/errors.toml#operation_cancelled; MCP basic/utilities/cancellation "
        "(no answer, or operation_cancelled, after notifications/cancelled; the session stays usable)")
CANCELLED = "operation_cancelled"
REQUEST_CANCELLED = -32800      # how a 2025-era streamable-HTTP server ends a cancelled request's stream
SLOW_TOOL = "search_concepts"   # a broad search reads every byte of the bundle
SLOW_SECONDS = 0.6              # how long the calibrated call should take on the target
FILE_BYTES = 1_000_000          # big bodies: cheap to write, costly to fold and search
MIN_FILES, MAX_FILES = 8, 48    # at most 48 MB, under the 64 MiB bundle limit
MIN_BUDGET = 15.0               # seconds of time budget the check needs


@dataclass(frozen=True)
class Timing:
    """What calibration learned: the slow call's size and duration, and the target's round trip."""

    files: int
    duration: float
    latency: float

    @property
    def cancel_after(self) -> float:
        """Early enough that the call is surely still running, late enough that it has started."""
        return min(0.1, self.duration / 4)

    @property
    def slack(self) -> float:
        """How long after the cancel a success may still be the allowed race (or a slow client read)."""
        return max(0.15, 2 * self.latency)

    @property
    def decidable(self) -> bool:
        return self.duration - self.cancel_after > 2 * self.slack

    @property
    def window(self) -> float:
        """How long to wait for a late answer (a target ignoring the cancel answers after ~duration)."""
        return 3 * self.duration + self.slack + 0.5


def judge_answer(answer: WireEvent | None, cancel_at: float | None, timing: Timing) -> str | None:
    """Why the answer to a cancelled (or deadline-expired) call breaks the rules; None when allowed."""
    if answer is None:
        return None
    if answer.kind == "error":
        if answer.code == REQUEST_CANCELLED:
            return None
        return f"the cancelled call was answered with JSON-RPC error {answer.code} instead of no answer"
    if answer.is_error:
        if answer.code == CANCELLED:
            return None
        return f"the cancelled call was answered with error code {answer.code!r}, expected {CANCELLED!r}"
    if cancel_at is None or answer.at <= cancel_at:
        return None
    late = answer.at - cancel_at
    if late <= timing.slack or not timing.decidable:
        return None
    return (f"a success arrived {late:.2f}s after notifications/cancelled (the uncancelled call takes "
            f"{timing.duration:.2f}s): the cancel was ignored")


def _applies(ctx: CheckContext) -> str | None:
    if SLOW_TOOL not in {t.name for t in ctx.contract.tools} or not ctx.is_advertised(SLOW_TOOL):
        return f"needs {SLOW_TOOL} in the contract and advertised"
    if ctx.deadline is not None and ctx.deadline - time.monotonic() < MIN_BUDGET:
        return "time budget too short for the cancellation timings"
    return None


def _slow_args(ctx: CheckContext, files: int) -> dict[str, Any]:
    """A broad search over a freshly written bundle: a new path, so no server cache can shortcut it."""
    body = "hay " * (FILE_BYTES // 4) + "needle"
    bundle = Bundle("cancel-slow", tuple(Concept(f"c{i:03d}", title=f"title {i}", text=body)
                                         for i in range(files)))
    return {"bundle_path": str(ctx.bundles.path_of(bundle, fresh=True)), "query": "needle", "limit": 1}


def _same_id(a: Any, b: Any) -> bool:
    return a == b or str(a) == str(b)


def _answer(ctx: CheckContext, request: WireEvent) -> WireEvent | None:
    return ctx.conn.wire.find(lambda e: not e.outgoing and e.kind in ("response", "error")
                              and _same_id(e.id, request.id), after=request.seq)


def _sent_call(ctx: CheckContext, mark: int, outcome: CallOutcome, when: str) -> WireEvent:
    """The tools/call written since ``mark``; none written means the session is gone."""
    request = ctx.conn.wire.find(lambda e: e.outgoing and e.kind == "request" and e.method == "tools/call", mark)
    if request is None:
        raise CheckFailed(f"session unusable {when}: the call could not be sent", arguments=outcome.arguments,
                          response=outcome.summary())
    return request


def _envelope_problems(ctx: CheckContext, tool: str, outcome: CallOutcome) -> list[str]:
    env = outcome.structured
    if not isinstance(env, dict):
        return [NO_ENVELOPE]
    problems = schema_errors(ctx.contract.error_schema, env)
    errors = ctx.contract.tool(tool).errors
    if errors and CANCELLED not in errors:
        problems.append(f"{CANCELLED} is not among {tool}'s contract errors")
    if ctx.contract.retryable(CANCELLED) and env.get("retryable") is False:  # spec/errors.toml: retryable
        problems.append(f"{CANCELLED} must be retryable")
    return problems


def _require_answer(ctx: CheckContext, tool: str, outcome: CallOutcome, what: str) -> None:
    """A valid call answers a success, or operation_cancelled when the target's own deadline passed."""
    if outcome.transport_error is not None:
        raise CheckFailed(f"{what}: {TRANSPORT_FAILURE}: {outcome.transport_error}", arguments=outcome.arguments,
                          response=outcome.summary())
    if outcome.rpc_error is not None:
        code, message = outcome.rpc_error
        raise CheckFailed(f"{what}: JSON-RPC error {code}: {message[:200]}", arguments=outcome.arguments,
                          response=outcome.summary())
    if not outcome.is_error:
        return
    code = outcome.structured.get("code") if isinstance(outcome.structured, dict) else None
    if code != CANCELLED:
        raise CheckFailed(f"{what}: a valid call failed with {code!r}", arguments=outcome.arguments,
                          response=outcome.summary())
    problems = _envelope_problems(ctx, tool, outcome)
    if problems:
        raise CheckFailed(f"{what}: bad {CANCELLED} envelope: " + "; ".join(problems),
                          arguments=outcome.arguments, response=outcome.summary())


def _call(ctx: CheckContext, tool: str, args: dict[str, Any], timeout: float) -> tuple[CallOutcome, float]:
    ctx.calls += 1
    start = time.monotonic()
    outcome = ctx.conn.call(tool, args, timeout)
    return outcome, time.monotonic() - start


def _calibrate(ctx: CheckContext, tool: str, latency: float) -> Timing:
    """Grow the bundle until the uncancelled call takes about SLOW_SECONDS (or the size cap)."""
    files = MIN_FILES
    while True:
        outcome, duration = _call(ctx, tool, _slow_args(ctx, files), ctx.config.call_timeout)
        _require_answer(ctx, tool, outcome, "the uncancelled reference call")
        if duration >= SLOW_SECONDS or files >= MAX_FILES or outcome.is_error:
            return Timing(files, duration, latency)
        files = min(MAX_FILES, max(2 * files, int(files * 1.25 * SLOW_SECONDS / max(duration, 0.01))))


def _cancel_mid_flight(ctx: CheckContext, tool: str, timing: Timing) -> None:
    """Cancel the slow call shortly after it was sent; watch the wire for whatever answers it."""
    args = _slow_args(ctx, timing.files)
    ctx.calls += 1
    future, request = ctx.conn.start_call(tool, args, timing.window)
    time.sleep(max(0.0, request.at + timing.cancel_after - time.monotonic()))
    cancel = ctx.conn.cancel(request.id, "knowspec conformance: cancelled on purpose")
    if cancel is None:
        raise RuntimeError("notifications/cancelled was not written to the transport")
    outcome: CallOutcome = future.result(timeout=timing.window + 30)
    if outcome.transport_error is not None and not outcome.timed_out:   # silence after a cancel is allowed
        raise CheckFailed(f"{TRANSPORT_FAILURE} after the cancel: {outcome.transport_error}", arguments=args,
                          response=outcome.summary())
    answer = _answer(ctx, request)
    problem = judge_answer(answer, cancel.at, timing)
    if problem is None and outcome.is_result and outcome.is_error:
        problems = _envelope_problems(ctx, tool, outcome)
        problem = f"bad {CANCELLED} envelope: " + "; ".join(problems) if problems else None
    if problem:
        raise CheckFailed(problem, arguments=args, response=outcome.summary())


def _client_deadline(ctx: CheckContext, tool: str, timing: Timing) -> None:
    """Let a short client-side deadline expire (the client then cancels); a late answer is judged alike."""
    args = _slow_args(ctx, timing.files)
    mark = ctx.conn.wire.mark()
    outcome, _ = _call(ctx, tool, args, timing.cancel_after)
    request = _sent_call(ctx, mark, outcome, "for the client-deadline call")
    cancel = ctx.conn.wire.find(lambda e: e.outgoing and e.method == "notifications/cancelled"
                                and _same_id(e.id, request.id), mark)
    if cancel is None:  # answered within the deadline, so nothing was cancelled: an ordinary answer
        if outcome.is_result or _answer(ctx, request) is not None:
            _require_answer(ctx, tool, outcome, "a call answered within the client deadline")
        return
    left = request.at + timing.window - time.monotonic()
    answer = ctx.conn.wire.wait_for(lambda e: not e.outgoing and e.kind in ("response", "error")
                                    and _same_id(e.id, request.id), request.seq, max(0.0, left))
    problem = judge_answer(answer, cancel.at, timing)
    if problem:
        raise CheckFailed(f"after the client deadline ({timing.cancel_after:.2f}s): {problem}", arguments=args,
                          response={"answer": dataclasses.asdict(answer) if answer else None})


def _still_usable(ctx: CheckContext, tool: str, args: dict[str, Any], before: CallOutcome, when: str) -> None:
    """The same small call answers again, byte for byte as before the cancel."""
    mark = ctx.conn.wire.mark()
    after, took = _call(ctx, tool, args, ctx.config.call_timeout)
    _sent_call(ctx, mark, after, when)
    if after.timed_out:
        raise CheckFailed(f"session unusable {when}: no answer to a normal call within {took:.1f}s",
                          arguments=args, response=after.summary())
    _require_answer(ctx, tool, after, f"session unusable {when}")
    if not before.is_error and not after.is_error and before.canonical_bytes() != after.canonical_bytes():
        raise CheckFailed(f"{when}, the same call answers differently than before the cancel",
                          arguments=args, response={"before": before.summary(), "after": after.summary()})


@check("cancellation", RULE, scope="server", applies=_applies, planned=holds_tools(SLOW_TOOL))
def cancellation(ctx: CheckContext) -> None:
    """A cancelled or timed-out call gets no answer or operation_cancelled, and the session lives on."""
    tool = SLOW_TOOL
    probe = {"bundle_path": ctx.fill()["bundle_path"], "query": "a", "limit": 5}
    first, _ = _call(ctx, tool, probe, ctx.config.call_timeout)  # warms the target up
    _require_answer(ctx, tool, first, "the warm-up call")
    before, latency = _call(ctx, tool, probe, ctx.config.call_timeout)
    _require_answer(ctx, tool, before, "the probe call")
    timing = _calibrate(ctx, tool, latency)
    _cancel_mid_flight(ctx, tool, timing)
    _still_usable(ctx, tool, probe, before, "after a cancelled call")
    _client_deadline(ctx, tool, timing)
    _still_usable(ctx, tool, probe, before, "after a client deadline expired")
