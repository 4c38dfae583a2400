"""Hybrid fusion glue, recipes, and the vector/hybrid plumbing with a stand-in embedder.

The vector score and RRF rules themselves are ``vectors.scoring`` and ``rules.rrf`` (tested there)."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
from hypothesis import given, strategies as st

from docpool_sample import RESTRICTED, call, make_env
from knowspec.impl.docpool import search
from knowspec.impl.docpool.search import RankedTopic, fuse, parse_weights, recipe


def _vec(values):
    v = np.asarray(values, dtype="<f4")
    return (v / np.linalg.norm(v)).tobytes()


def _r(tid, score, method, snippet=""):
    return RankedTopic(tid, "c", f"s{tid}", "", "", snippet, score, method)


def test_fuse_weights_vector_one_and_a_half_and_keeps_fts_snippets():
    fts = [_r(1, -9, "fts", "f1"), _r(2, -8, "fts", "f2")]
    vec = [_r(2, 0.9, "vector", "v2"), _r(3, 0.8, "vector", "v3")]
    fused = fuse(fts, vec, 10)
    by_id = {r.topic_id: r for r in fused}
    assert by_id[2].score == pytest.approx(1 / 62 + 1.5 / 61)
    assert [r.topic_id for r in fused] == [2, 3, 1]
    assert {r.method for r in fused} == {"fts+vector"}
    assert (by_id[2].snippet, by_id[3].snippet) == ("f2", "v3")


def test_fuse_without_full_text_is_the_vector_list():
    vec = [_r(3, 0.8, "vector"), _r(4, 0.7, "vector")]
    assert [(r.topic_id, r.score, r.method) for r in fuse([], vec, 1)] == [(3, 0.8, "vector")]


@given(st.lists(st.integers(1, 30), unique=True, max_size=25), st.lists(st.integers(1, 30), unique=True, max_size=25),
       st.integers(1, 50))
def test_fuse_is_sorted_and_limited(fts_ids, vec_ids, limit):
    fused = fuse([_r(i, 0, "fts") for i in fts_ids], [_r(i, 1.0 - i / 100, "vector") for i in sorted(vec_ids)], limit)
    assert len(fused) <= limit
    assert [r.score for r in fused] == sorted((r.score for r in fused), reverse=True)
    assert {r.topic_id for r in fused} <= set(fts_ids[:20]) | set(sorted(vec_ids)[:20])


def test_recipe_prefers_the_collection_row():
    meta = {"": {"a": "1", "b": "2"}, "x": {"a": "9"}}
    assert (recipe(meta, "a", "x"), recipe(meta, "b", "x"), recipe(meta, "a")) == ("9", "2", "1")


def test_parse_weights_falls_back_on_garbage():
    assert parse_weights("10, 5,1") == (10.0, 5.0, 1.0)
    assert parse_weights("x") == search.DEFAULT_WEIGHTS


@pytest.mark.parametrize("raw", ["nan, nan, nan", "1e308, -inf, 1e309", "10, 5, inf", "10, nan", "2e9, 1, 1"])
def test_weights_that_are_not_finite_numbers_within_bounds_give_the_default(raw):
    assert parse_weights(raw) == search.DEFAULT_WEIGHTS


def test_a_pool_whose_recipe_weights_are_nan_still_ranks_with_the_defaults(tmp_path):
    env = make_env(tmp_path)
    with sqlite3.connect(env.root / "sales.db") as con:
        con.execute("""update "doc$meta" set value = 'nan, nan, nan' where name = 'search_bm25_weights'""")
        if con.total_changes == 0:
            con.execute("""insert into "doc$meta"(collection, name, value) values ('', 'search_bm25_weights', 'nan, nan, nan')""")
    hits = call("doc_search", env.ctx(), query="bordro", limit=50)
    assert hits and all(isinstance(h["score"], float) and abs(h["score"]) < float("inf") for h in hits)


@pytest.fixture(scope="module")
def vec_env(tmp_path_factory):
    env = make_env(tmp_path_factory.mktemp("vec"))
    con = sqlite3.connect(env.root / "sales.db")
    rng = np.random.default_rng(7)
    ids = con.execute('select ch.id, ch.topic_id, t.slug from "doc$chunk" ch join "doc$topic" t on t.id = ch.topic_id').fetchall()
    for cid, tid, slug in ids:
        v = rng.normal(size=4) if slug != "mobil-sayim" else np.array([1.0, 0, 0, 0])
        con.execute('insert into "doc$chunk_vec" values (?, ?)', [cid, _vec(v)])
    con.commit()
    con.close()
    return env


@pytest.fixture
def fake_embedder(monkeypatch):
    from knowspec.impl.docpool.vectors import embedder
    monkeypatch.setattr(embedder, "query_vector", lambda *a, **k: np.array([1.0, 0, 0, 0], dtype=np.float32))


def test_vector_mode_ranks_by_cosine_over_allowed_topics(vec_env, fake_embedder):
    hits = call("doc_search", vec_env.ctx(), query="anything", mode="vector", collection=RESTRICTED, limit=3)
    assert hits[0]["slug"] == "mobil-sayim" and hits[0]["method"] == "vector"
    assert hits[0]["score"] == pytest.approx(1.0, abs=1e-5)
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    assert len(hits[0]["snippet"]) <= 200


def test_hybrid_mode_fuses_or_falls_back_to_vector(vec_env, fake_embedder):
    hits = call("doc_search", vec_env.ctx(), query="sayım", mode="hybrid", collection=RESTRICTED, limit=5)
    assert hits[0]["slug"] == "mobil-sayim" and hits[0]["method"] == "fts+vector"
    only_vec = call("doc_search", vec_env.ctx(), query="zzqqxx", mode="hybrid", collection=RESTRICTED, limit=5)
    assert only_vec and {h["method"] for h in only_vec} == {"vector"}


def test_vector_mode_respects_acl(vec_env, fake_embedder):
    from knowspec.impl.context import Caller
    hits = call("doc_search", vec_env.ctx(Caller("zeynep", (), unrestricted=False)), query="x", mode="vector", limit=50)
    assert {h["slug"] for h in hits if h["collection"] == RESTRICTED} <= {"user-roles"}


def test_vectors_are_reread_after_the_pool_changes(tmp_path, fake_embedder):
    env = make_env(tmp_path)
    con = sqlite3.connect(env.root / "sales.db")
    tid = lambda slug: con.execute('select id from "doc$topic" where slug = ? and collection = ?', [slug, RESTRICTED]).fetchone()[0]
    con.execute('insert into "doc$topic_vec" values (?, ?)', [tid("kisayollar"), _vec([1, 0, 0, 0])])
    con.commit()
    assert call("doc_search", env.ctx(), query="x", mode="vector", limit=1)[0]["slug"] == "kisayollar"
    con.execute('insert into "doc$topic_vec" values (?, ?)', [tid("genel-ayarlar"), _vec([1, 0, 0, 0])])
    con.execute('update "doc$topic_vec" set vec = ? where topic_id = ?', [_vec([0, 1, 0, 0]), tid("kisayollar")])
    con.commit()
    con.close()
    top = call("doc_search", env.ctx(), query="x", mode="vector", limit=1)[0]
    assert top["slug"] == "genel-ayarlar"
    assert top["score"] == pytest.approx(1.02, abs=1e-5)  # topic·q + 0.02
