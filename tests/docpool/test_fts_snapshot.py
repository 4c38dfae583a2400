"""The full-text index persisted at import (``doc$fts_snapshot``, ``fulltext.reader.dump``).

An import builds the search layer's index in its own transaction and stores it in the pool with
the pool's revision; a process's first search loads it instead of building it. These tests pin:
the loaded index equals the one built from the pool (so every exactness test of the built one
holds for it), it is what a fresh process uses, a snapshot whose revision is not the pool's
is never used (the index is built instead), and a failed import leaves the old snapshot.
"""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from knowspec.impl import runtime as process
from knowspec.impl.docpool import recipe
from knowspec.impl.docpool.catalog import PoolLocation
from knowspec.impl.docpool.fulltext import rank, reader
from knowspec.impl.docpool.fulltext.reader import FtsIndex
from knowspec.impl.docpool.search import fts_ranked
from knowspec.impl.docpool.storage.base import UNRESTRICTED
from knowspec.impl.docpool.storage.sqlite import SqlitePool, open_for_write
from storages import (  # noqa: F401
    GENERATED_COLLECTION, build_versions, fb_dsn, fb_ready, fresh_pg_database, pg_dsn, query_words)

ARRAY_FIELDS = ("term_start", "post_row", "post_tf", "row_chunk", "row_topic", "row_len", "topic_id")
LIST_FIELDS = ("terms", "topic_collection", "topic_slug", "n_rows", "total_tokens")
QUERIES = query_words(31, 25) + ["köprü", "ışık straße", "e-mail"]


def assert_same_arrays(got: reader.FtsArrays, want: reader.FtsArrays) -> None:
    for name in ARRAY_FIELDS:
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    for name in LIST_FIELDS:
        assert getattr(got, name) == getattr(want, name), name


def searches(pool) -> list:
    return [[(h.slug, h.score, h.snippet) for h in fts_ranked(pool, q, UNRESTRICTED, limit=20)] for q in QUERIES]


@pytest.fixture(scope="module")
def versions(tmp_path_factory):
    return build_versions(tmp_path_factory.mktemp("snapshot-src"))


@pytest.fixture
def sync_arrays(runtime_settings):
    runtime_settings(fts_arrays="sync")


def _fresh_process():
    """A new runtime (no cached arrays or indexes, the same settings), as after a restart."""
    return process.activated(process.Runtime(process.current().settings))


# -- the byte form ---------------------------------------------------------------------------------

texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)


@settings(max_examples=30, deadline=None)
@given(rows=st.lists(st.tuples(texts, texts, texts), max_size=12),
       titles=st.lists(texts, min_size=1, max_size=4))
def test_dump_then_load_gives_back_the_same_index(rows, titles):
    chunks = [(10 + i, 1 + i % len(titles), *r) for i, r in enumerate(rows)]
    topics = [(1 + k, "c\x1f" if k % 2 else "c", f"s{k}", t, t[::-1]) for k, t in enumerate(titles)]
    built = FtsIndex.build(("a",), chunks, topics)
    blob = reader.dump(built, "rev-1")
    assert reader.revision_of(blob) == "rev-1"
    loaded = reader.load(blob, ("b",))
    assert loaded.stamp == ("b",)
    assert_same_arrays(loaded.arrays, built.arrays)
    assert list(loaded.texts) == list(built.texts)


class StoredParts:
    """``dump``'s parts as a pool table holds them, with the ranges a reader asked for."""

    def __init__(self, blob: bytes, revision: str = "rev-1", compress: bool = False) -> None:
        self.rows = {k: (revision, part) for k, part in enumerate(reader.parts(blob, compress=compress))}
        self.asked: list[int] = []
        self.calls = 0

    def first(self):
        return self.rows[0]

    def read(self, wanted: list[int]):
        self.calls += 1
        found = [(k, *self.rows[k]) for k in wanted if k in self.rows]
        self.asked.extend(k for k, _, _ in found)
        return found


@settings(max_examples=30, deadline=None)
@given(rows=st.lists(st.tuples(texts, texts, texts), max_size=12),
       titles=st.lists(texts, min_size=1, max_size=4), part_bytes=st.sampled_from([64, 300, 4096, 1 << 20]),
       compress=st.booleans(), lazy=st.booleans())
def test_a_snapshot_read_part_by_part_gives_back_the_same_index(rows, titles, part_bytes, compress, lazy):
    chunks = [(10 + i, 1 + i % len(titles), *r) for i, r in enumerate(rows)]
    topics = [(1 + k, "c", f"s{k}", t, t[::-1]) for k, t in enumerate(titles)]
    built = FtsIndex.build(("a",), chunks, topics)
    with patch.object(reader, "SNAPSHOT_PART_BYTES", part_bytes):
        stored = StoredParts(reader.dump(built, "rev-1"), compress=compress)
    loaded = reader.persisted(stored.first, stored.read, "rev-1", ("b",), lazy=lazy).with_reader(stored.read)
    assert_same_arrays(loaded.arrays, built.arrays)
    assert list(loaded.texts) == list(built.texts)


def _many_words_index() -> FtsIndex:
    """400 chunks, each with its own word among shared ones: postings and texts over many parts."""
    chunks = [(1 + i, 1 + i % 20, f"title {i}", "", f"word{i:04d} " + "common body text of a chunk " * 8)
              for i in range(400)]
    topics = [(1 + k, "c", f"s{k}", f"T{k}", "") for k in range(20)]
    return FtsIndex.build(("a",), chunks, topics)


def test_a_lazily_loaded_snapshot_reads_its_head_then_only_the_parts_a_search_slices():
    built = _many_words_index()
    with patch.object(reader, "SNAPSHOT_PART_BYTES", 512):
        stored = StoredParts(reader.dump(built, "rev-1"))
    loaded = reader.persisted(stored.first, stored.read, "rev-1", ("b",))
    head_parts = {0, *stored.asked}
    assert len(head_parts) < len(stored.rows) / 4  # postings and texts are the bulk, still unread
    stored.asked.clear()
    bound = loaded.with_reader(stored.read)
    got = rank.phrase_postings(bound.arrays, "word0123", False)
    want = rank.phrase_postings(built.arrays, "word0123", False)
    assert [np.array_equal(g, w) for g, w in zip(got, want)] == [True, True]
    assert 0 < len(stored.asked) <= 4  # one posting: its row and counts, each within at most two parts
    assert bound.texts[122] == built.texts[122]
    assert len(stored.asked) <= 4 + 3  # one row's offsets and text


def test_a_search_reads_its_terms_postings_in_one_round_trip_and_its_rows_texts_in_two():
    built = _many_words_index()
    with patch.object(reader, "SNAPSHOT_PART_BYTES", 512):
        stored = StoredParts(reader.dump(built, "rev-1"), compress=True)
    loaded = reader.persisted(stored.first, stored.read, "rev-1", ("b",)).with_reader(stored.read)
    stored.calls = 0
    terms = [("word0001", False), ("word0200", False), ("word0399", False), ("comm", True)]
    loaded.prefetch_postings(terms)
    assert stored.calls == 1
    for token, prefix in terms:
        got, want = rank.phrase_postings(loaded.arrays, token, prefix), rank.phrase_postings(built.arrays, token, prefix)
        assert [np.array_equal(g, w) for g, w in zip(got, want)] == [True, True]
    assert stored.calls == 1
    rows = [3, 150, 390]
    loaded.texts.prefetch(rows)
    assert stored.calls == 3
    assert [loaded.texts[r] for r in rows] == [built.texts[r] for r in rows]
    assert stored.calls == 3


def test_a_part_of_another_revision_is_never_read():
    built = _many_words_index()
    with patch.object(reader, "SNAPSHOT_PART_BYTES", 512):
        stored = StoredParts(reader.dump(built, "rev-1"))
    loaded = reader.persisted(stored.first, stored.read, "rev-1", ("b",))
    stored.rows = {k: ("rev-2", data) for k, (_, data) in stored.rows.items()}  # a later import's parts
    with pytest.raises(LookupError):
        rank.phrase_postings(loaded.with_reader(stored.read).arrays, "common", False)


def test_compressed_parts_are_a_fraction_of_the_plain_ones():
    blob = reader.dump(_many_words_index(), "rev-1")
    assert sum(map(len, reader.parts(blob, compress=True))) < len(blob) / 2


def test_a_blob_that_is_not_a_dump_has_no_revision():
    assert reader.revision_of(b"something else") is None


# -- SQLite ----------------------------------------------------------------------------------------

def test_sqlite_import_persists_the_arrays_of_its_fts5_index(tmp_path, versions):
    target = tmp_path / "pool.db"
    recipe.import_collection(target, versions[0], GENERATED_COLLECTION)
    persisted = reader.sqlite_persisted(target)
    assert persisted is not None
    assert_same_arrays(persisted, reader.build(target))


def test_a_fresh_process_searches_with_the_persisted_arrays(tmp_path, versions, monkeypatch, sync_arrays):
    target = tmp_path / "pool.db"
    recipe.import_collection(target, versions[0], GENERATED_COLLECTION)
    with SqlitePool(target) as pool:
        want = searches(pool)  # arrays built from FTS5 in this process (sync)

    def no_build(path):
        raise AssertionError("the persisted arrays should have been loaded")

    monkeypatch.setattr(reader, "build", no_build)
    with _fresh_process():
        with SqlitePool(target) as pool:
            assert pool.fulltext_index(pool.change_stamp()) is not None
            assert searches(pool) == want


def test_sqlite_arrays_persisted_for_other_content_are_not_used(tmp_path, versions, sync_arrays):
    old, new = tmp_path / "old.db", tmp_path / "new.db"
    recipe.import_collection(old, versions[0], GENERATED_COLLECTION)
    recipe.import_collection(new, versions[1], GENERATED_COLLECTION)
    with closing(sqlite3.connect(new)) as con:  # the other pool's snapshot planted in this one
        con.execute('delete from "doc$fts_snapshot"')
        con.execute("attach database ? as o", [str(old)])
        con.execute('insert into "doc$fts_snapshot" select * from o."doc$fts_snapshot"')
        con.commit()
    assert reader.sqlite_persisted(new) is None
    with _fresh_process(), SqlitePool(new) as pool:
        assert_same_arrays(pool.fulltext_index(pool.change_stamp()).arrays, reader.build(new))


def test_sqlite_pool_written_after_the_import_is_not_answered_from_the_old_snapshot(tmp_path, versions,
                                                                                      sync_arrays):
    target = tmp_path / "pool.db"
    recipe.import_collection(target, versions[0], GENERATED_COLLECTION)
    con = open_for_write(target)  # a writer that does not persist the arrays
    try:
        (topic,) = con.execute('select id from "doc$topic" order by id limit 1').fetchone()
        cur = con.execute('insert into "doc$chunk"(topic_id, ord, title, heading, body) '
                          "values (?, 999, 'zeplin', 'zeplin', 'zeplin')", [topic])
        con.execute('insert into "doc$chunk_fts"(rowid, title, heading, body) values (?, ?, ?, ?)',
                    [cur.lastrowid, "zeplin", "zeplin", "zeplin"])
    finally:
        con.close()
    assert reader.sqlite_persisted(target) is None
    with _fresh_process(), SqlitePool(target) as pool:
        assert [h.slug for h in fts_ranked(pool, "zeplin", UNRESTRICTED, limit=5)]


def test_a_failed_sqlite_import_leaves_the_old_snapshot(tmp_path, versions, monkeypatch, sync_arrays):
    target = tmp_path / "pool.db"
    recipe.import_collection(target, versions[0], GENERATED_COLLECTION)
    with SqlitePool(target) as pool:
        want = searches(pool)
    real = recipe.persist_fulltext

    def failing(con):
        real(con)
        raise RuntimeError("injected failure")

    monkeypatch.setattr(recipe, "persist_fulltext", failing)
    with pytest.raises(RuntimeError, match="injected failure"):
        recipe.import_collection(target, versions[1], GENERATED_COLLECTION)
    assert reader.sqlite_persisted(target) is not None
    with _fresh_process(), SqlitePool(target) as pool:
        assert searches(pool) == want


# -- Firebird --------------------------------------------------------------------------------------

def _fb_open(dsn):
    from knowspec.impl.docpool.storage import firebird

    return firebird.open_pool(PoolLocation("db", "db", "FIREBIRD", dsn))


@pytest.mark.firebird
def test_firebird_import_persists_the_index_a_fresh_process_loads(tmp_path, versions, monkeypatch, fb_ready):
    from knowspec.impl.docpool.storage import firebird

    dsn = fb_dsn(tmp_path, "snap")
    firebird.import_collection(dsn, versions[0], GENERATED_COLLECTION)
    with _fb_open(dsn) as pool:
        built = firebird.build_index(pool._rows, ("x",))
    want = _sqlite_hits(tmp_path, versions)
    monkeypatch.setattr(FtsIndex, "build", classmethod(lambda *a, **k: pytest.fail("index rebuilt")))
    with _fresh_process():
        with _fb_open(dsn) as pool:
            _loads_the_persisted_index(pool, built, want)
        firebird.close_connections()


@pytest.mark.firebird
def test_firebird_snapshot_of_an_older_stamp_is_rebuilt(tmp_path, versions, fb_ready):
    from knowspec.impl.docpool.storage import firebird

    dsn = fb_dsn(tmp_path, "stale")
    firebird.import_collection(dsn, versions[0], GENERATED_COLLECTION)
    con = firebird.connect(dsn)  # a writer that changes a chunk and moves the stamp, not the snapshot
    cur = con.cursor()
    cur.execute("update doc$chunk set body = 'zeplin' where id = (select min(id) from doc$chunk)")
    cur.execute("update doc$pool_state set stamp = stamp + 1 where id = 1")
    con.commit()
    con.close()
    with _fresh_process():
        with _fb_open(dsn) as pool:
            assert pool._persisted_index(pool.change_stamp()[1:]) is None
            assert [h.slug for h in fts_ranked(pool, "zeplin", UNRESTRICTED, limit=5)]
        firebird.close_connections()


@pytest.mark.firebird
def test_a_failed_firebird_import_leaves_the_old_snapshot(tmp_path, versions, monkeypatch, fb_ready):
    from knowspec.impl.docpool.storage import firebird

    dsn = fb_dsn(tmp_path, "atomic")
    firebird.import_collection(dsn, versions[0], GENERATED_COLLECTION)
    with _fb_open(dsn) as pool:
        want = searches(pool)
    real = firebird._insert

    def failing(cur, name, sql, rows):
        real(cur, name, sql, rows)
        if name == "fts_snapshot":
            raise RuntimeError("injected failure")

    monkeypatch.setattr(firebird, "_insert", failing)
    with pytest.raises(firebird.ImportFailed):
        firebird.import_collection(dsn, versions[1], GENERATED_COLLECTION)
    with _fresh_process():
        with _fb_open(dsn) as pool:
            assert pool._persisted_index(pool.change_stamp()[1:]) is not None
            assert searches(pool) == want
        firebird.close_connections()


@pytest.mark.firebird
def test_an_older_firebird_pool_gets_the_snapshot_table_and_slug_index_at_its_next_import(
        tmp_path, versions, fb_ready):
    from knowspec.impl.docpool.storage import firebird

    dsn = fb_dsn(tmp_path, "older")
    firebird.import_collection(dsn, versions[0], GENERATED_COLLECTION)
    con = firebird.connect(dsn)  # what a pool made before both were added looks like
    con.cursor().execute("drop index doc$topic_slug")
    con.cursor().execute("drop table doc$fts_snapshot")
    con.commit()
    con.close()
    with _fresh_process():
        with _fb_open(dsn) as pool:
            assert pool._persisted_index(pool.change_stamp()[1:]) is None
            assert searches(pool)  # built from the chunks
        firebird.close_connections()
    firebird.import_collection(dsn, versions[1], GENERATED_COLLECTION)
    with _fresh_process():
        with _fb_open(dsn) as pool:
            assert pool._persisted_index(pool.change_stamp()[1:]) is not None
            assert pool._rows("select count(*) from rdb$indices where rdb$index_name = 'DOC$TOPIC_SLUG'")[0][0] == 1
        firebird.close_connections()


@pytest.mark.firebird
def test_firebird_finds_the_topic_whose_long_slug_shares_the_indexed_prefix(tmp_path, fb_ready):
    from knowspec.impl.docpool.builder import build_pool
    from knowspec.impl.docpool.storage import firebird

    prefix = "p" * 230
    (tmp_path / "src" / "topics").mkdir(parents=True)
    for tail in ("a", "b"):
        (tmp_path / "src" / "topics" / f"{tail}.md").write_text(
            f"---\nslug: {prefix}-{tail}\ntitle: Konu {tail}\n---\n# Konu {tail}\n\nmetin {tail}\n", "utf-8")
    source = tmp_path / "src.db"
    build_pool(tmp_path / "src", source, "uzun", title="Uzun", erisim="herkes")
    dsn = fb_dsn(tmp_path, "slugs")
    firebird.import_collection(dsn, source, "uzun")
    with _fb_open(dsn) as pool:
        for tail in ("a", "b"):
            assert pool.topic(f"{prefix}-{tail}", UNRESTRICTED).title == f"Konu {tail}"
        assert pool.topic(prefix, UNRESTRICTED) is None


def _sqlite_hits(tmp_path, versions):
    """The searches' hits on a SQLite pool of the same import: what every storage must answer."""
    reference = tmp_path / "ref.db"
    recipe.import_collection(reference, versions[0], GENERATED_COLLECTION)
    with SqlitePool(reference) as pool:
        return searches(pool)


def _loads_the_persisted_index(pool, built: FtsIndex, want) -> None:
    """``pool``'s first search in a fresh process uses the index its import persisted: the same
    arrays and texts as a build, and SQLite's hits (``want``)."""
    loaded = pool.fulltext_index(pool.change_stamp())
    assert_same_arrays(loaded.arrays, built.arrays)
    assert list(loaded.texts) == list(built.texts)
    assert searches(pool) == want


@pytest.mark.postgres
def test_postgres_import_persists_the_index_a_fresh_process_loads(pg_dsn, tmp_path, versions, monkeypatch):
    from knowspec.impl.docpool.storage import postgres

    dsn = fresh_pg_database(pg_dsn, "knowspec_snapshot")
    postgres.import_collection(dsn, versions[0], GENERATED_COLLECTION)
    location = PoolLocation("db", "db", "POSTGRESQL", dsn)
    with postgres.open_pool(location) as pool:
        built = postgres.index_of(pool._rows, ("x",))
    want = _sqlite_hits(tmp_path, versions)
    monkeypatch.setattr(FtsIndex, "build", classmethod(lambda *a, **k: pytest.fail("index rebuilt")))
    with _fresh_process():
        with postgres.open_pool(location) as pool:
            _loads_the_persisted_index(pool, built, want)


@pytest.mark.postgres
def test_postgres_snapshot_of_an_older_counter_is_never_used(pg_dsn, versions):
    import psycopg

    from knowspec.impl.docpool.storage import postgres

    dsn = fresh_pg_database(pg_dsn, "knowspec_snapshot_stale")
    postgres.import_collection(dsn, versions[0], GENERATED_COLLECTION)
    with psycopg.connect(dsn, autocommit=True) as con:  # a writer that moves the counter, not the snapshot
        con.execute('set search_path to "ivd$docs"')
        con.execute("update doc$chunk set body = 'zeplin' where id = (select min(id) from doc$chunk)")
        con.execute("update doc$pool_state set stamp = stamp + 1 where id = 1")
    with _fresh_process():
        with postgres.open_pool(PoolLocation("db", "db", "POSTGRESQL", dsn)) as pool:
            assert pool._persisted_index(pool.change_stamp()[1:]) is None
            assert [h.slug for h in fts_ranked(pool, "zeplin", UNRESTRICTED, limit=5)]


# -- reading the snapshot part by part (PostgreSQL, Firebird) --------------------------------------

def _first_search_reads_only_some_parts(open_pool, import_collection, dsn, tmp_path, versions, monkeypatch,
                                        close=lambda: None):
    """With small parts: a fresh process's first search reads the snapshot's head and the parts
    of its terms and hits, not the whole snapshot, and every search still equals SQLite's."""
    from knowspec.impl.docpool.storage._sqlpool import SqlPool

    monkeypatch.setattr(reader, "SNAPSHOT_PART_BYTES", 1024)
    import_collection(dsn, versions[0], GENERATED_COLLECTION)
    want = _sqlite_hits(tmp_path, versions)
    asked: list[int] = []
    real = SqlPool._snapshot_parts

    def counting(self, wanted):
        found = real(self, wanted)
        asked.extend(k for k, _, _ in found)
        return found

    monkeypatch.setattr(SqlPool, "_snapshot_parts", counting)
    monkeypatch.setattr(FtsIndex, "build", classmethod(lambda *a, **k: pytest.fail("index rebuilt")))
    with _fresh_process():
        with open_pool(dsn) as pool:
            total = pool._rows(f"select count(*) from {reader.SNAPSHOT_TABLE}")[0][0]
            assert [h.slug for h in fts_ranked(pool, "fatura", UNRESTRICTED, limit=3)]
            assert 0 < len(set(asked)) < total / 2
        with open_pool(dsn) as pool:  # the parts read stay read: the next request reads none again
            before = len(asked)
            fts_ranked(pool, "fatura", UNRESTRICTED, limit=3)
            assert len(asked) == before
        with open_pool(dsn) as pool:
            assert searches(pool) == want
        close()


@pytest.mark.postgres
def test_postgres_first_search_reads_the_snapshot_head_and_only_the_parts_it_needs(
        pg_dsn, tmp_path, versions, monkeypatch):
    from knowspec.impl.docpool.storage import postgres

    dsn = fresh_pg_database(pg_dsn, "knowspec_snapshot_parts")
    _first_search_reads_only_some_parts(lambda d: postgres.open_pool(PoolLocation("db", "db", "POSTGRESQL", d)),
                                        postgres.import_collection, dsn, tmp_path, versions, monkeypatch)


@pytest.mark.firebird
def test_firebird_first_search_reads_the_snapshot_head_and_only_the_parts_it_needs(
        tmp_path, versions, monkeypatch, fb_ready):
    from knowspec.impl.docpool.storage import firebird

    _first_search_reads_only_some_parts(_fb_open, firebird.import_collection, fb_dsn(tmp_path, "parts"),
                                        tmp_path, versions, monkeypatch, close=firebird.close_connections)


# -- `knowspec pool reindex`: a pool imported before the index was persisted -----------------------

def test_reindex_persists_the_arrays_of_a_sqlite_pool_that_has_none(tmp_path, versions, sync_arrays):
    from knowspec.impl.config import Settings
    from knowspec.impl.docpool import catalog, importdoc

    settings = Settings(appdir=tmp_path)
    target = tmp_path / "shop-docs.db"
    catalog.register_database(settings.catalog_path, "shop", "SQLITE", str(target))
    catalog.execute_alter(settings.catalog_path, "ALTER DATABASE shop SET DOCUMENTS INTERNAL")
    recipe.import_collection(target, versions[0], GENERATED_COLLECTION)
    with closing(sqlite3.connect(target)) as con:  # what a pool made before snapshots looks like
        con.execute('drop table "doc$fts_snapshot"')
        con.commit()
    assert reader.sqlite_persisted(target) is None
    with SqlitePool(target) as pool:
        want = searches(pool)
    importdoc.reindex(settings, "shop")
    assert_same_arrays(reader.sqlite_persisted(target), reader.build(target))
    with _fresh_process(), SqlitePool(target) as pool:
        assert searches(pool) == want


@pytest.mark.postgres
def test_reindex_persists_the_index_of_a_postgres_pool_that_has_none(pg_dsn, tmp_path, versions):
    import psycopg

    from knowspec.impl.docpool.storage import postgres

    dsn = fresh_pg_database(pg_dsn, "knowspec_reindex")
    postgres.import_collection(dsn, versions[0], GENERATED_COLLECTION)
    location = PoolLocation("db", "db", "POSTGRESQL", dsn)
    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute('delete from "ivd$docs".doc$fts_snapshot')
    want = _sqlite_hits(tmp_path, versions)
    postgres.reindex(dsn)
    with _fresh_process():
        with postgres.open_pool(location) as pool:
            assert pool._persisted_index(pool.change_stamp()[1:]) is not None
            assert searches(pool) == want


@pytest.mark.firebird
def test_reindex_persists_the_index_of_a_firebird_pool_that_has_none(tmp_path, versions, fb_ready):
    from knowspec.impl.docpool.storage import firebird

    dsn = fb_dsn(tmp_path, "reindex")
    firebird.import_collection(dsn, versions[0], GENERATED_COLLECTION)
    con = firebird.connect(dsn)
    con.cursor().execute("drop table doc$fts_snapshot")
    con.commit()
    con.close()
    want = _sqlite_hits(tmp_path, versions)
    firebird.reindex(dsn)
    with _fresh_process():
        with _fb_open(dsn) as pool:
            assert pool._persisted_index(pool.change_stamp()[1:]) is not None
            assert searches(pool) == want
        firebird.close_connections()


def test_sqlite_first_search_reads_the_snapshot_head_and_only_the_parts_it_needs(tmp_path, versions, monkeypatch,
                                                                                  sync_arrays):
    _first_search_reads_only_some_parts(SqlitePool, recipe.import_collection, tmp_path / "pool.db",
                                        tmp_path, versions, monkeypatch)


@pytest.mark.firebird
def test_firebird_import_beside_another_collection_persists_the_whole_pools_index(tmp_path, versions, fb_ready):
    """The import builds its index from its own chunks in memory and the other collections'
    rows read back: the persisted index is the one the whole pool's rows give."""
    from knowspec.impl.docpool.storage import firebird
    from storages import SAMPLE_COLLECTION, build_sources

    dsn = fb_dsn(tmp_path, "two")
    firebird.import_collection(dsn, versions[0], GENERATED_COLLECTION)
    firebird.import_collection(dsn, build_sources(tmp_path)[SAMPLE_COLLECTION], SAMPLE_COLLECTION)
    firebird.import_collection(dsn, versions[1], GENERATED_COLLECTION)  # replaces one of the two
    with _fb_open(dsn) as pool:
        built = firebird.build_index(pool._rows, ("x",))
        persisted = pool._persisted_index(pool.change_stamp()[1:])  # not rebuilt here
        assert persisted is not None
        loaded = persisted.with_reader(pool._snapshot_parts)
        assert_same_arrays(loaded.arrays, built.arrays)
        assert list(loaded.texts) == list(built.texts)
        assert set(loaded.arrays.topic_collection) == {SAMPLE_COLLECTION, GENERATED_COLLECTION}
    firebird.close_connections()


@pytest.mark.postgres
def test_postgres_import_beside_another_collection_persists_the_whole_pools_index(pg_dsn, tmp_path, versions):
    """As on Firebird: the imported collection's rows come from memory, the others' are read back."""
    from knowspec.impl.docpool.storage import postgres
    from storages import SAMPLE_COLLECTION, build_sources

    dsn = fresh_pg_database(pg_dsn, "knowspec_two")
    postgres.import_collection(dsn, versions[0], GENERATED_COLLECTION)
    postgres.import_collection(dsn, build_sources(tmp_path)[SAMPLE_COLLECTION], SAMPLE_COLLECTION)
    postgres.import_collection(dsn, versions[1], GENERATED_COLLECTION)  # replaces one of the two
    with postgres.open_pool(PoolLocation("db", "db", "POSTGRESQL", dsn)) as pool:
        built = postgres.index_of(pool._rows, ("x",))
        persisted = pool._persisted_index(pool.change_stamp()[1:])
        assert persisted is not None
        loaded = persisted.with_reader(pool._snapshot_parts)
        assert_same_arrays(loaded.arrays, built.arrays)
        assert list(loaded.texts) == list(built.texts)
        assert set(loaded.arrays.topic_collection) == {SAMPLE_COLLECTION, GENERATED_COLLECTION}
