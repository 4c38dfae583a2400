"""Firebird pool storage: IMPORTDOC semantics, snapshot reads and the seed's error texts."""

from __future__ import annotations

import time

import pytest

from knowspec.impl.docpool.catalog import PoolLocation
from knowspec.impl.docpool.storage import firebird
from knowspec.impl.docpool.storage.base import UNRESTRICTED
from knowspec.impl.errors import ToolError
from storages import (
    check_removal_like_the_recipe,
    check_a_source_written_over_mid_import_changes_nothing,
    check_another_models_vectors_are_refused,
    check_concurrent_readers_see_old_or_new,
    check_import_reports_like_the_recipe,
    check_refusals_match_the_recipe,
    check_failing_import_changes_nothing,
    check_reader_keeps_its_snapshot,
    check_two_imports_at_once_both_land,
    check_unloadable_vectors_are_refused,
    imports_at_once,
)
from storages import GENERATED_COLLECTION, SAMPLE_COLLECTION, build_sources, build_versions, fb_dsn, fb_ready  # noqa: F401

pytestmark = pytest.mark.firebird


@pytest.fixture(scope="module")
def versions(tmp_path_factory, fb_ready):
    return build_versions(tmp_path_factory.mktemp("fb-src"))


@pytest.fixture
def dsn(tmp_path, fb_ready):
    return fb_dsn(tmp_path, "pool")


def _open(dsn):
    return firebird.open_pool(PoolLocation("db", "db", "FIREBIRD", dsn))


def test_import_reports_like_the_sqlite_recipe_and_is_visible_to_the_next_read(tmp_path, dsn, versions):
    check_import_reports_like_the_recipe(firebird, _open, dsn, versions, tmp_path / "ref.db")


def test_a_failing_import_changes_nothing(dsn, versions, monkeypatch):
    check_failing_import_changes_nothing(firebird, _open, dsn, versions, monkeypatch)


def test_a_reader_keeps_its_snapshot_while_an_import_commits(dsn, versions):
    check_reader_keeps_its_snapshot(firebird, _open, dsn, versions)


def test_concurrent_readers_see_old_or_new_never_a_mix(dsn, versions):
    check_concurrent_readers_see_old_or_new(firebird, _open, dsn, versions)


def test_full_text_index_follows_the_change_stamp(dsn, versions):
    v1, v2 = versions
    firebird.import_collection(dsn, v1, GENERATED_COLLECTION)
    with _open(dsn) as pool:
        index_v1 = pool.fulltext_index(pool.change_stamp())
        again = pool.fulltext_index(pool.change_stamp())  # loaded once per stamp (bound per request)
        assert again.arrays.term_start is index_v1.arrays.term_start
    firebird.import_collection(dsn, v2, GENERATED_COLLECTION)
    with _open(dsn) as pool:
        index_v2 = pool.fulltext_index(pool.change_stamp())
    assert index_v2 is not index_v1 and index_v2.arrays.n_rows != index_v1.arrays.n_rows


def test_missing_pool_file_says_document_pool_not_imported(tmp_path, fb_ready):
    with pytest.raises(ToolError) as err:
        _open(str(tmp_path / "absent.fdb"))
    assert err.value.code == "pool_unavailable"
    assert err.value.message.startswith("document pool not imported (db: ")


def test_a_database_without_doc_tables_is_not_imported(tmp_path, fb_ready):
    con = firebird.connect(str(tmp_path / "bare.fdb"), create=True)
    con.close()
    with pytest.raises(ToolError, match="document pool not imported"):
        _open(str(tmp_path / "bare.fdb"))


def test_an_import_makes_a_new_pool_with_large_pages_and_the_default_cache_bytes(dsn, versions):
    """Each page an import writes is a forced write: 32 KB pages make a quarter as many as 8 KB
    ones, and the page cache keeps the engine default's 16 MB (2048 pages of 8 KB)."""
    firebird.import_collection(dsn, versions[0], GENERATED_COLLECTION)
    con = firebird.connect(dsn)
    try:
        assert con.info.page_size == firebird.POOL_PAGE_SIZE == 32768
        assert con.info.page_cache_size * con.info.page_size == 2048 * 8192
    finally:
        con.close()


@pytest.mark.parametrize("collection,source_name", [
    ("Bad Name", "generated-v1.db"), ("uretilen", "absent.db"), ("yok", "generated-v1.db")])
def test_refusals_match_the_sqlite_recipe_and_leave_the_target_alone(tmp_path, dsn, versions,
                                                                    collection, source_name):
    check_refusals_match_the_recipe(firebird, dsn, versions[0].parent / source_name, collection, tmp_path / "ref.db")
    assert not (tmp_path / "pool.fdb").exists()  # the target was not even created


def test_server_dsn_urls_keep_the_password_out_of_messages():
    database, user, password, shown = firebird.parse_dsn("firebird://ana:s3cret@db.example:3051/var/fb/pool.fdb")
    assert (database, user, password) == ("db.example/3051:/var/fb/pool.fdb", "ana", "s3cret")
    assert "s3cret" not in shown


def test_doc_tools_on_a_firebird_database_without_a_pool_say_not_imported(tmp_path, fb_ready):
    from docpool_sample import call
    from knowspec.impl.config import Settings
    from knowspec.impl.context import CallContext
    from knowspec.impl.docpool import catalog

    settings = Settings(appdir=tmp_path)
    catalog.register_database(settings.catalog_path, "fbdb", "FIREBIRD", str(tmp_path / "none.fdb"))
    catalog.execute_alter(settings.catalog_path, "ALTER DATABASE fbdb SET DOCUMENTS INTERNAL")
    with pytest.raises(ToolError) as err:
        call("doc_search", CallContext(settings=settings), database="fbdb", query="fatura")
    assert err.value.message == f"document pool not imported (fbdb: {tmp_path / 'none.fdb'})"


def test_postgres_and_firebird_share_one_import_failure_type():
    from knowspec.impl.docpool.storage import postgres

    assert firebird.ImportFailed is postgres.ImportFailed


def test_importdoc_dispatches_to_firebird_and_answers_like_sqlite(tmp_path, dsn, versions):
    from knowspec.impl.config import Settings
    from knowspec.impl.docpool import catalog, importdoc

    settings = Settings(appdir=tmp_path)
    catalog.register_database(settings.catalog_path, "fbdb", "FIREBIRD", dsn)
    catalog.register_database(settings.catalog_path, "sqdb", "SQLITE", str(tmp_path / "sq.db"))
    for db in ("fbdb", "sqdb"):
        catalog.execute_alter(settings.catalog_path, f"ALTER DATABASE {db} SET DOCUMENTS INTERNAL")
    got = importdoc.import_collection(settings, "fbdb", GENERATED_COLLECTION, str(versions[0]))
    want = importdoc.import_collection(settings, "sqdb", GENERATED_COLLECTION, str(versions[0]))
    assert got == {**want, "docsDb": "fbdb"} and got["result"] is True
    assert importdoc.import_collection(settings, "fbdb", "yok", str(versions[0]))["result"] is False


def _index_selectivity(dsn) -> dict[str, float]:
    con = firebird.connect(dsn)
    try:
        cur = con.cursor()
        cur.execute("select trim(rdb$index_name), rdb$statistics from rdb$indices "
                    "where rdb$relation_name in ('DOC$TOPIC', 'DOC$CHUNK')")
        return {name: float(value or 0) for name, value in cur.fetchall()}
    finally:
        con.close()


def test_an_import_leaves_the_index_statistics_of_its_rows_not_of_empty_tables(dsn, versions):
    firebird.import_collection(dsn, versions[0], GENERATED_COLLECTION)
    # 1 / distinct keys: zero is what an index made on an empty table keeps, and what made the
    # optimizer take doc$topic_collection (one key: selectivity 1) for a unique index
    selectivity = _index_selectivity(dsn)
    assert selectivity and all(0 < value <= 1 for value in selectivity.values()), selectivity
    assert selectivity["DOC$TOPIC_COLLECTION"] == 1.0


def test_reindex_refreshes_the_statistics_of_a_pool_imported_without_them(dsn, versions, monkeypatch):
    monkeypatch.setattr(firebird, "_settle", lambda con: None)
    firebird.import_collection(dsn, versions[0], GENERATED_COLLECTION)
    assert all(value == 0 for value in _index_selectivity(dsn).values())
    monkeypatch.undo()
    firebird.reindex(dsn)
    assert all(0 < value <= 1 for value in _index_selectivity(dsn).values())


def test_a_collection_of_another_models_vectors_is_refused_and_the_pool_untouched(tmp_path, dsn, versions):
    check_another_models_vectors_are_refused(firebird, _open, dsn, versions, tmp_path)


def test_removing_a_collection_leaves_the_pool_the_sqlite_recipe_leaves(tmp_path, dsn, versions):
    check_removal_like_the_recipe(firebird, _open, dsn, versions, tmp_path)


def _hold_stamp(dsn):
    con = firebird.connect(dsn)
    con.cursor().execute("update doc$pool_state set stamp = stamp where id = 1")

    def release() -> None:
        con.rollback()
        con.close()

    return release


def test_a_source_written_over_mid_import_fails_it_and_changes_nothing(tmp_path, dsn, versions, monkeypatch):
    check_a_source_written_over_mid_import_changes_nothing(firebird, _open, dsn, versions, tmp_path, monkeypatch)


def test_two_imports_at_once_both_land_one_after_the_other(tmp_path, dsn, versions):
    check_two_imports_at_once_both_land(firebird, _open, dsn, versions, build_sources(tmp_path)[SAMPLE_COLLECTION],
                                        _hold_stamp)


def test_two_first_imports_at_once_into_a_new_pool_both_land(tmp_path, dsn, versions, monkeypatch):
    """Both imports found no pool and made it: one failed with "object DATABASE is in use" or a
    duplicate table. The window between looking for the tables and making them is widened here."""
    looked = firebird._has_schema

    def slowly(cur):
        found = looked(cur)
        if not found:
            time.sleep(0.3)
        return found

    monkeypatch.setattr(firebird, "_has_schema", slowly)
    sample = build_sources(tmp_path)[SAMPLE_COLLECTION]
    assert imports_at_once(firebird, dsn, [(versions[0], GENERATED_COLLECTION), (sample, SAMPLE_COLLECTION)]) == []
    with _open(dsn) as pool:
        assert {c.id for c in pool.collections(UNRESTRICTED)} == {GENERATED_COLLECTION, SAMPLE_COLLECTION}


def test_a_collection_of_unloadable_vectors_is_refused_like_the_recipe(tmp_path, dsn, versions):
    check_unloadable_vectors_are_refused(firebird, dsn, versions, tmp_path)
