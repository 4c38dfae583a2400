"""Query threads: how many, and work split over them in order (``vectors.parallelism``)."""

from __future__ import annotations

import threading

import pytest

from knowspec.impl import runtime as process
from knowspec.impl.docpool.vectors import parallelism


@pytest.mark.parametrize("raw, want", [("1", 1), ("3", 3), ("0", 1), ("-2", 1)])
def test_the_environment_sets_the_thread_count(monkeypatch, raw, want):
    monkeypatch.setenv("KNOWSPEC_VECTOR_THREADS", raw)
    with process.activated():  # the runtime reads the environment once, when it is made
        assert parallelism.query_threads() == want


@pytest.mark.parametrize("raw", ["", "  ", "two"])
def test_without_a_usable_setting_two_threads_or_the_cores_there_are(monkeypatch, raw):
    monkeypatch.setenv("KNOWSPEC_VECTOR_THREADS", raw)
    with process.activated():
        assert parallelism.query_threads() == min(2, parallelism.available_cores())
        monkeypatch.setattr(parallelism, "available_cores", lambda: 1)
        assert parallelism.query_threads() == 1


def test_the_runtime_reads_the_thread_count_once(monkeypatch):
    monkeypatch.setenv("KNOWSPEC_VECTOR_THREADS", "3")
    with process.activated():
        monkeypatch.setenv("KNOWSPEC_VECTOR_THREADS", "1")
        assert parallelism.query_threads() == 3




def test_run_split_keeps_the_order_and_runs_the_first_part_on_the_caller():
    barrier = threading.Barrier(2, timeout=10)  # both halves must run at the same time to pass

    def work(part: int) -> tuple[int, str]:
        if part < 2:
            barrier.wait()
        return part * part, threading.current_thread().name

    out = parallelism.run_split(work, [0, 1, 2, 3])
    assert [value for value, _ in out] == [0, 1, 4, 9]
    assert out[0][1] == threading.current_thread().name
    assert all(name.startswith("knowspec-vector") for _, name in out[1:])


def test_run_split_raises_what_a_part_raises():
    def work(part: int) -> int:
        if part == 1:
            raise ValueError("part 1 failed")
        return part

    with pytest.raises(ValueError, match="part 1 failed"):
        parallelism.run_split(work, [0, 1])
    assert parallelism.run_split(work, []) == []
    assert parallelism.run_split(work, [5]) == [5]
