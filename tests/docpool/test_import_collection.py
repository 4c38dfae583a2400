"""IMPORTDOC (impl/docpool/importdoc.py): the seed's 200 / 202 / 400 contract and atomicity."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from knowspec.impl.config import Settings
from knowspec.impl.docpool import catalog
from knowspec.impl.docpool.importdoc import import_collection
from knowspec.impl.errors import ToolError

from test_import_pools import file_digest, make_pool, topics_of


@pytest.fixture()
def settings(tmp_path):
    s = Settings(appdir=tmp_path)
    catalog.register_database(s.catalog_path, "sales", "SQLITE", str(tmp_path / "sales.db"))
    catalog.execute_alter(s.catalog_path, "ALTER DATABASE sales SET DOCUMENTS INTERNAL")
    return s


@pytest.fixture()
def target(tmp_path):
    return tmp_path / "sales.db"


def count(path, sql, *params):
    with sqlite3.connect(path) as con:
        return con.execute(sql, params).fetchone()[0]


def test_success_reports_counts_and_writes_the_collection(settings, target, tmp_path):
    source = make_pool(tmp_path / "src.db", "manuals", topics_of(4), chunks_per_topic=3)
    outcome = import_collection(settings, "sales", "manuals", str(source))
    assert outcome == {
        "result": True, "collection": "manuals", "topics": 4, "chunks": 12,
        "docsDb": "sales", "source": str(source),
    }
    assert count(target, 'select count(*) from "doc$topic" where collection = ?', "manuals") == 4
    hits = count(target, 'select count(*) from "doc$chunk_fts" where "doc$chunk_fts" match ?', "invoic*")
    assert hits == 12


def test_reimport_replaces_only_that_collection(settings, target, tmp_path):
    import_collection(settings, "sales", "manuals",
                      str(make_pool(tmp_path / "a.db", "manuals", topics_of(5))))
    import_collection(settings, "sales", "faq",
                      str(make_pool(tmp_path / "b.db", "faq", topics_of(2, "q"))))
    smaller = make_pool(tmp_path / "c.db", "manuals", topics_of(1, "new"))
    outcome = import_collection(settings, "sales", "manuals", str(smaller))
    assert (outcome["topics"], outcome["chunks"]) == (1, 2)
    rows = sqlite3.connect(target).execute(
        'select collection, count(*) from "doc$topic" group by collection order by 1').fetchall()
    assert rows == [("faq", 2), ("manuals", 1)]
    assert count(target, 'select count(*) from "doc$chunk_fts" where "doc$chunk_fts" match ?',
                 "invoic*") == 2 * 2 + 1 * 2


def test_general_recipe_and_entity_kinds_are_refreshed(settings, target, tmp_path):
    source = make_pool(tmp_path / "src.db", "manuals", topics_of(1),
                       meta={"search_stopwords": "ve veya"},
                       entity_kinds=[("form_class", "Forms"), ("module", "Modules")])
    import_collection(settings, "sales", "manuals", str(source))
    assert count(target, """select value from "doc$meta" where collection = '' and name = ?""",
                 "search_stopwords") == "ve veya"
    assert count(target, 'select count(*) from "doc$entity_kind" where collection = ?',
                 "manuals") == 2


@pytest.mark.parametrize("missing", ["database", "collection", "source_path"])
def test_missing_parameter_is_a_400(settings, tmp_path, missing):
    args = {"database": "sales", "collection": "manuals", "source_path": str(tmp_path / "s.db")}
    args[missing] = ""
    with pytest.raises(ToolError) as err:
        import_collection(settings, **args)
    assert err.value.code == "invalid_request"


def _seeded_target(settings, tmp_path):
    import_collection(settings, "sales", "manuals",
                      str(make_pool(tmp_path / "seed.db", "manuals", topics_of(3))))
    return tmp_path / "sales.db"


@pytest.mark.parametrize(
    "collection, source_name, reason",
    [
        ("Bad_Name", "good.db", "invalid collection name"),
        ("-leading", "good.db", "invalid collection name"),
        ("absent", "good.db", "not found in source"),
        ("manuals", "missing.db", "source pool not found"),
        ("manuals", "x" * 5000, "source pool not found"),
    ],
)
def test_refusals_answer_result_false_and_leave_target_byte_identical(
    settings, tmp_path, collection, source_name, reason
):
    target = _seeded_target(settings, tmp_path)
    make_pool(tmp_path / "good.db", "manuals", topics_of(7, "other"))
    before = file_digest(target)
    outcome = import_collection(settings, "sales", collection, str(tmp_path / source_name))
    assert outcome["result"] is False and reason in outcome["message"]
    assert set(outcome) == {"result", "message"}
    assert file_digest(target) == before


def test_refusal_on_a_never_imported_pool_does_not_create_it(settings, tmp_path):
    outcome = import_collection(settings, "sales", "manuals", str(tmp_path / "nope.db"))
    assert outcome["result"] is False
    assert not (tmp_path / "sales.db").exists()


def test_unregistered_database_is_the_catalog_error(settings, tmp_path):
    source = make_pool(tmp_path / "src.db", "manuals", topics_of(1))
    with pytest.raises(ToolError) as err:
        import_collection(settings, "nosuch", "manuals", str(source))
    assert (err.value.code, err.value.message) == ("pool_unavailable", "database is not registered")


def _source_with_a_repeated_acl_entry(path):
    """A source whose ACL repeats an entry: the target's key fails halfway, after the topics and
    chunks are in (a repeated slug is refused before the import now)."""
    make_pool(path, "manuals", topics_of(3))
    con = sqlite3.connect(path)
    con.executescript(
        """
        drop table "doc$acl";
        create table "doc$acl" (topic_id integer, principal text);
        insert into "doc$acl" select id, 'muhasebe' from "doc$topic" where slug = 'topic-1';
        insert into "doc$acl" select id, 'muhasebe' from "doc$topic" where slug = 'topic-1';
        """
    )
    con.close()
    return path


def test_failure_halfway_rolls_back_everything(settings, tmp_path):
    target = _seeded_target(settings, tmp_path)
    before = sqlite3.connect(target).execute(
        'select slug, title from "doc$topic" order by slug').fetchall()
    source = _source_with_a_repeated_acl_entry(tmp_path / "broken.db")
    with pytest.raises(ToolError) as err:
        import_collection(settings, "sales", "manuals", str(source))
    assert err.value.code == "storage_error"
    after = sqlite3.connect(target).execute(
        'select slug, title from "doc$topic" order by slug').fetchall()
    assert after == before
    assert count(target, 'select count(*) from "doc$chunk_fts" where "doc$chunk_fts" match ?',
                 "invoic*") == 3 * 2


def test_a_failed_first_import_leaves_no_pool_file(settings, tmp_path):
    """A pool file with the schema and no collection would answer an empty list where the server
    should say the pool is not imported."""
    (tmp_path / "sources").mkdir()
    source = _source_with_a_repeated_acl_entry(tmp_path / "sources" / "broken.db")
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ToolError) as err:
        import_collection(settings, "sales", "manuals", str(source))
    assert err.value.code == "storage_error"
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no pool, no staging file
    assert import_collection(settings, "sales", "manuals",
                             str(make_pool(tmp_path / "good.db", "manuals", topics_of(2))))["topics"] == 2


def test_a_first_import_joins_a_pool_another_import_created_meanwhile(settings, target, tmp_path, monkeypatch):
    from knowspec.impl.docpool import recipe

    other = make_pool(tmp_path / "faq.db", "faq", topics_of(2, "q"))
    real_place = recipe.link_into_place

    def placed_after_another_import(staging, path):
        monkeypatch.setattr(recipe, "link_into_place", real_place)
        recipe.import_collection(path, other, "faq")  # the other import wins the race
        return real_place(staging, path)

    monkeypatch.setattr(recipe, "link_into_place", placed_after_another_import)
    outcome = import_collection(settings, "sales", "manuals",
                                str(make_pool(tmp_path / "src.db", "manuals", topics_of(3))))
    assert outcome["topics"] == 3
    rows = sqlite3.connect(target).execute(
        'select collection, count(*) from "doc$topic" group by collection order by 1').fetchall()
    assert rows == [("faq", 2), ("manuals", 3)]
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".importing")]


def test_reader_sees_wholly_old_or_wholly_new_data(settings, tmp_path):
    target = _seeded_target(settings, tmp_path)  # 3 topics, 6 chunks
    new_source = make_pool(tmp_path / "new.db", "manuals", topics_of(40, "fresh"),
                           chunks_per_topic=5)
    seen: set[tuple[int, int]] = set()
    stop = threading.Event()
    errors: list[BaseException] = []

    def reader():
        uri = target.absolute().as_uri() + "?mode=ro"
        while not stop.is_set():
            try:
                con = sqlite3.connect(uri, uri=True)
                con.execute("begin")
                topics = con.execute('select count(*) from "doc$topic"').fetchone()[0]
                chunks = con.execute('select count(*) from "doc$chunk"').fetchone()[0]
                con.execute("commit")
                con.close()
                seen.add((topics, chunks))
            except sqlite3.OperationalError as exc:  # busy during the WAL switch is fine
                if "locked" not in str(exc) and "busy" not in str(exc):
                    errors.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for _ in range(3):
            import_collection(settings, "sales", "manuals", str(new_source))
    finally:
        stop.set()
        thread.join()
    assert not errors
    assert seen <= {(3, 6), (40, 200)}
    assert (40, 200) in seen or count(target, 'select count(*) from "doc$topic"') == 40


def _cli(argv):
    import argparse

    from knowspec.impl.docpool.importdoc import add_pool_import_parser

    parser = argparse.ArgumentParser(prog="knowspec pool")
    add_pool_import_parser(parser.add_subparsers(dest="pool_command"))
    return parser.parse_args(argv)


def test_cli_pool_import_imports_and_reports_counts(settings, tmp_path, capsys):
    source = make_pool(tmp_path / "src.db", "manuals", topics_of(2))
    args = _cli(["import", "--appdir", str(tmp_path), "--database", "sales",
                 "--collection", "manuals", str(source)])
    assert args.func(args) == 0
    assert "2 topics, 4 chunks" in capsys.readouterr().out


def test_cli_pool_import_refusal_exits_2_and_error_exits_1(settings, tmp_path):
    common = ["import", "--appdir", str(tmp_path), "--collection", "manuals"]
    other = make_pool(tmp_path / "other.db", "guides", topics_of(1))
    args = _cli([*common, "--database", "sales", str(other)])  # the source lacks the collection
    assert args.func(args) == 2
    with pytest.raises(SystemExit) as exited:  # no such source file: refused before anything runs
        _cli([*common, "--database", "sales", str(tmp_path / "no.db")])
    assert exited.value.code == 2
    source = make_pool(tmp_path / "src.db", "manuals", topics_of(1))
    args = _cli([*common, "--database", "nosuch", str(source)])
    assert args.func(args) == 1


def test_cli_pool_import_requires_database(tmp_path):
    with pytest.raises(SystemExit):
        _cli(["import", "--appdir", str(tmp_path), "--collection", "manuals", "src.db"])


@pytest.fixture()
def fake_storage(settings, monkeypatch):
    """Database ``ext`` on POSTGRESQL storage, whose storage module is a stand-in."""
    import sys
    import types as pytypes

    from knowspec.impl.docpool import pools

    catalog.register_database(settings.catalog_path, "ext", "POSTGRESQL", "dsn://x")
    catalog.execute_alter(settings.catalog_path, "ALTER DATABASE ext SET DOCUMENTS INTERNAL")
    module = pytypes.ModuleType("fake_storage_module")
    monkeypatch.setitem(sys.modules, "fake_storage_module", module)
    monkeypatch.setitem(pools.STORAGE_OPENERS, "POSTGRESQL", "fake_storage_module")
    return module


def test_storage_module_without_an_importer_is_not_implemented(settings, tmp_path, fake_storage):
    source = make_pool(tmp_path / "src.db", "manuals", topics_of(1))
    with pytest.raises(ToolError) as err:
        import_collection(settings, "ext", "manuals", str(source))
    assert err.value.code == "not_implemented"


def test_other_storages_import_through_their_module(settings, tmp_path, fake_storage):
    from knowspec.impl.docpool.recipe import ImportResult

    calls = []

    def importer(dsn, src, coll):
        calls.append((dsn, src, coll))
        return ImportResult(coll, 1, 2, str(src))

    fake_storage.import_collection = importer
    source = make_pool(tmp_path / "src.db", "manuals", topics_of(1))
    outcome = import_collection(settings, "ext", "manuals", str(source))
    assert calls == [("dsn://x", source, "manuals")]
    assert outcome == {"result": True, "collection": "manuals", "topics": 1, "chunks": 2,
                       "docsDb": "ext", "source": str(source)}


def test_other_storage_failure_is_storage_error(settings, tmp_path, fake_storage):
    def failing(dsn, src, coll):
        raise RuntimeError("connection reset")

    fake_storage.import_collection = failing
    source = make_pool(tmp_path / "src.db", "manuals", topics_of(1))
    with pytest.raises(ToolError) as err:
        import_collection(settings, "ext", "manuals", str(source))
    assert err.value.code == "storage_error" and "connection reset" in err.value.message


# -- knowspec pool remove -------------------------------------------------------------------------

def _remove_cli(tmp_path, collection):
    from knowspec.impl.cli import main

    return main(["pool", "remove", "--appdir", str(tmp_path), "--database", "sales", "--collection", collection])


def test_pool_remove_takes_one_collection_and_its_index_entries(settings, target, tmp_path, capsys):
    import_collection(settings, "sales", "manuals", str(make_pool(tmp_path / "a.db", "manuals", topics_of(3))))
    import_collection(settings, "sales", "faq", str(make_pool(tmp_path / "b.db", "faq", topics_of(2, "q"))))
    assert _remove_cli(tmp_path, "manuals") == 0
    assert "removed manuals from sales: 3 topics, 6 chunks" in capsys.readouterr().out
    rows = sqlite3.connect(target).execute('select collection, count(*) from "doc$topic" group by 1').fetchall()
    assert rows == [("faq", 2)]
    assert count(target, 'select count(*) from "doc$chunk_fts" where "doc$chunk_fts" match ?', "invoic*") == 4
    assert count(target, "select count(*) from \"doc$meta\" where collection = ''") > 0  # the general recipe stays
    from knowspec.impl.docpool.fulltext.reader import sqlite_persisted
    from knowspec.impl.docpool.search import fts_ranked
    from knowspec.impl.docpool.storage.base import UNRESTRICTED
    from knowspec.impl.docpool.storage.sqlite import SqlitePool

    assert sqlite_persisted(target) is not None
    with SqlitePool(target) as pool:  # the persisted arrays a fresh process loads hold faq's alone
        assert {h.collection for h in fts_ranked(pool, "invoices", UNRESTRICTED, limit=50)} == {"faq"}


def test_pool_remove_of_a_collection_the_pool_lacks_changes_nothing(settings, target, tmp_path, capsys):
    assert _remove_cli(tmp_path, "manuals") == 2  # no pool yet: none is made
    assert not target.exists()
    _seeded_target(settings, tmp_path)
    before = file_digest(target)
    assert _remove_cli(tmp_path, "faq") == 2
    assert "pool remove: nothing changed: collection faq is not in the pool" in capsys.readouterr().err
    assert file_digest(target) == before


def test_pool_remove_never_writes_into_a_file_that_is_not_a_pool(settings, tmp_path):
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as con:
        con.execute("create table t(x)")
    catalog.register_database(settings.catalog_path, "other", "SQLITE", str(other))
    catalog.execute_alter(settings.catalog_path, "ALTER DATABASE other SET DOCUMENTS INTERNAL")
    before = file_digest(other)
    from knowspec.impl.cli import main

    assert main(["pool", "remove", "--appdir", str(tmp_path), "--database", "other", "--collection", "docs"]) == 2
    assert file_digest(other) == before and not Path(str(other) + "-wal").exists()


def test_a_source_written_over_mid_import_fails_it_and_changes_nothing(settings, target, tmp_path, monkeypatch):
    """A copy onto the source while the recipe reads it (no SQLite lock keeps that out) would
    mix the old file's rows with the new one's: the import fails before its commit instead."""
    import shutil

    from knowspec.impl.docpool import recipe

    import_collection(settings, "sales", "manuals", str(make_pool(tmp_path / "a.db", "manuals", topics_of(3))))
    before = file_digest(target)
    source = make_pool(tmp_path / "b.db", "manuals", topics_of(4, "b"))
    other = make_pool(tmp_path / "c.db", "manuals", topics_of(4, "c"))
    real_persist = recipe.persist_fulltext

    def copy_over_first(con):
        shutil.copyfile(other, source)
        real_persist(con)

    monkeypatch.setattr(recipe, "persist_fulltext", copy_over_first)
    with pytest.raises(ToolError) as err:
        import_collection(settings, "sales", "manuals", str(source))
    assert err.value.code == "storage_error" and "changed while it was being imported" in err.value.message
    assert file_digest(target) == before


def test_an_import_waits_for_a_writer_that_holds_the_pool_past_sqlites_default_wait(settings, target, tmp_path):
    """SQLite's default wait is 5 s: an import started while another ran longer than that failed
    with "database is locked"; it waits its turn now, as on PostgreSQL and Firebird."""
    import time

    import_collection(settings, "sales", "manuals", str(make_pool(tmp_path / "a.db", "manuals", topics_of(3))))
    source = make_pool(tmp_path / "b.db", "guides", topics_of(4, "b"))
    holder = sqlite3.connect(target, isolation_level=None, check_same_thread=False)
    holder.execute("begin immediate")  # another writer, holding the pool
    releaser = threading.Timer(6.0, lambda: holder.execute("rollback"))
    releaser.start()
    began = time.monotonic()
    try:
        outcome = import_collection(settings, "sales", "guides", str(source))
    finally:
        releaser.join()
        holder.close()
    assert outcome["result"] is True and time.monotonic() - began >= 6.0
    assert count(target, 'select count(*) from "doc$topic" where collection = ?', "guides") == 4
