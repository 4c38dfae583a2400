"""A SQLite pool read during an import sees the old collection or the new one, never a mix: a
call reads its change stamp, rows and full-text arrays in one read transaction. Statement by
statement, searches had ranked one import's index with the other's titles and snippets."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from knowspec.impl.docpool import recipe
from knowspec.impl.docpool.storage.sqlite import SqlitePool
from storages import build_versions, check_concurrent_readers_see_old_or_new

SQLITE = SimpleNamespace(import_collection=recipe.import_collection)


@pytest.fixture(scope="module")
def versions(tmp_path_factory):
    return build_versions(tmp_path_factory.mktemp("sqlite-src"))


def test_readers_see_the_old_collection_or_the_new_never_a_mix(tmp_path, versions):
    check_concurrent_readers_see_old_or_new(SQLITE, SqlitePool, tmp_path / "pool.db", versions, rounds=6)


def test_a_pool_holds_its_snapshot_until_closed(tmp_path, versions):
    import sqlite3

    path = tmp_path / "pool.db"
    recipe.import_collection(path, versions[0], "uretilen")
    pool = SqlitePool(path)
    pool.change_stamp()  # the first read takes the snapshot
    recipe.import_collection(path, versions[1], "uretilen")
    writer = sqlite3.connect(path)
    try:
        assert writer.execute("pragma wal_checkpoint(TRUNCATE)").fetchone()[0] == 1  # busy: the reader's snapshot
        pool.close()
        assert writer.execute("pragma wal_checkpoint(TRUNCATE)").fetchone()[0] == 0  # let go
    finally:
        writer.close()
