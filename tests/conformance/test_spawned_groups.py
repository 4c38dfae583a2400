"""The stdio targets an interrupted run stops (``conformance/spawned.py``, ``workers.run_cases``): a
session start that finishes in one worker while another worker's start is being noted stays
noted, and a target whose session was still starting when the run stopped is stopped as well."""

from __future__ import annotations

import os
import threading
import time

import pytest

from knowspec.conformance import spawned

pytestmark = pytest.mark.skipif(not hasattr(os, "killpg"), reason="groups are noted only where killpg exists")


def test_a_start_noted_by_one_worker_is_not_dropped_by_another_finishing_at_once(monkeypatch):
    """Worker A's start spawns ``a``; worker B's spawns ``b`` and is noted while A is still
    looking at the children it saw without ``b``: ``b`` must stay noted."""
    live: set[int] = set()
    a_looking, b_noted = threading.Event(), threading.Event()

    def children() -> set[int]:
        seen = set(live)
        if threading.current_thread().name == "A" and a_looking.is_set():
            b_noted.wait(0.5)  # A's look takes long; B finishes its start meanwhile (if it can)
        return seen

    monkeypatch.setattr(spawned, "children", children)
    monkeypatch.setattr(spawned, "_GROUPS", set())

    def worker_a() -> None:
        with spawned.noting_children():
            live.add(101)
            a_looking.set()

    def worker_b() -> None:
        a_looking.wait(1)
        time.sleep(0.05)  # A is inside its look
        with spawned.noting_children():
            live.add(202)
        b_noted.set()

    threads = [threading.Thread(target=worker_a, name="A"), threading.Thread(target=worker_b, name="B")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert spawned._GROUPS == {101, 202}


def test_a_closed_session_is_forgotten_at_the_next_start(monkeypatch):
    live = {7}
    monkeypatch.setattr(spawned, "children", lambda: set(live))
    monkeypatch.setattr(spawned, "_GROUPS", {7})
    live.clear()  # its session closed: the target is gone
    with spawned.noting_children():
        live.add(8)
    assert spawned._GROUPS == {8}


def test_a_target_whose_session_was_still_starting_when_the_run_stopped_is_stopped(tmp_path, monkeypatch):
    """The interrupt lands during a worker's handshake: its target is noted only after the first
    stop, and the run must still stop it before it ends."""
    import contextlib
    import subprocess
    import sys
    from types import SimpleNamespace

    from knowspec.conformance import workers
    from knowspec.conformance.events import CheckFinished

    monkeypatch.setattr(spawned, "_GROUPS", set())
    spawned_at, handshake_done = threading.Event(), threading.Event()
    targets: list[subprocess.Popen] = []

    @contextlib.contextmanager
    def slow_start(target):
        with spawned.noting_children():
            targets.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                            start_new_session=True))
            spawned_at.set()
            handshake_done.wait(10)  # the handshake ends only after the run's first stop
        yield SimpleNamespace(broken=None)

    first_stop = spawned.stop_all

    def stop_then_let_the_handshake_end(grace: float = 2.0) -> int:
        stopped = first_stop(grace)
        handshake_done.set()
        return stopped

    monkeypatch.setattr(workers, "connect", slow_start)
    monkeypatch.setattr(workers, "stop_all", stop_then_let_the_handshake_end)
    case = (SimpleNamespace(id="determinism", rule="rule"), None)
    run_case = lambda conn, store, spec, tool: CheckFinished(spec.id, spec.rule, "", "passed", 0.0)  # noqa: E731
    stream = workers.run_cases([case], run_case, SimpleNamespace(), tmp_path, 1, None)
    try:
        next(stream)  # the case started: its worker is opening its session
        assert spawned_at.wait(10)
        with pytest.raises(KeyboardInterrupt):
            stream.throw(KeyboardInterrupt)
        assert targets[0].wait(10) is not None  # stopped, not left running
    finally:
        for target in targets:
            if target.poll() is None:
                target.kill()
                target.wait()
