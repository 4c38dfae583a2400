"""Searches never show a topic the caller may not read, even from data read before an import
renumbered the topics (spec/docpool/contract.md §4: filtering happens before ranking).

Two sources hold the same two topics in opposite order, so every import swaps their ids: the
restricted ``secret-alpha`` takes the id the public ``open-note`` had. Caches keyed by the pool's
change stamp (the full-text arrays, the allowed ids) must never answer one state's data for the
other's; and a hit is checked against the storage as it is now before it is shown.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from knowspec.impl.config import Settings
from knowspec.impl.context import CallContext, Caller
from knowspec.impl.docpool import catalog, tools
from knowspec.impl.docpool.recipe import import_collection
from knowspec.impl.docpool.storage.sqlite import SqlitePool

from test_import_pools import make_pool

SECRET = ("secret-alpha", "Kumquat Alpha Plan", "kumquat zanzibar42 hidden")
OPEN = ("open-note", "Kumquat Open Note", "kumquat openpublic text!!")  # the same lengths as SECRET's
ACL = {"secret-alpha": ["ik"], "open-note": ["*"]}


@pytest.fixture()
def env(tmp_path: Path):
    sources = {"a": make_pool(tmp_path / "a.db", "vault", [SECRET, OPEN], erisim="gizli", acl=ACL),
               "b": make_pool(tmp_path / "b.db", "vault", [OPEN, SECRET], erisim="gizli", acl=ACL)}
    settings = Settings(appdir=tmp_path)
    pool_file = tmp_path / "sales.db"
    catalog.register_database(settings.catalog_path, "sales", "SQLITE", str(pool_file))
    catalog.execute_alter(settings.catalog_path, "ALTER DATABASE sales SET DOCUMENTS INTERNAL")
    settings.default_database = "sales"
    import_collection(pool_file, sources["a"], "vault")
    return SimpleNamespace(settings=settings, pool=pool_file, sources=sources)


def _search_as_bob(settings: Settings) -> list[dict]:
    ctx = CallContext(caller=Caller("bob", (), unrestricted=False), settings=settings)
    args = SimpleNamespace(query="kumquat", mode="fts", limit=10, collection=None, database=None)
    return tools.doc_search(args, ctx).structured["results"]


def _assert_nothing_secret(hits: list[dict]) -> None:
    for hit in hits:
        assert hit["slug"] == "open-note", hit
        assert hit["title"] == "Kumquat Open Note", hit
        assert "zanzibar" not in hit.get("snippet", ""), hit


def _ids(pool: Path) -> dict[str, int]:
    p = SqlitePool(pool)
    try:
        return {r[1]: int(r[0]) for r in p._rows('select id, slug from "doc$topic"')}
    finally:
        p.close()


def test_each_import_swaps_the_ids(env):
    first = _ids(env.pool)
    import_collection(env.pool, env.sources["b"], "vault")
    assert _ids(env.pool) == {"secret-alpha": first["open-note"], "open-note": first["secret-alpha"]}


def test_the_change_stamp_moves_with_every_import_even_when_sizes_and_times_repeat(env):
    def stamp_and_times():
        p = SqlitePool(env.pool)
        try:
            stamp = p.change_stamp()
        finally:
            p.close()
        times = {s: os.stat(str(env.pool) + s).st_mtime_ns for s in ("", "-wal") if Path(str(env.pool) + s).exists()}
        return stamp, times

    def settle() -> None:  # the WAL folded back into the file, as when the last reader closes
        with sqlite3.connect(env.pool) as con:
            con.execute("pragma wal_checkpoint(truncate)")

    settle()
    seen = [stamp_and_times()]
    for source in ("b", "a", "b"):
        import_collection(env.pool, env.sources[source], "vault")
        settle()
        for suffix, mtime in seen[0][1].items():  # the clock as it was at the first import
            if Path(str(env.pool) + suffix).exists():
                os.utime(str(env.pool) + suffix, ns=(mtime, mtime))
        seen.append(stamp_and_times())
    stamps = [stamp for stamp, _ in seen]
    assert len(set(stamps)) == len(stamps)


def test_a_hit_from_data_older_than_an_import_is_checked_against_the_pool_now(env, monkeypatch):
    """Stand-in for any stale cache: the stamp is pinned, so the arrays and allowed ids read in
    the first state keep answering after the import swapped the ids. The hit they give is the
    old public topic's id, which is now the restricted one: it must not be shown."""
    _assert_nothing_secret(hits := _search_as_bob(env.settings))
    assert [h["slug"] for h in hits] == ["open-note"]
    pinned = SqlitePool.change_stamp
    frozen: dict[str, tuple] = {}

    def same_stamp(self):
        return frozen.setdefault(str(self.path), pinned(self))

    monkeypatch.setattr(SqlitePool, "change_stamp", same_stamp)
    _search_as_bob(env.settings)  # the caches now hold the first state's data under the pinned stamp
    import_collection(env.pool, env.sources["b"], "vault")
    _assert_nothing_secret(_search_as_bob(env.settings))


def test_searches_racing_imports_never_show_a_restricted_topic(env):
    stop = threading.Event()
    seen: list[list[dict]] = []
    failures: list[BaseException] = []

    def search() -> None:
        while not stop.is_set():
            try:
                seen.append(_search_as_bob(env.settings))
            except BaseException as exc:  # noqa: BLE001 - reported below
                failures.append(exc)
                return

    thread = threading.Thread(target=search)
    thread.start()
    try:
        for n in range(30):
            import_collection(env.pool, env.sources["ba"[n % 2]], "vault")
    finally:
        stop.set()
        thread.join()
    assert not failures, failures
    assert seen
    for hits in seen:
        _assert_nothing_secret(hits)
    after = _search_as_bob(env.settings)  # and once the imports stop, the answer is right
    assert [h["slug"] for h in after] == ["open-note"]
    _assert_nothing_secret(after)


def test_a_server_reading_the_stamp_keeps_sqlites_locks_against_an_import_in_another_process(env):
    """Reading the stamp opened and closed the pool file and its WAL in the server's process,
    which drops every POSIX lock the process holds on them, SQLite's included: a `pool import`
    in another process then found the file free, deleted the WAL the server was reading, and the
    server answered from stale pages (and then failed every search) until it restarted."""
    import subprocess
    import sys

    reader = SqlitePool(env.pool)
    try:
        before = {r[1]: int(r[0]) for r in reader._rows('select id, slug from "doc$topic"')}
        reader.change_stamp()
        script = ("import sys; from pathlib import Path; from knowspec.impl.docpool.recipe import import_collection; "
                  "import_collection(Path(sys.argv[1]), Path(sys.argv[2]), 'vault')")
        subprocess.run([sys.executable, "-c", script, str(env.pool), str(env.sources["b"])], check=True, timeout=120)
        assert Path(str(env.pool) + "-wal").exists()  # the reader's lock kept it: the importer could not fold it away
        assert {r[1]: int(r[0]) for r in reader._rows('select id, slug from "doc$topic"')} == before  # its snapshot
        reader._con.execute("rollback")  # the connection's next call (an idle reader reused) ...
        reader._con.execute("begin")
        after = {r[1]: int(r[0]) for r in reader._rows('select id, slug from "doc$topic"')}  # ... sees the import
        assert after == {"secret-alpha": before["open-note"], "open-note": before["secret-alpha"]}
    finally:
        reader.close()
