"""The memory profile's reading of CPython's small-object allocator (``benchmarks/okf_memory_profile.py``):
the arenas hold the live objects and the slack, and new live objects show as such."""

from __future__ import annotations

import platform
import sys
import tracemalloc
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from okf_memory_profile import c_heap_in_use_mib, obmalloc_mib  # noqa: E402

cpython_only = pytest.mark.skipif(
    platform.python_implementation() != "CPython" or tracemalloc.is_tracing() or obmalloc_mib() is None,
    reason="the report is CPython's small-object allocator's: absent under tracemalloc or PYTHONMALLOC=malloc")


@cpython_only
def test_the_arenas_hold_the_live_objects_and_the_slack():
    figures = obmalloc_mib()
    assert figures is not None and set(figures) == {"arenas", "live", "free_blocks", "unused_pools"}
    assert figures["live"] > 0
    parts = figures["live"] + figures["free_blocks"] + figures["unused_pools"]
    assert parts <= figures["arenas"] + 0.2  # rounding of each figure to 0.1 MiB
    assert figures["arenas"] - parts < 0.05 * figures["arenas"] + 1  # the rest: pool headers, alignment


@cpython_only
def test_new_small_objects_show_as_live_bytes():
    before = obmalloc_mib()
    kept = [str(i) * 3 for i in range(200_000)]  # ~12 MiB of small strings
    after = obmalloc_mib()
    assert before is not None and after is not None
    assert after["live"] - before["live"] > 8
    del kept


@pytest.mark.skipif(c_heap_in_use_mib() is None, reason="mallinfo2 is glibc's (2.33 and later)")
def test_the_c_heap_figure_counts_a_big_buffer_while_it_lives():
    before = c_heap_in_use_mib()
    buffer = bytearray(8 << 20)
    during = c_heap_in_use_mib()
    del buffer
    after = c_heap_in_use_mib()
    assert before is not None and during is not None and after is not None
    assert during - before >= 7.9 and during - after >= 7.9
