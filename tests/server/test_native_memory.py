"""Freed native heap goes back to the system after large calls (issue #19: bounded RSS)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from knowspec.impl.context import ToolOutput
from knowspec.impl.server import native_memory
from knowspec.impl.server.native_memory import (TRIM_AFTER_ANSWER_BYTES, TRIM_AFTER_BYTES, TRIM_AFTER_CALLS,
                                                TRIM_AFTER_CPU_SECONDS, TRIM_AFTER_GROWTH_BYTES, HeapTrimmer,
                                                resident_bytes, trim_due)
from knowspec.impl.server.pipeline import ToolRuntime

glibc_only = pytest.mark.skipif(native_memory._LIBC is None, reason="malloc_trim/mallopt exist only in glibc")


@given(st.integers(0, 2 * TRIM_AFTER_CALLS), st.integers(0, 2 * TRIM_AFTER_BYTES),
       st.floats(0, 2 * TRIM_AFTER_CPU_SECONDS), st.integers(-TRIM_AFTER_GROWTH_BYTES, 2 * TRIM_AFTER_GROWTH_BYTES))
def test_trim_is_due_after_enough_calls_bytes_growth_or_one_long_call(calls, moved, cpu, grown):
    assert trim_due(calls, moved, cpu, grown) == (calls >= TRIM_AFTER_CALLS or moved >= TRIM_AFTER_BYTES
                                                  or cpu >= TRIM_AFTER_CPU_SECONDS or grown >= TRIM_AFTER_GROWTH_BYTES)


def test_a_quick_call_after_which_the_process_grew_enough_trims():
    """Growth is measured from the resident size after the last trim (or at the first call)."""
    mib = 1024 * 1024
    sizes = iter([100 * mib, 100 * mib + TRIM_AFTER_GROWTH_BYTES - 1, 100 * mib + TRIM_AFTER_GROWTH_BYTES,
                  90 * mib, 90 * mib + TRIM_AFTER_GROWTH_BYTES - 1])
    released = []
    trimmer = HeapTrimmer(release=lambda: released.append(1) or True, resident=lambda: next(sizes))
    assert [trimmer.after_call(0) for _ in range(2)] == [False, False]
    assert trimmer.after_call(0) is True and released == [1]  # grown enough; after the trim: 90 MiB
    assert trimmer.after_call(0) is False and released == [1]  # 90 MiB + just under the growth


def test_the_resident_size_is_read_on_linux():
    assert resident_bytes() > 0 or not sys.platform.startswith("linux")


def test_the_trimmer_trims_once_per_due_point_and_starts_counting_again():
    released = []
    trimmer = HeapTrimmer(release=lambda: released.append(1) or True)
    assert [trimmer.after_call(0) for _ in range(TRIM_AFTER_CALLS)][-1] is True
    assert len(released) == 1 and trimmer.calls == 0
    assert trimmer.after_call(TRIM_AFTER_BYTES) is True and len(released) == 2


def test_a_written_big_answer_trims_and_a_small_one_does_not():
    released = []
    trimmer = HeapTrimmer(release=lambda: released.append(1) or True)
    trimmer.after_call(1000)
    assert trimmer.after_answer(TRIM_AFTER_ANSWER_BYTES - 1) is False and released == []
    assert trimmer.after_answer(TRIM_AFTER_ANSWER_BYTES) is True and released == [1]
    assert trimmer.moved_bytes == 0 and trimmer.calls == 0  # the trim starts the counts again


def _runtime(registry, text: str) -> ToolRuntime:
    handlers = {"echo_text": lambda args, ctx: ToolOutput({"text": args.text, "items": []}, text=text)}
    return ToolRuntime(entries=registry.TOOLS, handlers=handlers)


def test_a_call_with_a_large_answer_trims_the_heap_at_once(mini_registry):
    runtime = _runtime(mini_registry, "x" * TRIM_AFTER_BYTES)
    released = []
    runtime.heap = HeapTrimmer(release=lambda: released.append(1) or True)
    anyio.run(runtime.call, "echo_text", {"text": "a"})
    assert released == [1]


def test_a_refused_large_argument_counts_towards_the_trim(mini_registry):
    runtime = _runtime(mini_registry, "small")
    released = []
    runtime.heap = HeapTrimmer(release=lambda: released.append(1) or True)
    result = anyio.run(runtime.call, "echo_text", {"text": "q" * TRIM_AFTER_BYTES})
    assert result.is_error and released == [1]


def test_a_call_that_worked_long_trims_the_heap_even_with_a_small_answer(mini_registry, monkeypatch):
    monkeypatch.setattr(native_memory, "TRIM_AFTER_CPU_SECONDS", 0.002)

    def busy(args, ctx):  # a bundle load: much CPU work, a small answer
        start = time.thread_time()
        while time.thread_time() - start < 0.004:
            pass
        return ToolOutput({"text": args.text, "items": []}, text="small")

    runtime = ToolRuntime(entries=mini_registry.TOOLS, handlers={"echo_text": busy})
    released = []
    runtime.heap = HeapTrimmer(release=lambda: released.append(1) or True)
    anyio.run(runtime.call, "echo_text", {"text": "a"})
    assert released == [1]


def test_small_calls_do_not_trim(mini_registry):
    runtime = _runtime(mini_registry, "small")
    released = []
    runtime.heap = HeapTrimmer(release=lambda: released.append(1) or True)
    for _ in range(3):
        anyio.run(runtime.call, "echo_text", {"text": "a"})
    assert released == []


@glibc_only
def test_arena_limit_and_trim_apply_on_glibc():
    assert native_memory.limit_arenas() is True
    assert isinstance(native_memory.release_free_memory(), bool)


_FRAGMENTING_CALLS = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    import anyio
    import mini_generated.registry as registry
    from knowspec.impl.context import ToolOutput
    from knowspec.impl.server.pipeline import ToolRuntime

    def rss_mib():
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024

    survivors = []

    def fragmenting(args, ctx):
        # 128 MiB in 64 KiB blocks (below the mmap threshold), a small survivor after each one:
        # once the blocks are freed, only malloc_trim can give their pages back.
        blocks = []
        for _ in range(2048):
            blocks.append(bytearray(64 * 1024))
            survivors.append(bytearray(100))
        return ToolOutput({"text": args.text, "items": []}, text="x" * (9 * 1024 * 1024))

    runtime = ToolRuntime(entries=registry.TOOLS, handlers={"echo_text": fragmenting})
    before = rss_mib()
    for _ in range(3):
        anyio.run(runtime.call, "echo_text", {"text": "a"})
    print(json.dumps({"growth_mib": rss_mib() - before}))
""")


@glibc_only
def test_repeated_large_calls_give_their_heap_back(mini_registry, tmp_path):
    """Without the trim most of the freed 128 MiB stays resident (measured: 70+ MiB; with it: under 10)."""
    root = str(__import__("pathlib").Path(mini_registry.__file__).parent.parent)
    out = subprocess.run([sys.executable, "-c", _FRAGMENTING_CALLS, root], capture_output=True, text=True,
                         timeout=300, check=True)
    growth = json.loads(out.stdout.strip().splitlines()[-1])["growth_mib"]
    assert growth < 32, f"RSS grew {growth:.0f} MiB over three large calls"


_MAPPED_AFTER_A_BIG_FREE = textwrap.dedent("""
    import ctypes, sys
    from knowspec.impl.server import native_memory
    if sys.argv[1] == "fixed":
        native_memory.limit_arenas()
    big = bytearray(16 << 20)
    del big  # a mapped block freed: glibc's dynamic threshold would rise to 16 MiB
    block = bytearray(native_memory.MMAP_THRESHOLD_BYTES + (1 << 20))
    address = ctypes.addressof((ctypes.c_char * 1).from_buffer(block))
    for line in open("/proc/self/maps"):
        span, *rest = line.split()
        low, high = (int(x, 16) for x in span.split("-"))
        if low <= address < high:
            print("heap" if line.rstrip().endswith("[heap]") else "mapped")
""")


@glibc_only
def test_a_fixed_mmap_threshold_keeps_big_blocks_out_of_the_heap_after_a_big_free():
    def where(mode: str) -> str:
        done = subprocess.run([sys.executable, "-c", _MAPPED_AFTER_A_BIG_FREE, mode], capture_output=True, text=True,
                              timeout=60, check=True)
        return done.stdout.strip()

    assert where("dynamic") == "heap"  # glibc's own rule, which left big answers' holes in the heap
    assert where("fixed") == "mapped"



def test_the_heap_trims_its_top_no_later_than_blocks_get_their_own_mapping():
    """A higher trim threshold let a big call leave megabytes of glibc's worker arena resident
    that no trim gave back (``native_memory.TRIM_THRESHOLD_BYTES``; measured through the server by
    ``knowspec bench okf-cold-memory``, which a unit test cannot reproduce)."""
    assert native_memory.TRIM_THRESHOLD_BYTES <= native_memory.MMAP_THRESHOLD_BYTES
