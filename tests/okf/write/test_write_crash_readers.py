"""After a publisher is SIGKILLed at a random step, a fresh process's read tool sees the whole
old bundle (killed before the durable boundary) or the whole new one (after it), and leaves
the journal resolved, before any write-family call runs.
"""

from __future__ import annotations

import json
import os
import random

import pytest

from knowspec.impl.context import CallContext
from knowspec.impl.okf.tools import read as read_tools
from knowspec.impl.okf.bundle import snapshot
from test_write_crash import FILES, STEPS, _expected, _fresh, _run_killed, fast_dir  # noqa: F401
from write_helpers import commit_leftovers, visible_bytes
from tool_args import tool_args

BOUNDARY_STEP = FILES + 2  # staged per file, journal written, then the boundary step


def _fresh_process_list(root) -> dict:
    """list_concepts in a forked child with an empty snapshot cache: (statuses or error)."""
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(out_r)
            snapshot.clear_cache()
            args = tool_args("list_concepts", bundle_path=str(root))
            try:
                cards = read_tools.list_concepts(args, CallContext()).structured["concepts"]
                report = {"statuses": {c["id"]: c["status"] for c in cards}}
            except BaseException as exc:  # noqa: BLE001 - reported to the parent
                report = {"error": repr(exc)}
            os.write(out_w, json.dumps(report).encode())
        finally:
            os._exit(0)
    os.close(out_w)
    chunks = []
    while chunk := os.read(out_r, 1 << 16):
        chunks.append(chunk)
    os.close(out_r)
    os.waitpid(pid, 0)
    return json.loads(b"".join(chunks) or b'{"error": "no report"}')


@pytest.mark.slow
def test_fresh_read_after_a_kill_at_a_random_step_is_all_old_or_all_new(fast_dir):
    root, old, new, _p, request = _expected(fast_dir)
    rng = random.Random(20261201)
    seen = {"old": 0, "new": 0}
    for run in range(100):
        _fresh(root)
        step = rng.randint(1, STEPS)
        assert _run_killed(root, request, kill_at_step=step)
        report = _fresh_process_list(root)
        assert "error" not in report, f"run {run}, kill at step {step}: {report['error']}"
        statuses = set(report["statuses"].values())
        assert len(report["statuses"]) == FILES
        expected = "old" if step < BOUNDARY_STEP else "new"
        assert statuses == ({"draft"} if expected == "old" else {"stable"}), (
            f"run {run}, kill at step {step}: read {sorted(statuses)}, expected all {expected}")
        assert not commit_leftovers(root), f"run {run}: the read left the interrupted commit unresolved"
        assert visible_bytes(root) == (old if expected == "old" else new)
        seen[expected] += 1
    assert seen["old"] > 10 and seen["new"] > 10
