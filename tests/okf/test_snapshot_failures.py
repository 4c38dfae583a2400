"""A failed bundle load frees what it read and answers its contract code (issues #19.6, #19.7)."""

from __future__ import annotations

import gc
import os
import tracemalloc
from contextlib import contextmanager

import anyio
import pytest

from knowspec.impl.config import Settings
from knowspec.impl.errors import ToolError
from knowspec.impl.okf.bundle import snapshot
from knowspec.impl.server.pipeline import ToolRuntime

FILE_BYTES = 64 * 1024


@pytest.fixture
def over_limit_bundle(tmp_path, monkeypatch):
    """A bundle whose load reads ~256 KiB of files and then fails on the total-bytes limit."""
    for i in range(5):
        (tmp_path / f"c{i}.md").write_bytes(b"---\ntitle: t\n---\n" + b"x" * FILE_BYTES)
    monkeypatch.setattr(snapshot, "MAX_TOTAL_BYTES", 4 * FILE_BYTES)
    snapshot.clear_cache()
    yield tmp_path
    snapshot.clear_cache()


@contextmanager
def collector_off():
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _retained_after(calls: int, failing_calls) -> int:
    """Bytes still allocated after ``failing_calls(calls)``, with the cyclic collector off."""
    failing_calls(1)  # warm caches and imports
    with collector_off():
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            failing_calls(calls)
            return tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()


def test_failed_load_kept_alive_by_a_cycle_does_not_keep_its_file_bytes(over_limit_bundle):
    """Whoever holds the error in a reference cycle (a thread's result box, a log record) must
    not hold the bytes the walk read: the error leaves the loader without its frames."""
    def failing_calls(n):
        for _ in range(n):
            try:
                snapshot.capture_snapshot(str(over_limit_bundle), None)
            except ToolError as err:
                box = {"error": err}
                box["self"] = box  # garbage only a full collection would free
                assert err.code == "resource_limit"

    assert _retained_after(20, failing_calls) < 20 * FILE_BYTES  # the old code kept ~20 x 256 KiB


def test_repeated_failing_tool_calls_keep_memory_flat(over_limit_bundle, tmp_path_factory):
    runtime = ToolRuntime(Settings(appdir=tmp_path_factory.mktemp("appdir")))

    def failing_calls(n):
        async def go():
            for _ in range(n):
                result = await runtime.call("list_concepts", {"bundle_path": str(over_limit_bundle)})
                assert result.structured_content["code"] == "resource_limit"

        anyio.run(go)

    assert _retained_after(20, failing_calls) < 20 * FILE_BYTES


def test_nul_in_bundle_path_is_invalid_request():
    with pytest.raises(ToolError) as info:
        snapshot.capture_snapshot("/tmp/a\x00b", None)
    assert info.value.code == "invalid_request"


@pytest.mark.skipif(not os.path.isdir("/proc/1"), reason="needs Linux /proc")
def test_unreadable_proc_files_are_invalid_request_not_an_uncaught_oserror():
    with pytest.raises(ToolError) as info:
        snapshot.capture_snapshot("/proc/1", None)
    assert info.value.code == "invalid_request"
    assert info.value.message.startswith("load bundle: ")


def test_revision_paths_refuse_empty_and_dot_segments_and_the_okf_dir():
    from knowspec.impl.okf.bundle.snapshot import valid_revision_path

    assert valid_revision_path("a/b.md") and valid_revision_path("a/.b.md") and valid_revision_path("x.okf/c.md")
    for path in ("", "/a.md", "a//b.md", "./a.md", "a/../b.md", "a/.", "a/", ".okf/c.md", "a\\b.md", "a\x01.md"):
        assert not valid_revision_path(path), path
