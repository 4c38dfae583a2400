"""The SQLite pool's FTS5 index read into arrays (``fulltext.reader``) and ranked by the search
layer (``fulltext.search``) answers exactly like FTS5.

FTS5 is the reference: every comparison asks FTS5 itself (``fts5_reference.fts5_hits``: bm25()
and snippet() in SQL) and the search layer over the pool's arrays, and demands identical hits:
same topics, order, best chunks, scores to the last bit and snippets.
"""

from __future__ import annotations

import dataclasses

import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from knowspec.impl import runtime as process
from knowspec.impl.docpool.builder import build_pool
from knowspec.impl.docpool.fulltext import rank as fts_rank, reader
from knowspec.impl.docpool.fulltext.search import index_hits, search_hits
from knowspec.impl.docpool.storage.base import UNRESTRICTED, Access
from knowspec.impl.docpool.storage.sqlite import SqlitePool, open_for_write
from knowspec.impl.rules.fts_query import build_fts_query
from fts5_reference import fts5_hits
from storages import SAMPLE, SAMPLE_COLLECTION, WORDS, query_words, write_generated_corpus

ACCESSES = [UNRESTRICTED, Access(frozenset({"muhasebe"})), Access(frozenset({"*"})), Access(frozenset())]


def _fts_mode(monkeypatch, mode: str) -> None:
    """The runtime's full-text arrays setting (``KNOWSPEC_FTS_ARRAYS``, read once) for this test."""
    runtime = process.current()
    monkeypatch.setattr(runtime, "settings", dataclasses.replace(runtime.settings, fts_arrays=mode))


@pytest.fixture(scope="module")
def pools(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("fts-arrays")
    corpus = root / "corpus"
    write_generated_corpus(corpus, seed=11, topics=60)
    generated, sample = root / "generated.db", root / "sample.db"
    build_pool(corpus, generated, "uretilen", title="Üretilen", erisim="kisitli")
    build_pool(SAMPLE, sample, SAMPLE_COLLECTION, title="İç belgeler", erisim="kisitli")
    return {"uretilen": generated, SAMPLE_COLLECTION: sample}


def _both(path: Path, monkeypatch, match: str, access, **kw):
    with SqlitePool(path) as pool:
        want = fts5_hits(pool, match, access, **kw)
        got = index_hits(pool, pool.fulltext_index(pool.change_stamp()), match, access, **kw)
    return want, got


@pytest.mark.parametrize("collection", ["uretilen", SAMPLE_COLLECTION])
@pytest.mark.parametrize("weights", [(10.0, 5.0, 1.0), (1.0, 1.0, 1.0), (0.1, 2.5, 0.3)])
def test_arrays_rank_and_cut_snippets_exactly_like_fts5(pools, monkeypatch, collection, weights):
    queries = query_words(5, 60) + ["köprü ışık", "straße", "istanbul", "zz", "ka", "İSTANBUL Boğazı"]
    for query in queries:
        built = build_fts_query(query)
        for match in filter(None, (built.all_words, built.any_word) if built else ()):
            for access in ACCESSES:
                for only in (None, collection):
                    want, got = _both(pools[collection], monkeypatch, match, access, limit=10, weights=weights,
                                      snippet_column="body", collection=only)
                    assert got == want, (match, access, only)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(st.sampled_from(WORDS).flatmap(lambda w: st.integers(2, len(w)).map(lambda n: w[:n])),
                      min_size=1, max_size=4),
       limit=st.integers(0, 15), column=st.sampled_from(["title", "heading", "body", "nothing"]),
       weights=st.lists(st.sampled_from([0.5, 1.0, 3.0, 10.0, 0.3]), max_size=4))
def test_arrays_equal_fts5_for_any_words_limit_column_and_weights(pools, monkeypatch, words, limit, column, weights):
    built = build_fts_query(" ".join(words))
    for match in filter(None, (built.all_words, built.any_word)):
        want, got = _both(pools["uretilen"], monkeypatch, match, UNRESTRICTED, limit=limit,
                          weights=tuple(weights), snippet_column=column)
        assert got == want


def test_arrays_filter_by_linked_entity_like_fts5(pools, monkeypatch):
    for form in ("TfrmUretilen0", "TfrmUretilen3"):
        for access in ACCESSES:
            want, got = _both(pools["uretilen"], monkeypatch, '"köprü"*', access, limit=10,
                              weights=(10.0, 5.0, 1.0), snippet_column="body", linked_to=("form_class", form))
            assert got == want


def test_totals_are_those_of_the_index(pools):
    arrays = reader.build(pools["uretilen"])
    assert arrays.n_rows == len(arrays.row_chunk) > 0
    assert arrays.total_tokens == int(arrays.row_len.sum())
    assert list(arrays.terms) == sorted(arrays.terms)


def test_a_word_fts5_splits_into_two_tokens_is_not_a_single_token_phrase():
    assert fts_rank.query_phrases('"köprü ışık"*') is None
    assert fts_rank.query_phrases('"kopru"* AND "isik"') == ([("kopru", True), ("isik", False)], "AND")


def test_off_mode_never_builds(pools, monkeypatch):
    cache = reader.FtsArraysCache(process.Runtime())
    monkeypatch.setattr(reader, "build", lambda path: pytest.fail("built in off mode"))
    assert cache.get(pools["uretilen"], ("stamp",), mode="off") is None


def _without_snapshot(path: Path, folder: Path) -> Path:
    """A copy of a pool without the arrays its build persisted (a pool made before they were)."""
    copy = folder / path.name
    copy.write_bytes(path.read_bytes())
    con = open_for_write(copy)
    con.execute('delete from "doc$fts_snapshot"')
    con.close()
    return copy


def test_background_mode_gives_nothing_until_the_arrays_are_built(tmp_path, pools, monkeypatch):
    path = _without_snapshot(pools["uretilen"], tmp_path)
    release, real_build = threading.Event(), reader.build

    def slow_build(path):
        release.wait(10)
        return real_build(path)

    monkeypatch.setattr(reader, "build", slow_build)
    cache = reader.FtsArraysCache(process.Runtime())
    assert cache.get(path, ("v1",), mode="background") is None
    assert cache.get(path, ("v1",), mode="background") is None  # still building, no second build
    release.set()
    assert cache.get(path, ("v1",), mode="sync") is not None


def test_a_changed_pool_is_read_again(tmp_path, pools, monkeypatch):
    path = tmp_path / "pool.db"
    path.write_bytes(pools["uretilen"].read_bytes())
    _fts_mode(monkeypatch, "sync")
    kw = dict(limit=5, weights=(10.0, 5.0, 1.0), snippet_column="body")
    with SqlitePool(path) as pool:
        assert index_hits(pool, pool.fulltext_index(pool.change_stamp()), '"zeplin"*', UNRESTRICTED, **kw) == []
    con = open_for_write(path)
    topic = con.execute('select id from "doc$topic" order by id limit 1').fetchone()[0]
    con.execute('insert into "doc$chunk"(topic_id, ord, title, heading, body) values (?, 999, ?, ?, ?)',
                [topic, "Zeplin", "", "zeplinler uçar"])
    chunk = con.execute("select last_insert_rowid()").fetchone()[0]
    con.execute('insert into "doc$chunk_fts"(rowid, title, heading, body) values (?, ?, ?, ?)',
                [chunk, "zeplin", "", "zeplinler ucar"])
    con.close()
    with SqlitePool(path) as pool:
        hits = index_hits(pool, pool.fulltext_index(pool.change_stamp()), '"zeplin"*', UNRESTRICTED, **kw)
    assert [h.chunk_id for h in hits] == [chunk]
    assert hits[0].snippet == "[zeplinler] uçar"


def test_instance_order_check_sees_any_step_back():
    import numpy as np

    term, docs, cols = np.array([0, 0, 0, 1]), np.array([5, 5, 7, 1]), np.array([0, 2, 1, 0])
    assert reader._sorted_by(term, docs, cols)
    assert not reader._sorted_by(term, docs, np.array([2, 0, 1, 0]))
    assert not reader._sorted_by(term, np.array([5, 7, 5, 1]), cols)
    assert not reader._sorted_by(np.array([1, 0, 0, 1]), docs, cols)


def test_hits_of_a_topic_an_import_removed_are_ranked_again_from_the_new_postings(tmp_path, pools):
    path = tmp_path / "pool.db"
    path.write_bytes(pools["uretilen"].read_bytes())
    kw = dict(limit=10, weights=(10.0, 5.0, 1.0), snippet_column="body")
    with SqlitePool(path) as pool:
        old_stamp = pool.change_stamp()
        before = search_hits(pool, '"kopru"*', UNRESTRICTED, stamp=old_stamp, **kw)
    gone = before[0].topic_id
    con = open_for_write(path)
    con.execute('delete from "doc$chunk_fts" where rowid in (select id from "doc$chunk" where topic_id = ?)', [gone])
    con.execute('delete from "doc$chunk" where topic_id = ?', [gone])
    con.execute('delete from "doc$topic" where id = ?', [gone])
    con.close()
    with SqlitePool(path) as pool:
        stale = pool.fulltext_index(old_stamp)  # still the arrays of the old stamp
        assert index_hits(pool, stale, '"kopru"*', UNRESTRICTED, **kw) is None
        again = search_hits(pool, '"kopru"*', UNRESTRICTED, stamp=old_stamp, **kw)
        assert again == fts5_hits(pool, '"kopru"*', UNRESTRICTED, **kw)
    assert gone not in {h.topic_id for h in again} and len(again) == len(before)


def test_an_index_that_cannot_be_read_is_a_driver_error_not_an_empty_answer(tmp_path, pools, monkeypatch):
    import sqlite3

    path = _without_snapshot(pools["uretilen"], tmp_path)  # the arrays must be read from FTS5

    def broken(_path):
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(reader, "build", broken)
    with SqlitePool(path) as pool:
        with pytest.raises(pool.driver_errors, match="could not be read"):
            search_hits(pool, '"kopru"*', UNRESTRICTED, limit=5, weights=(1.0,), snippet_column="body")
