"""Crash safety: a process publishing a many-file commit is SIGKILLed at seeded random moments.

After each kill, recovery (the next call) must leave every file wholly old or wholly new, and
the commit as a whole all-old (killed before the durable boundary) or all-new (after it),
with no private staging left behind.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest

from knowspec.impl.okf.write import patch_flow
from knowspec.impl.okf.write.inputs import decode_patch
from knowspec.impl.okf.write.plan import plan_idempotency_key
from knowspec.impl.okf.write.planner import plan_change_set
from knowspec.impl.okf.write.store import CommitRequest, Store
from knowspec.impl.okf.bundle.paths import pin_root
from write_helpers import commit_leftovers, make_bundle, patch_args, preview, visible_bytes

FILES = 8
STEPS = 2 * FILES + 3  # staged per file, journal written, boundary, published per file, receipt


def _fresh(root):
    if root.exists():
        shutil.rmtree(root)
    files = {"index.md": '---\nokf_version: "0.2"\n---\n# Index\n\n' + ''.join(f'- [N{i}](c/n{i}.md)\n' for i in range(FILES))}
    for i in range(FILES):
        files[f"c/n{i}.md"] = f"---\ntype: Note\ntitle: Note {i}  # t\nstatus: draft\n---\nBody {i}\n"
    return make_bundle(root, files)


def _ops():
    return [{"kind": "set_lifecycle", "concept_id": f"c/n{i}", "lifecycle": {"status": "stable", "stale_after": "2030-01-01"}}
            for i in range(FILES)]


def _commit_request(root, p):
    """The exact commit an apply of the previewed plan makes (built once, before forking)."""
    req = decode_patch(patch_args(root, _ops()))
    cs, digest = patch_flow._change_set(req, p["base_revision"])
    files, _ = _capture(root)
    plan = plan_change_set(files, cs, digest, check=lambda: None)
    key = plan_idempotency_key(patch_flow.NAMESPACE, p["plan_digest"])
    return CommitRequest(cs.id, key, digest, plan, plan.affected_refs)


def _capture(root):
    from knowspec.impl.okf.write.bundle_io import capture
    fd, _ = pin_root(str(root))
    try:
        return capture(fd)
    finally:
        os.close(fd)


def _child(root, request, kill_at_step: int | None, pause: float) -> None:
    counter = {"n": 0}

    def hook(_name: str) -> None:
        counter["n"] += 1
        if kill_at_step is not None and counter["n"] >= kill_at_step:
            os.kill(os.getpid(), signal.SIGKILL)
        if pause:
            time.sleep(pause)

    fd, _ = pin_root(str(root))
    Store(fd, step_hook=hook).commit(request)


def _run_killed(root, request, *, kill_at_step=None, kill_after=None, pause=0.0) -> bool:
    """Fork a publisher and kill it; True when the child really died by SIGKILL."""
    pid = os.fork()
    if pid == 0:
        try:
            _child(root, request, kill_at_step, pause)
        finally:
            os._exit(0)
    if kill_after is not None:
        time.sleep(kill_after)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _, status = os.waitpid(pid, 0)
    return os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


def _recover(root) -> None:
    fd, _ = pin_root(str(root))
    try:
        Store(fd).recover()
    finally:
        os.close(fd)


def _check_outcome(root, old, new) -> str:
    _recover(root)
    now = visible_bytes(root)
    assert set(now) == set(old)
    for path, data in now.items():
        assert data in (old[path], new[path]), f"{path} is neither wholly old nor wholly new"
    assert not commit_leftovers(root)
    if now == old:
        return "old"
    assert now == new, "a commit must publish all of its files or none"
    return "new"


@pytest.fixture
def fast_dir(tmp_path):
    """RAM-backed scratch dir when available: SIGKILL safety does not depend on fsync
    latency, and ~150 commits on a real disk would spend most of their time in fsync."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    if base is None:
        yield tmp_path
        return
    path = Path(tempfile.mkdtemp(prefix="knowspec-crash-", dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _expected(tmp_path):
    root = _fresh(tmp_path / "bundle")
    old = visible_bytes(root)
    p = preview(root, _ops())
    ref = _fresh(tmp_path / "ref")
    from write_helpers import apply
    apply(ref, _ops(), p["base_revision"], p["plan_digest"])
    return root, old, visible_bytes(ref), p, _commit_request(root, p)


def test_kill_at_random_commit_steps_leaves_files_wholly_old_or_new(fast_dir):
    root, old, new, p, request = _expected(fast_dir)
    rng = random.Random(20261130)
    seen = {"old": 0, "new": 0}
    for _ in range(110):
        _fresh(root)
        assert _run_killed(root, request, kill_at_step=rng.randint(1, STEPS))
        seen[_check_outcome(root, old, new)] += 1
    assert seen["old"] > 0 and seen["new"] > 0


def test_kill_after_random_delays_leaves_files_wholly_old_or_new(fast_dir):
    root, old, new, p, request = _expected(fast_dir)
    rng = random.Random(7)
    outcomes = set()
    for _ in range(30):
        _fresh(root)
        _run_killed(root, request, kill_after=rng.uniform(0.0, 0.03), pause=0.001)
        outcomes.add(_check_outcome(root, old, new))
    assert outcomes <= {"old", "new"}


def test_next_tool_call_finishes_an_interrupted_commit(fast_dir):
    root, old, new, p, request = _expected(fast_dir)
    _fresh(root)
    # die right after the durable boundary: the journal must be rolled forward by the next call
    assert _run_killed(root, request, kill_at_step=FILES + 2)
    assert (root / ".okf" / "journal.json").exists()
    again = preview(root, _ops())
    assert again["status"] == "noop"
    assert visible_bytes(root) == new
    from write_helpers import apply
    replay = apply(root, _ops(), p["base_revision"], p["plan_digest"])
    assert replay["status"] == "applied" and replay["result_revision"] == p["result_revision"]


def _recover_killed(root, kill_at_step: int) -> None:
    pid = os.fork()
    if pid == 0:
        try:
            counter = {"n": 0}

            def hook(_name: str) -> None:
                counter["n"] += 1
                if counter["n"] >= kill_at_step:
                    os.kill(os.getpid(), signal.SIGKILL)

            fd, _ = pin_root(str(root))
            Store(fd, step_hook=hook).recover()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def test_kill_during_recovery_is_itself_recoverable(fast_dir):
    root, old, new, p, request = _expected(fast_dir)
    rng = random.Random(99)
    for _ in range(25):
        _fresh(root)
        assert _run_killed(root, request, kill_at_step=rng.randint(FILES + 2, STEPS - 1))  # after the boundary
        assert (root / ".okf" / "journal.json").exists()
        _recover_killed(root, rng.randint(1, FILES))
        assert _check_outcome(root, old, new) == "new"
