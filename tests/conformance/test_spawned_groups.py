"""The stdio targets a run notes (``conformance/spawned.py``): a session start that finishes in one
worker while another worker's start is being noted stays noted, so an interrupted run stops it."""

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
