"""No mixed reads during an apply: a reader on another session sees the whole old bundle or the
whole new one while a many-file ``apply_concept_patch`` publishes.

Rule: spec/okf write contract, commit atomicity (a commit publishes all of its files or none,
for readers as well as after a crash). The check writes its own fresh bundle of many concepts,
lists it, previews one patch that changes every concept, starts the apply on the check's session
and, until the apply answers, lists the bundle again and again on a second session (over stdio,
a second server process on the same directory). Every listing must equal the listing before the
apply or the one after it, and a reader that has seen the new bundle never sees the old one again.
A fast target may finish an apply between two reads; a few rounds give the reads a chance to land
inside the publication, and a target whose reads never overlapped an apply passes unproven.
"""

from __future__ import annotations

import time
from typing import Any

from knowspec.conformance.checks.common import unsuccessful
from knowspec.conformance.checks.registry import CheckContext, check, holds_tools
from knowspec.conformance.failures import CheckFailed
from knowspec.conformance.fixtures.model import Bundle, Concept
from knowspec.conformance.target import CallOutcome, Connection, TargetError, connect

RULE = "spec/okf write contract: a commit publishes all of its files or none, also for concurrent readers"
TOOLS = ("list_concepts", "preview_concept_patch", "apply_concept_patch")
CONCEPTS = 150
ROUNDS = 2
DATES = ("2029-01-01", "2031-01-01", "2032-01-01", "2033-01-01")
ACTOR = "human:conformance"
MIN_BUDGET = 30.0


def _applies(ctx: CheckContext) -> str | None:
    missing = [t for t in TOOLS if t not in {c.name for c in ctx.contract.tools} or not ctx.is_advertised(t)]
    if missing:
        return f"needs {', '.join(missing)} in the contract and advertised"
    if ctx.deadline is not None and ctx.deadline - time.monotonic() < MIN_BUDGET:
        return "time budget too short for concurrent applies"
    return None


def _bundle() -> Bundle:
    return Bundle("apply-isolation", tuple(
        Concept(f"c/n{i:03d}", title=f"Note {i}", text=f"Body {i}.", stale_after=DATES[0]) for i in range(CONCEPTS)))


def _ops(date: str) -> list[dict[str, Any]]:
    return [{"kind": "set_lifecycle", "concept_id": f"c/n{i:03d}", "lifecycle": {"status": "stable", "stale_after": date}}
            for i in range(CONCEPTS)]


def _success(outcome: CallOutcome, what: str) -> dict[str, Any]:
    why = ("it got no result" if outcome.transport_error is not None or outcome.rpc_error is not None
           else unsuccessful(outcome))
    if why:
        raise CheckFailed(f"{what} did not succeed: {why}", arguments=outcome.arguments, response=outcome.summary())
    return outcome.structured


def _listing(conn: Connection, ctx: CheckContext, path: str, what: str) -> list[Any]:
    ctx.calls += 1
    args = {"bundle_path": path}
    structured = _success(conn.call("list_concepts", args, ctx.config.call_timeout), what)
    concepts = structured.get("concepts")
    if not isinstance(concepts, list):
        raise CheckFailed(f"{what}: no concepts array", arguments=args, response=structured)
    return concepts


def _changed(listing: list[Any], old: list[Any]) -> int:
    before = {c.get("id"): c for c in old if isinstance(c, dict)}
    return sum(1 for c in listing if isinstance(c, dict) and before.get(c.get("id")) != c)


def _one_round(ctx: CheckContext, reader: Connection, path: str, date: str) -> int:
    """Apply ``date`` to every concept while ``reader`` lists; the number of reads that overlapped."""
    old = _listing(reader, ctx, path, "the listing before the apply")
    ctx.calls += 1
    preview = _success(ctx.conn.call("preview_concept_patch", {"bundle_path": path, "actor": ACTOR, "operations": _ops(date)},
                                     ctx.config.call_timeout), "the preview")
    args = {"bundle_path": path, "actor": ACTOR, "operations": _ops(date),
            "expected_revision": preview.get("base_revision"), "expected_plan_digest": preview.get("plan_digest")}
    ctx.calls += 1
    future, _request = ctx.conn.start_call("apply_concept_patch", args, ctx.config.call_timeout)
    reads: list[list[Any]] = []
    while not future.done():
        reads.append(_listing(reader, ctx, path, "a listing during the apply"))
    applied = _success(future.result(timeout=ctx.config.call_timeout + 30), "the apply")
    if applied.get("status") != "applied":
        raise CheckFailed(f"the apply answered status {applied.get('status')!r}, expected 'applied'",
                          arguments={"bundle_path": path, "operations": f"{CONCEPTS} x set_lifecycle"},
                          response=applied)
    new = _listing(reader, ctx, path, "the listing after the apply")
    if _changed(new, old) != CONCEPTS:
        raise CheckFailed(f"the apply changed {_changed(new, old)} of {CONCEPTS} listed concepts",
                          arguments={"bundle_path": path}, response={"changed_paths": len(applied.get("changed_paths") or [])})
    seen_new = False
    for n, listing in enumerate(reads):
        if listing == new:
            seen_new = True
        elif listing != old:
            raise CheckFailed(f"read {n + 1} of {len(reads)} during the apply was mixed: {_changed(listing, old)} of "
                              f"{CONCEPTS} concepts new, the rest old", arguments={"bundle_path": path})
        elif seen_new:
            raise CheckFailed(f"read {n + 1} of {len(reads)} went back to the old bundle after a reader saw the new one",
                              arguments={"bundle_path": path})
    return len(reads)


@check("no_mixed_reads_during_apply", RULE, scope="server", applies=_applies, planned=holds_tools(*TOOLS))
def no_mixed_reads_during_apply(ctx: CheckContext) -> None:
    """While a many-file apply publishes, another session's list_concepts answers all-old or all-new."""
    path = str(ctx.bundles.path_of(_bundle(), fresh=True))
    try:
        with connect(ctx.conn.target) as reader:
            for date in DATES[1:ROUNDS + 1]:
                if ctx.deadline is not None and time.monotonic() > ctx.deadline:
                    return
                _one_round(ctx, reader, path, date)
    except TargetError as exc:
        raise CheckFailed(f"a second session could not be opened: {exc}") from None
