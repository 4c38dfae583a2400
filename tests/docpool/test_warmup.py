"""Server-start warm-up (``docpool.warmup``): every catalog pool's full-text index is loaded
before the first call, and a pool that cannot be opened is skipped without failing the start."""

from __future__ import annotations

import pytest

from knowspec.impl import runtime as process
from knowspec.impl.config import Settings
from knowspec.impl.docpool import catalog, recipe, warmup
from knowspec.impl.docpool.fulltext import reader
from knowspec.impl.docpool.storage.sqlite import SqlitePool
from storages import GENERATED_COLLECTION, build_versions


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    return build_versions(tmp_path_factory.mktemp("warmup-src"))[0]


def test_warm_loads_each_pool_index_so_the_first_search_reads_nothing(tmp_path, source, monkeypatch):
    settings = Settings(appdir=tmp_path)
    pool_file = tmp_path / "shop-docs.db"
    for name, dsn in (("shop", str(pool_file)), ("empty", str(tmp_path / "never-imported.db"))):
        catalog.register_database(settings.catalog_path, name, "SQLITE", dsn)
        catalog.execute_alter(settings.catalog_path, f"ALTER DATABASE {name} SET DOCUMENTS INTERNAL")
    catalog.register_database(settings.catalog_path, "plain", "SQLITE", str(tmp_path / "plain.db"))  # no pool
    recipe.import_collection(pool_file, source, GENERATED_COLLECTION)
    with process.activated(process.Runtime(process.current().settings)):
        warmup.warm(warmup.pool_locations(settings.catalog_path))
        monkeypatch.setattr(reader, "sqlite_persisted", lambda path: pytest.fail("index loaded again"))
        monkeypatch.setattr(reader, "build", lambda path: pytest.fail("index built"))
        with SqlitePool(pool_file) as pool:
            assert pool.fulltext_index(pool.change_stamp()).arrays.n_rows > 0


def test_a_catalog_that_does_not_exist_warms_nothing(tmp_path):
    warmup.warm(warmup.pool_locations(tmp_path / "absent" / "catalog.db"))
    assert not (tmp_path / "absent").exists()



def test_a_catalog_names_a_pool_only_once_a_database_has_documents(tmp_path):
    settings = Settings(appdir=tmp_path)
    assert not warmup.pool_locations(settings.catalog_path)  # no catalog yet
    catalog.register_database(settings.catalog_path, "plain", "SQLITE", str(tmp_path / "plain.db"))
    assert not warmup.pool_locations(settings.catalog_path)
    catalog.execute_alter(settings.catalog_path, "ALTER DATABASE plain SET DOCUMENTS INTERNAL")
    assert warmup.pool_locations(settings.catalog_path)



def _prepare_serve_with_a_warm_up_of(seconds: float, tmp_path, monkeypatch) -> list[str]:
    """``prepare_serve`` with a warm-up that takes ``seconds``: what had happened when it returned."""
    import threading
    import time

    from knowspec.impl.cli import build_parser, prepare_serve

    events: list[str] = []
    done = threading.Event()

    def slow_warm(found) -> None:
        time.sleep(seconds)
        events.append("warm")
        done.set()

    monkeypatch.setattr(warmup, "warm", slow_warm)
    previous = process.current()
    try:
        tools = prepare_serve(build_parser().parse_args(["serve", "--stdio", "--appdir", str(tmp_path)]))
        events.append("ready")
        done.wait(5)
    finally:
        process.activate(previous)
    tools.process.close()
    return events


def test_serve_is_ready_once_its_pools_are_warm(tmp_path, monkeypatch):
    assert _prepare_serve_with_a_warm_up_of(0.3, tmp_path, monkeypatch) == ["warm", "ready"]


def test_serve_waits_for_the_warm_up_a_bounded_time(tmp_path, monkeypatch):
    monkeypatch.setattr(warmup, "READY_WAIT_SECONDS", 0.05)
    assert _prepare_serve_with_a_warm_up_of(1.0, tmp_path, monkeypatch) == ["ready", "warm"]
