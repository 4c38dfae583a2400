"""Writers in several processes apply conflicting patches at the same instant: one wins."""

from __future__ import annotations

import multiprocessing as mp

from knowspec.impl.context import CallContext
from knowspec.impl.errors import ToolError
from knowspec.impl.okf.tools import write as write_tools
from write_helpers import patch_args, preview

N = 6


def _worker(bundle: str, status_ops: list, revision: str, digest: str, barrier, results) -> None:
    barrier.wait()
    args = patch_args(bundle, status_ops, expected_revision=revision, expected_plan_digest=digest)
    try:
        out = write_tools.apply_concept_patch(args, CallContext()).structured
        results.put(("ok", out["status"], out["result_revision"]))
    except ToolError as err:
        results.put(("error", err.code, None))


def test_conflicting_applies_in_parallel_processes_have_exactly_one_winner(bundle):
    ctx = mp.get_context("fork")
    plans = []
    for i in range(N):
        ops = [{"kind": "set_generated", "concept_id": "arch/cache",
                "generated": {"by": f"process:writer-{i}", "at": "2026-07-02T10:00:00Z"}}]
        plans.append((ops, preview(bundle, ops)))
    barrier, results = ctx.Barrier(N), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(str(bundle), ops, p["base_revision"], p["plan_digest"], barrier, results))
             for ops, p in plans]
    for proc in procs:
        proc.start()
    outcomes = [results.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    winners = [o for o in outcomes if o[0] == "ok"]
    assert len(winners) == 1 and winners[0][1] == "applied"
    assert sorted(o[1] for o in outcomes if o[0] == "error") == ["revision_conflict"] * (N - 1)
    text = (bundle / "arch/cache.md").read_text()
    assert text.count("process:writer-") == 1
    winner = next(i for i, (_, p) in enumerate(plans) if p["result_revision"] == winners[0][2])
    assert f"process:writer-{winner}" in text


def test_identical_applies_in_parallel_all_report_the_one_commit(bundle):
    ctx = mp.get_context("fork")
    ops = [{"kind": "set_lifecycle", "concept_id": "arch/cache", "lifecycle": {"status": "stable", "stale_after": None}}]
    p = preview(bundle, ops)
    barrier, results = ctx.Barrier(N), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(str(bundle), ops, p["base_revision"], p["plan_digest"], barrier, results))
             for _ in range(N)]
    for proc in procs:
        proc.start()
    outcomes = [results.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
    assert outcomes == [("ok", "applied", p["result_revision"])] * N
    assert len(list((bundle / ".okf" / "receipts").iterdir())) == 1
