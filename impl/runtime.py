"""The process state of a running knowspec: every cache, the settings read from the environment,
the garbage-collector policy, the helper threads; one object, one ``clear()``.

The server creates one :class:`Runtime` and activates it; the call pipeline hands it to handlers
as ``ctx.runtime``. Code that runs without a call (the CLI, a pool opener deep in a storage) asks
:func:`current`, which is the same object. Tests get a fresh one with :func:`activated`.

One invalidation rule for every cache: an entry is ``(key, stamp, value)``; a lookup names the
key and the stamp the caller sees now (a file identity, a change counter, a content revision);
a different stamp drops the old value and builds a new one. One memory budget for all caches: when
the sizes of all entries exceed it, the least recently used entries go first, whichever cache
holds them; each cache also keeps at most ``max_entries``.
"""

from __future__ import annotations

import gc
import os
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterator

DEFAULT_BUDGET_BYTES = 2 * 1024 ** 3
DEFAULT_QUERY_VECTORS = 256  # 1.5 KiB each at e5-small's 384 dimensions
_ANY = object()


def _env_int(name: str, default: int | None) -> int | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return max(1, int(raw))
    except ValueError:
        return default


def _env_count(name: str, default: int) -> int:
    """A count where ``0`` means none (``_env_int`` keeps at least one)."""
    raw = os.environ.get(name, "").strip()
    try:
        return max(0, int(raw)) if raw else default
    except ValueError:
        return default


def _env_on(name: str) -> bool:
    """A switch that is on unless set to ``0``, ``off`` or ``false``."""
    return os.environ.get(name, "1").strip().lower() not in ("0", "off", "false")


@dataclass(frozen=True)
class RuntimeSettings:
    """The ``KNOWSPEC_*`` process settings, read once when the runtime is made.

    - ``fts_arrays``: ``KNOWSPEC_FTS_ARRAYS`` = background | sync | off, the default mode of
      ``fulltext.reader.FtsArraysCache.get`` (a SQLite pool's full-text arrays: built in a
      thread, built before answering, never built). A search always asks in ``sync`` mode: the
      arrays are the only ranker of a SQLite pool.
    - ``vector_threads``: ``KNOWSPEC_VECTOR_THREADS``, threads one query embedding uses
      (``None``: one, ``vectors/parallelism.py``).
    - ``query_vectors``: ``KNOWSPEC_QUERY_VECTORS``, how many query embeddings the
      ``docpool.query_vectors`` cache keeps, keyed by the exact text embedded (agents repeat
      queries; an embedding is bit-identical on every run); ``0`` turns the cache off.
    - ``cache_budget_bytes``: ``KNOWSPEC_CACHE_BYTES``, the memory budget of all caches.
    - ``raise_unexpected``: ``KNOWSPEC_RAISE_UNEXPECTED`` (tests: see a handler's bug as such).
    - ``gc_pause``: ``KNOWSPEC_GC_PAUSE`` (default on; ``0`` keeps the collector running).
    - ``max_bundle_files`` / ``max_bundle_bytes``: OKF bundle limits an operator raised
      (``knowspec serve --max-bundle-files/--max-bundle-bytes``); ``None``: the contract's.
    - ``search_bodies``: ``KNOWSPEC_SEARCH_BODIES`` = disk | memory, where search_concepts' index
      keeps its compressed folded bodies (``okf/search/folded_bodies.py``: a nameless temporary
      file, read back where a query needs them; ``memory`` keeps them in the process).
    - ``vector_index`` / ``vector_candidates``: ``exact`` (the default) or ``approximate`` (the
      ``ann`` extra's graph, ``docpool/vectors/approximate.py``) and how many candidate rows it
      re-scores exactly (``knowspec serve --vector-index approximate --vector-candidates N``).
    - ``huge_pages``: ``KNOWSPEC_HUGE_PAGES`` (default on; ``0`` leaves what the ONNX Runtime
      sessions map on the pages it got, ``docpool/vectors/huge_pages.py``).
    """

    fts_arrays: str = "background"
    vector_threads: int | None = None
    query_vectors: int = DEFAULT_QUERY_VECTORS
    cache_budget_bytes: int = DEFAULT_BUDGET_BYTES
    raise_unexpected: bool = False
    gc_pause: bool = True
    search_bodies: str = "disk"
    max_bundle_files: int | None = None
    max_bundle_bytes: int | None = None
    vector_index: str = "exact"
    vector_candidates: int = 500
    huge_pages: bool = True

    @classmethod
    def from_environment(cls) -> RuntimeSettings:
        mode = os.environ.get("KNOWSPEC_FTS_ARRAYS", "background").strip() or "background"
        return cls(
            fts_arrays=mode,
            vector_threads=_env_int("KNOWSPEC_VECTOR_THREADS", None),
            query_vectors=_env_count("KNOWSPEC_QUERY_VECTORS", DEFAULT_QUERY_VECTORS),
            cache_budget_bytes=_env_int("KNOWSPEC_CACHE_BYTES", DEFAULT_BUDGET_BYTES) or DEFAULT_BUDGET_BYTES,
            raise_unexpected=bool(os.environ.get("KNOWSPEC_RAISE_UNEXPECTED")),
            gc_pause=_env_on("KNOWSPEC_GC_PAUSE"),
            search_bodies="memory" if os.environ.get("KNOWSPEC_SEARCH_BODIES", "").strip() == "memory" else "disk",
            huge_pages=_env_on("KNOWSPEC_HUGE_PAGES"),
        )


class _Entry:
    __slots__ = ("stamp", "value", "size", "tick")

    def __init__(self, stamp: Any, value: Any, size: int, tick: int) -> None:
        self.stamp, self.value, self.size, self.tick = stamp, value, size, tick


class Cache:
    """One named cache of a runtime: ``get(key, stamp, build)``, least recently used first out.

    ``sizeof(value)`` estimates an entry's bytes for the shared budget (default 0: bounded by
    ``max_entries`` alone); ``dispose(value)`` releases what a dropped entry holds (connections,
    watches). The lock is the runtime's: lookups are short, builds run outside it (one build
    per key at a time).
    """

    def __init__(self, runtime: Runtime, name: str, max_entries: int,
                 sizeof: Callable[[Any], int] | None = None,
                 dispose: Callable[[Any], None] | None = None) -> None:
        self.runtime, self.name, self.max_entries = runtime, name, max_entries
        self._sizeof = sizeof or (lambda value: 0)
        self._dispose = dispose
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()  # least recently used first
        self._used = 0
        self._building: dict[Hashable, threading.Lock] = {}

    # -- lookups ---------------------------------------------------------------------------------
    def get(self, key: Hashable, stamp: Any, build: Callable[[], Any]) -> Any:
        """The value for ``key`` built at ``stamp``; a missing or stale one is built now."""
        found = self._lookup(key, stamp)
        if found is not _ANY:
            return found
        rt = self.runtime
        with rt._lock:
            gate = self._building.setdefault(key, threading.Lock())
        with gate:
            found = self._lookup(key, stamp)
            if found is not _ANY:
                return found
            try:
                value = build()
            finally:
                with rt._lock:
                    if self._building.get(key) is gate:
                        del self._building[key]
            self.put(key, stamp, value)
            return value

    def peek(self, key: Hashable, stamp: Any = _ANY, default: Any = None) -> Any:
        """The value for ``key`` (at ``stamp``, when given) without building; ``default`` else."""
        with self.runtime._lock:
            entry = self._entries.get(key)
            if entry is None or (stamp is not _ANY and not _same(entry.stamp, stamp)):
                return default
            self._touch(key, entry)
            return entry.value

    def _lookup(self, key: Hashable, stamp: Any) -> Any:
        rt = self.runtime
        with rt._lock:
            entry = self._entries.get(key)
            if entry is None:
                return _ANY
            held = entry.stamp
            if held is stamp or held == stamp:
                rt._tick += 1
                entry.tick = rt._tick
                self._entries.move_to_end(key)
                return entry.value
            dropped = self._remove(key)  # stale: free it before a new one is built
        self._release([dropped])
        return _ANY

    # -- updates ---------------------------------------------------------------------------------
    def put(self, key: Hashable, stamp: Any, value: Any) -> None:
        rt = self.runtime
        size = self._sizeof(value)
        with rt._lock:
            dropped = [self._remove(key)] if key in self._entries else []
            self._entries[key] = _Entry(stamp, value, size, rt._next_tick())
            self._used += size
            rt._used += size
            while len(self._entries) > self.max_entries:
                dropped.append(self._remove(next(iter(self._entries))))
            dropped += rt._over_budget(keep=(self, key))
        self._release([d for d in dropped if d is not None and d[1] is not value])

    def resize(self, key: Hashable) -> None:
        """Re-estimate ``key``'s size (its value grew or shrank in place) and keep the budget."""
        with self.runtime._lock:
            entry = self._entries.get(key)
        if entry is None:
            return
        size = self._sizeof(entry.value)  # outside the lock: it may walk a large value
        with self.runtime._lock:
            if self._entries.get(key) is not entry:
                return
            self.runtime._used += size - entry.size
            self._used += size - entry.size
            entry.size = size
            dropped = self.runtime._over_budget(keep=(self, key))
        self._release(dropped)

    def take(self, key: Hashable, stamp: Any) -> Any:
        """Remove one item from the list kept at ``(key, stamp)`` and return it (None: none).

        For shelves of idle connections: ``give`` puts one back, a changed stamp (the path now
        names another file) disposes of the whole list."""
        dropped = None
        with self.runtime._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if not _same(entry.stamp, stamp):
                dropped = self._remove(key)
                item = None
            else:
                self._touch(key, entry)
                item = entry.value.pop() if entry.value else None
        self._release([dropped] if dropped is not None else [])
        return item

    def give(self, key: Hashable, stamp: Any, item: Any, per_key: int) -> bool:
        """Put ``item`` back on the list at ``(key, stamp)``; False (caller closes it) when full."""
        with self.runtime._lock:
            entry = self._entries.get(key)
            if entry is not None and _same(entry.stamp, stamp):
                if len(entry.value) >= per_key:
                    return False
                entry.value.append(item)
                self._touch(key, entry)
                return True
        self.put(key, stamp, [item])
        return True

    def pop(self, key: Hashable) -> None:
        with self.runtime._lock:
            dropped = self._remove(key) if key in self._entries else None
        self._release([dropped] if dropped is not None else [])

    def clear(self) -> None:
        with self.runtime._lock:
            dropped = [self._remove(k) for k in list(self._entries)]
        self._release(dropped)

    # -- inspection ------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> list[Hashable]:
        with self.runtime._lock:
            return list(self._entries)

    def used_bytes(self) -> int:
        with self.runtime._lock:
            return self._used

    # -- internals (the runtime's lock held) -------------------------------------------------------
    def _touch(self, key: Hashable, entry: _Entry) -> None:
        entry.tick = self.runtime._next_tick()
        self._entries.move_to_end(key)

    def _remove(self, key: Hashable) -> tuple[Cache, Any]:
        entry = self._entries.pop(key)
        self._used -= entry.size
        self.runtime._used -= entry.size
        return (self, entry.value)

    def _release(self, dropped: list[tuple[Cache, Any]]) -> None:
        for cache, value in dropped:
            if cache._dispose is not None:
                cache._dispose(value)


def _same(held: Any, stamp: Any) -> bool:
    return held is stamp or held == stamp


class _GcPause:
    """Pause the cyclic garbage collector while bulk-building acyclic data (a process policy).

    Loading a bundle or building its indexes allocates millions of small acyclic objects; with
    the collector on, each generation-2 pass rescans every live snapshot object, which roughly
    doubles load and analysis time, while reference counting frees all of it anyway. The
    collector is one switch for the whole process, so the runtime owns it (not a library module):
    the pause is reference counted across threads, and ``KNOWSPEC_GC_PAUSE=0`` turns it off.
    When the last pause ends, what it built goes straight to the oldest generation: otherwise the
    first young-generation passes after it walk all of it (a quarter second at 50,000 concepts)
    only to promote it.
    """

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._lock = threading.Lock()
        self._depth = 0
        self._was_enabled = False

    @contextmanager
    def __call__(self) -> Iterator[None]:
        if not self.enabled:
            yield
            return
        with self._lock:
            if self._depth == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0 and self._was_enabled:
                    # freeze, then unfreeze: two list splices put every tracked object in the
                    # oldest generation, which the next full collection walks, as it would anyway
                    gc.freeze()
                    gc.unfreeze()
                    gc.enable()


class Runtime:
    """Everything a knowspec process keeps between calls (see the module docstring)."""

    def __init__(self, settings: RuntimeSettings | None = None) -> None:
        self.settings = settings or RuntimeSettings.from_environment()
        self.budget_bytes = self.settings.cache_budget_bytes
        self._lock = threading.Lock()  # every cache's; never held while building or disposing
        self._tick = 0
        self._used = 0
        self._caches: dict[str, Cache] = {}
        self._executors: dict[str, ThreadPoolExecutor] = {}
        self.gc_paused = _GcPause(self.settings.gc_pause)

    def cache(self, name: str, *, max_entries: int, sizeof: Callable[[Any], int] | None = None,
              dispose: Callable[[Any], None] | None = None) -> Cache:
        """The cache ``name``, registered on first use with these limits."""
        with self._lock:
            cache = self._caches.get(name)
            if cache is None:
                cache = self._caches[name] = Cache(self, name, max_entries, sizeof, dispose)
            return cache

    @property
    def caches(self) -> dict[str, Cache]:
        with self._lock:
            return dict(self._caches)

    def executor(self, name: str, workers: int) -> ThreadPoolExecutor:
        """A named pool of helper threads, started on first use and kept until ``close``."""
        with self._lock:
            pool = self._executors.get(name)
            if pool is None:
                pool = self._executors[name] = ThreadPoolExecutor(max_workers=max(1, workers),
                                                                  thread_name_prefix=f"knowspec-{name}")
            return pool

    def used_bytes(self) -> int:
        with self._lock:
            return self._used

    def clear(self) -> None:
        """Drop every cached value (connections and watches are closed)."""
        for cache in self.caches.values():
            cache.clear()

    def close(self) -> None:
        """``clear`` and stop the helper threads (server shutdown, end of a test)."""
        self.clear()
        with self._lock:
            pools, self._executors = list(self._executors.values()), {}
        for pool in pools:
            pool.shutdown(wait=False)

    # -- internals (the lock held) ---------------------------------------------------------------
    def _next_tick(self) -> int:
        self._tick += 1
        return self._tick

    def _over_budget(self, keep: tuple[Cache, Hashable]) -> list[tuple[Cache, Any]]:
        """Remove the least recently used entries, across the caches that hold bytes, until the
        budget holds; never ``keep`` (the entry just made)."""
        dropped = []
        while self._used > self.budget_bytes:
            oldest = None
            for cache in self._caches.values():
                if cache._used <= 0:
                    continue
                for key, entry in cache._entries.items():  # its least recently used first
                    if (cache, key) != keep:
                        if oldest is None or entry.tick < oldest[2]:
                            oldest = (cache, key, entry.tick)
                        break
            if oldest is None:
                break
            dropped.append(oldest[0]._remove(oldest[1]))
        return dropped


_active: Runtime | None = None
_active_lock = threading.Lock()


def current() -> Runtime:
    """The process's runtime (made from the environment on first use, unless one was activated)."""
    global _active
    runtime = _active
    if runtime is None:
        with _active_lock:
            if _active is None:
                _active = Runtime()
            runtime = _active
    return runtime


def of(ctx: Any) -> Runtime:
    """The runtime a call context carries, else the process's (code called without a context)."""
    return getattr(ctx, "runtime", None) or current()


def activate(runtime: Runtime) -> Runtime | None:
    """Make ``runtime`` the process's runtime (the server does this once); returns the previous."""
    global _active
    with _active_lock:
        previous, _active = _active, runtime
    return previous


@contextmanager
def activated(runtime: Runtime | None = None) -> Iterator[Runtime]:
    """A fresh (or the given) runtime for the duration of the block; closed afterwards."""
    runtime = runtime or Runtime()
    previous = activate(runtime)
    try:
        yield runtime
    finally:
        global _active
        with _active_lock:
            _active = previous
        runtime.close()
