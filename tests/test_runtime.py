"""The process runtime (``impl/runtime.py``): one (key, stamp) rule, one budget, one ``clear()``."""

from __future__ import annotations

import gc
import threading
import time
import weakref

from hypothesis import given, settings, strategies as st

from knowspec.impl import runtime as process
from knowspec.impl.context import CallContext
from knowspec.impl.runtime import Runtime, RuntimeSettings


def small(budget: int = 1000) -> Runtime:
    return Runtime(RuntimeSettings(cache_budget_bytes=budget))


def test_a_value_is_built_once_per_stamp_and_rebuilt_when_the_stamp_moves():
    disposed, builds = [], []
    cache = small().cache("c", max_entries=4, dispose=disposed.append)

    def build(tag):
        builds.append(tag)
        return tag

    assert cache.get("k", 1, lambda: build("v1")) == "v1"
    assert cache.get("k", 1, lambda: build("again")) == "v1"
    assert cache.get("k", 2, lambda: build("v2")) == "v2"
    assert builds == ["v1", "v2"]
    assert disposed == ["v1"]  # the stale value is released, not leaked


def test_the_least_recently_used_entry_leaves_first():
    disposed = []
    cache = small().cache("c", max_entries=2, dispose=disposed.append)
    cache.put("a", None, "A")
    cache.put("b", None, "B")
    cache.get("a", None, lambda: "never")  # a is now the most recent
    cache.put("c", None, "C")
    assert cache.keys() == ["a", "c"] and disposed == ["B"]


def test_one_budget_spans_every_cache():
    runtime = small(budget=100)
    first = runtime.cache("first", max_entries=10, sizeof=len)
    second = runtime.cache("second", max_entries=10, sizeof=len)
    first.put("old", None, "x" * 40)
    second.put("mid", None, "y" * 40)
    first.get("old", None, lambda: "never")  # used again: second's entry is now the oldest
    second.put("new", None, "z" * 40)
    assert first.keys() == ["old"] and second.keys() == ["new"]
    assert runtime.used_bytes() == 80


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 5), st.integers(0, 3), st.integers(0, 60)),
                max_size=40))
def test_the_budget_holds_and_the_accounting_adds_up(operations):
    runtime = small(budget=100)
    for name, key, stamp, size in operations:
        cache = runtime.cache(name, max_entries=4, sizeof=len)
        cache.get(key, stamp, lambda: "v" * size)
        held = sum(cache.used_bytes() for cache in runtime.caches.values())
        assert runtime.used_bytes() == held
        assert held <= 100 or sum(len(c) for c in runtime.caches.values()) == 1
        assert all(len(c) <= 4 for c in runtime.caches.values())


def test_clear_empties_every_cache_and_releases_what_they_hold():
    runtime, disposed = small(), []
    runtime.cache("a", max_entries=2, dispose=disposed.append).put(1, None, "A")
    runtime.cache("b", max_entries=2, dispose=disposed.append).put(1, None, "B")
    runtime.clear()
    assert sorted(disposed) == ["A", "B"]
    assert all(len(c) == 0 for c in runtime.caches.values()) and runtime.used_bytes() == 0


def test_concurrent_misses_of_one_key_build_once():
    cache, builds = small().cache("c", max_entries=2), []
    start = threading.Barrier(4)

    def build():
        builds.append(1)
        time.sleep(0.05)
        return object()

    def ask():
        start.wait()
        return cache.get("k", 1, build)

    threads = [threading.Thread(target=lambda: results.append(ask())) for _ in range(4)]
    results: list[object] = []
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builds) == 1 and len({id(r) for r in results}) == 1


def test_a_shelf_lends_items_of_its_stamp_and_drops_a_stale_shelf():
    disposed = []
    cache = small().cache("shelf", max_entries=4, dispose=disposed.append)
    assert cache.give("f", (1, 1), "con1", per_key=2)
    assert cache.give("f", (1, 1), "con2", per_key=2)
    assert not cache.give("f", (1, 1), "con3", per_key=2)  # full: the caller closes it
    assert cache.take("f", (1, 1)) == "con2"
    assert cache.take("f", (1, 2)) is None  # the file was replaced: its connections are closed
    assert disposed == [["con1"]]


def test_settings_are_read_from_the_environment_once(monkeypatch):
    monkeypatch.setenv("KNOWSPEC_FTS_ARRAYS", "off")
    monkeypatch.setenv("KNOWSPEC_CACHE_BYTES", "12345")
    monkeypatch.setenv("KNOWSPEC_RAISE_UNEXPECTED", "1")
    runtime = Runtime()
    monkeypatch.setenv("KNOWSPEC_FTS_ARRAYS", "sync")
    assert runtime.settings.fts_arrays == "off"
    assert runtime.budget_bytes == 12345 and runtime.settings.raise_unexpected


def test_the_gc_pause_nests_and_restores_the_collector():
    runtime = Runtime(RuntimeSettings(gc_pause=True))
    assert gc.isenabled()
    with runtime.gc_paused():
        with runtime.gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with Runtime(RuntimeSettings(gc_pause=False)).gc_paused():
        assert gc.isenabled()


class _Node:
    """An object that can sit in a reference cycle and be watched through a weak reference."""


def test_what_a_gc_pause_builds_leaves_it_in_the_oldest_generation_and_cycles_are_still_collected():
    runtime = Runtime(RuntimeSettings(gc_pause=True))
    with runtime.gc_paused():
        built = [[i] for i in range(2000)]
        node = _Node()
        node.self = node  # type: ignore[attr-defined]
    young = {id(o) for generation in (0, 1) for o in gc.get_objects(generation=generation)}
    assert not any(id(item) in young for item in built)  # no young pass need walk them
    probe = weakref.ref(node)
    del node
    gc.collect()
    assert probe() is None


def test_activated_makes_a_fresh_runtime_current_and_restores_the_previous():
    before = process.current()
    with process.activated() as fresh:
        assert process.current() is fresh is not before
        assert CallContext().runtime is fresh
    assert process.current() is before


def test_a_handler_called_directly_caches_in_the_tests_runtime(runtime, tmp_path):
    from knowspec.generated.registry import TOOLS
    from knowspec.impl.server.pipeline import resolve_handler

    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "a.md").write_text("---\nid: a\ntype: concept\ntitle: Alpha\n---\n# Alpha\n\nbody\n")
    entry = next(e for e in TOOLS if e.name == "search_concepts")
    args = entry.input_model.model_validate({"bundle_path": str(tmp_path / "kb"), "query": "alpha"})
    handler = resolve_handler(entry)
    assert handler is not None
    first = handler(args, CallContext()).structured
    assert first["total"] == 1
    assert runtime.caches["okf.snapshots"].keys() == [str(tmp_path / "kb")]
    assert len(runtime.caches["okf.derived"]) == 1
    runtime.clear()
    assert runtime.used_bytes() == 0 and len(runtime.caches["okf.snapshots"]) == 0
    assert handler(args, CallContext()).structured == first


def test_a_value_that_grows_in_place_is_counted_when_resized():
    runtime = small(budget=100)
    cache = runtime.cache("c", max_entries=4, sizeof=len)
    other = runtime.cache("other", max_entries=4, sizeof=len)
    other.put("old", None, "o" * 30)
    grows: list[int] = []
    cache.put("k", None, grows)
    grows.extend(range(90))
    cache.resize("k")
    assert runtime.used_bytes() == 90 and len(other) == 0  # the older entry made room
