"""PostgreSQL full text: an in-memory index per import, no full-text SQL once it is built, a real
snapshot per request, a settled import."""

from __future__ import annotations

import itertools

import pytest

from knowspec.impl.docpool.catalog import PoolLocation
from knowspec.impl.docpool.search import fts_ranked
from knowspec.impl.docpool.storage import postgres
from knowspec.impl.docpool.storage.base import UNRESTRICTED, Access
from knowspec.impl.docpool.builder import build_pool
from storages import GENERATED_COLLECTION, fresh_pg_database, pg_dsn, write_generated_corpus  # noqa: F401

pytestmark = pytest.mark.postgres
_names = itertools.count()


@pytest.fixture(scope="module")
def dsn(pg_dsn, tmp_path_factory):
    root = tmp_path_factory.mktemp("pg-search-src")
    write_generated_corpus(root / "corpus", seed=4, topics=40)  # every 5th topic: acl [muhasebe]
    source = root / "source.db"
    build_pool(root / "corpus", source, GENERATED_COLLECTION, title="Üretilen", erisim="kisitli")
    dsn = fresh_pg_database(pg_dsn, f"knowspec_search{next(_names)}")
    postgres.import_collection(dsn, source, GENERATED_COLLECTION)
    return dsn


def _open(dsn):
    return postgres.open_pool(PoolLocation("db", "db", "POSTGRESQL", dsn))


def test_a_request_reads_one_read_only_repeatable_read_snapshot(dsn):
    with _open(dsn) as pool:
        assert pool._rows("select current_setting('transaction_isolation'), "
                          "current_setting('transaction_read_only')") == [("repeatable read", "on")]


def test_connections_go_back_to_the_pool_as_they_came(dsn):
    with _open(dsn) as pool:
        con = pool._con
    assert con.autocommit is False and con.info.transaction_status == 0  # IDLE: imports stay transactional
    with postgres.connection_pool(dsn).connection() as again:
        assert again.autocommit is False


def _statements(monkeypatch) -> list[str]:
    seen, real = [], postgres.PostgresPool._rows

    def rows(self, sql, params=()):
        seen.append(sql)
        return real(self, sql, params)

    monkeypatch.setattr(postgres.PostgresPool, "_rows", rows)
    return seen


def test_a_warm_search_reads_no_chunk_rows_and_runs_no_ranking_sql(dsn, monkeypatch):
    with _open(dsn) as pool:
        fts_ranked(pool, "köprü", UNRESTRICTED, limit=5)  # builds the index if needed
    seen = _statements(monkeypatch)
    with _open(dsn) as pool:
        hits = fts_ranked(pool, "köprü ışık", UNRESTRICTED, limit=5)
    assert hits and any("[" in h.snippet for h in hits)
    assert not any("doc$chunk" in sql for sql in seen), seen
    assert not any(word in sql for sql in seen for word in ("ts_rank", "ts_headline", "tsquery")), seen


def test_the_index_is_built_once_per_import(pg_dsn, tmp_path):
    own = fresh_pg_database(pg_dsn, f"knowspec_search{next(_names)}")
    sources = []
    for version, topics in ((1, 15), (2, 9)):
        write_generated_corpus(tmp_path / f"c{version}", seed=version, topics=topics)
        sources.append(tmp_path / f"v{version}.db")
        build_pool(tmp_path / f"c{version}", sources[-1], GENERATED_COLLECTION, title="v", erisim="herkes")
    postgres.import_collection(own, sources[0], GENERATED_COLLECTION)
    with _open(own) as pool:
        first = pool.fulltext_index(pool.change_stamp())
    with _open(own) as pool:
        assert pool.fulltext_index(pool.change_stamp()).arrays.term_start is first.arrays.term_start
    postgres.import_collection(own, sources[1], GENERATED_COLLECTION)
    with _open(own) as pool:
        again = pool.fulltext_index(pool.change_stamp())
        topics = pool.topic_ids(UNRESTRICTED)
    assert again is not first and again.arrays.topic_id.tolist() == topics


def test_limit_and_filters_cut_after_the_best_chunk_of_each_topic(dsn):
    with _open(dsn) as pool:
        everything = fts_ranked(pool, "köprü", UNRESTRICTED, limit=50)
        first = fts_ranked(pool, "köprü", UNRESTRICTED, limit=3)
        restricted = fts_ranked(pool, "köprü", Access(frozenset({"muhasebe"})), limit=50)
        stranger = fts_ranked(pool, "köprü", Access(frozenset()), limit=50)
    assert first == everything[:3]
    assert [h.score for h in everything] == sorted(h.score for h in everything)
    assert {h.slug for h in stranger} < {h.slug for h in restricted} <= {h.slug for h in everything}


def test_an_import_leaves_statistics_and_a_flushed_gin_index(dsn):
    with _open(dsn) as pool:
        analyzed = pool._rows("select relname from pg_stat_user_tables where schemaname = ? and last_analyze "
                              "is not null", [postgres.SCHEMA])
    assert {"doc$chunk", "doc$topic"} <= {r[0] for r in analyzed}


def test_reindex_refreshes_the_planner_statistics_too(pg_dsn, tmp_path, monkeypatch):
    own = fresh_pg_database(pg_dsn, f"knowspec_search{next(_names)}")
    write_generated_corpus(tmp_path / "corpus", seed=5, topics=12)
    build_pool(tmp_path / "corpus", tmp_path / "source.db", GENERATED_COLLECTION, title="v", erisim="herkes")
    monkeypatch.setattr(postgres, "_settle", lambda con: None)
    postgres.import_collection(own, tmp_path / "source.db", GENERATED_COLLECTION)
    monkeypatch.undo()

    def analyzed() -> set[str]:
        with _open(own) as pool:
            rows = pool._rows("select relname from pg_stat_user_tables where schemaname = ? and last_analyze "
                              "is not null", [postgres.SCHEMA])
        return {r[0] for r in rows}

    assert not {"doc$chunk", "doc$topic"} <= analyzed()
    postgres.reindex(own)
    assert {"doc$chunk", "doc$topic"} <= analyzed()
