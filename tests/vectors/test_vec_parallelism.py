"""Query threads: how many the query embedding may use (``vectors.parallelism``)."""

from __future__ import annotations

import pytest

from knowspec.impl import runtime as process
from knowspec.impl.docpool.vectors import parallelism


@pytest.mark.parametrize("raw, want", [("1", 1), ("3", 3), ("0", 1), ("-2", 1)])
def test_the_environment_sets_the_thread_count(monkeypatch, raw, want):
    monkeypatch.setenv("KNOWSPEC_VECTOR_THREADS", raw)
    with process.activated():  # the runtime reads the environment once, when it is made
        assert parallelism.query_threads() == want


@pytest.mark.parametrize("raw", ["", "  ", "two"])
def test_without_a_usable_setting_one_thread(monkeypatch, raw):
    monkeypatch.setenv("KNOWSPEC_VECTOR_THREADS", raw)
    with process.activated():
        assert parallelism.query_threads() == 1


def test_the_runtime_reads_the_thread_count_once(monkeypatch):
    monkeypatch.setenv("KNOWSPEC_VECTOR_THREADS", "3")
    with process.activated():
        monkeypatch.setenv("KNOWSPEC_VECTOR_THREADS", "1")
        assert parallelism.query_threads() == 3
