"""doc_search vector and hybrid modes through the tool, on a synthetic pool with hand-set vectors.

The pool ``sales`` holds two collections:

- ``big``: 100 restricted topics (ACL ``patron``, linked to module STK) whose chunks lie close to
  the query vector (cosine 0.90-0.99) and mention "kalem";
- ``small``: 3 public topics (``small-0..2``) with chunk cosines 0.1 / 0.2 / 0.3; small-0 and
  small-2 are linked to module FIN; "kalem" is frequent in small-0, rare in small-1, absent in small-2.

So every filter (collection, ACL, module) has 100 better-scoring rows to get past: applied after
the top-80 cut, it would leave nothing. The query embedder is replaced by a fixed unit vector.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from knowspec.impl import runtime as process
from knowspec.impl.config import Settings
from knowspec.impl.context import CallContext, Caller
from knowspec.impl.docpool import catalog, search, tools
from knowspec.impl.docpool.builder import build_pool
from knowspec.impl.docpool.recipe import import_collection
from knowspec.impl.docpool.storage.base import Access
from knowspec.impl.docpool.storage.sqlite import SqlitePool
from knowspec.impl.docpool.vectors import embedder as emb
from knowspec.impl.docpool.vectors.scoring import pool_vector_cache
from knowspec.impl.errors import ToolError

Q = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
SMALL_COSINES = {"small-0": 0.1, "small-1": 0.2, "small-2": 0.3}
SMALL_BODIES = {
    "small-0": "kalem kalem kalem defter",
    "small-1": "Uzun bir metin: " + "defter silgi cetvel " * 30 + "ve bir kalem.",
    "small-2": "defter ve silgi",
}
SMALL_MODULES = {"small-0": "FIN", "small-1": "SAT", "small-2": "FIN"}


def _unit_with_cosine(cos: float, salt: int) -> bytes:
    """A unit vector whose dot product with ``Q`` is ``cos``."""
    rest = np.sqrt(1 - cos * cos)
    other = [0.0, 0.0, 0.0]
    other[salt % 3] = rest
    return np.array([cos, *other], dtype="<f4").tobytes()


def _topic(folder: Path, slug: str, body: str, extra: str) -> None:
    (folder / f"{slug}.md").write_text(f"---\nslug: {slug}\ntitle: {slug}\n{extra}---\n{body}\n", "utf-8")


@pytest.fixture(scope="module")
def settings(tmp_path_factory) -> Settings:
    root = tmp_path_factory.mktemp("vecsearch")
    big, small = root / "big", root / "small"
    big.mkdir()
    small.mkdir()
    for i in range(100):
        _topic(big, f"big-{i:03d}", f"kalem numara {i}", "acl: [patron]\nmodule: STK\n")
    for slug, body in SMALL_BODIES.items():
        _topic(small, slug, body, f"module: {SMALL_MODULES[slug]}\n")
    build_pool(big, root / "big.db", "big", erisim="kisitli")
    build_pool(small, root / "small.db", "small", erisim="herkes")
    settings = Settings(appdir=root)
    pool_file = root / "sales.db"
    catalog.register_database(settings.catalog_path, "sales", "SQLITE", str(pool_file))
    catalog.execute_alter(settings.catalog_path, "ALTER DATABASE sales SET DOCUMENTS INTERNAL")
    import_collection(pool_file, root / "big.db", "big")
    import_collection(pool_file, root / "small.db", "small")
    with sqlite3.connect(pool_file) as con:
        rows = con.execute('select ch.id, t.slug from "doc$chunk" ch join "doc$topic" t on t.id = ch.topic_id').fetchall()
        for chunk_id, slug in rows:
            cos = SMALL_COSINES[slug] if slug in SMALL_COSINES else 0.90 + int(slug[-3:]) / 1100
            con.execute('insert into "doc$chunk_vec"(chunk_id, vec) values (?, ?)', [chunk_id, _unit_with_cosine(cos, chunk_id)])
    settings.default_database = "sales"
    return settings


@pytest.fixture
def fixed_query(monkeypatch):
    monkeypatch.setattr(emb, "query_vector", lambda *a, **k: Q.copy())


def _ctx(settings: Settings, user: str | None = None) -> CallContext:
    caller = Caller(user, (), unrestricted=False) if user else Caller()
    return CallContext(caller=caller, settings=settings)


def _search(ctx: CallContext, query: str = "kalem", mode: str = "vector", limit: int = 10, collection=None):
    args = SimpleNamespace(query=query, mode=mode, limit=limit, collection=collection, database=None)
    return tools.doc_search(args, ctx).structured["results"]


def _slugs(hits) -> list[str]:
    return [h["slug"] for h in hits]


def test_collection_filter_applies_before_the_top_80_cut(settings, fixed_query):
    hits = _search(_ctx(settings), collection="small")
    assert _slugs(hits) == ["small-2", "small-1", "small-0"]
    assert [h["score"] for h in hits] == pytest.approx([0.3, 0.2, 0.1], abs=1e-6)


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_acl_applies_before_ranking(settings, fixed_query, mode):
    outsider = _search(_ctx(settings, "zeynep"), mode=mode, limit=50)
    assert sorted(_slugs(outsider)) == ["small-0", "small-1", "small-2"]
    insider = _search(_ctx(settings, "patron"), mode=mode, limit=50)
    assert any(s.startswith("big-") for s in _slugs(insider))
    assert len(insider) == (50 if mode == "vector" else 40)  # hybrid: at most top 20 + top 20


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_module_filter_applies_before_ranking(settings, fixed_query, mode):
    with SqlitePool(settings.appdir / "sales.db") as pool:
        ranked = search.search_pool(_ctx(settings), pool, "kalem defter", search.UNRESTRICTED, mode=mode,
                                    limit=10, linked_to=("module", "fin"))
    assert sorted(r.slug for r in ranked) == ["small-0", "small-2"]


def test_hybrid_score_is_the_weighted_rrf_of_both_rank_lists(settings, fixed_query):
    ctx = _ctx(settings)
    assert _slugs(_search(ctx, mode="fts", collection="small")) == ["small-0", "small-1"]   # fts ranks 1, 2
    assert _slugs(_search(ctx, mode="vector", collection="small")) == ["small-2", "small-1", "small-0"]
    hits = _search(ctx, mode="hybrid", collection="small")
    expected = {"small-1": 1 / 62 + 1.5 / 62, "small-0": 1 / 61 + 1.5 / 63, "small-2": 1.5 / 61}
    assert _slugs(hits) == ["small-1", "small-0", "small-2"]
    assert {h["slug"]: h["score"] for h in hits} == pytest.approx(expected, rel=1e-12)
    assert {h["method"] for h in hits} == {"fts+vector"}


def test_hybrid_without_full_text_hits_is_the_vector_ranking(settings, fixed_query):
    ctx = _ctx(settings, "patron")
    for limit in (3, 30):
        vector = _search(ctx, query="zzqqxx", mode="vector", limit=limit)
        hybrid = _search(ctx, query="zzqqxx", mode="hybrid", limit=limit)
        assert len(hybrid) == limit
        assert [(h["slug"], h["score"]) for h in hybrid] == [(h["slug"], h["score"]) for h in vector]
        assert {h["method"] for h in hybrid} == {"vector"}


def test_vector_snippet_is_the_start_of_the_best_chunk(settings, fixed_query):
    hits = _search(_ctx(settings), collection="small")
    by_slug = {h["slug"]: h["snippet"] for h in hits}
    assert by_slug["small-1"] == SMALL_BODIES["small-1"][:200]


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_missing_model_pack_is_reported_and_fts_still_answers(settings, mode):
    emb.clear_cache()
    with pytest.raises(ToolError) as err:
        _search(_ctx(settings), mode=mode)
    assert (err.value.code, err.value.message) == ("embedding_unavailable", "embedding model not found")
    assert _search(_ctx(settings), mode="fts")


def test_missing_runtime_is_reported_and_fts_still_answers(settings, monkeypatch, tmp_path):
    pack = tmp_path / "pack"
    pack.mkdir()
    for name in ("model_int8.onnx", "tokenizer.json"):
        (pack / name).write_bytes(b"x")
    monkeypatch.setattr(Settings, "model_dir", property(lambda self: pack))
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    emb.clear_cache()
    with pytest.raises(ToolError) as err:
        _search(_ctx(settings), mode="hybrid")
    assert (err.value.code, err.value.message) == ("embedding_unavailable", "embedding runtime not found")
    assert _search(_ctx(settings), mode="fts")


def test_vectors_are_read_once_per_pool_state(settings, fixed_query, monkeypatch):
    reads = []
    original = SqlitePool.iter_vectors
    monkeypatch.setattr(SqlitePool, "iter_vectors",
                        lambda self, which, access: reads.append(which) or original(self, which, access))
    pool_vector_cache(process.current()).clear()
    for user in (None, "zeynep", "patron"):
        _search(_ctx(settings, user))
    assert sorted(reads) == ["chunk", "topic"]
    with sqlite3.connect(settings.appdir / "sales.db") as con:  # an import-like change moves the stamp
        con.execute('insert into "doc$meta"(collection, name, value) values (\'small\', \'touched\', \'1\')')
    _search(_ctx(settings))
    assert sorted(reads) == ["chunk", "chunk", "topic", "topic"]


def test_a_hybrid_call_reads_recipes_stamp_and_allowed_topics_once(settings, fixed_query, monkeypatch):
    """Two full-text passes (AND finds nothing, then OR) and the vector ranking share one read
    (the stamp is read once more after the allowed ids, which are kept only when it held)."""
    runtime = process.current()  # the arrays answer, so full text needs the allowed ids
    monkeypatch.setattr(runtime, "settings", dataclasses.replace(runtime.settings, fts_arrays="sync"))
    search.allowed_topics_cache(runtime).clear()
    calls: dict[str, int] = {}
    for name in ("meta", "change_stamp", "topic_ids"):
        real = getattr(SqlitePool, name)

        def counted(self, *a, _real=real, _name=name, **k):
            calls[_name] = calls.get(_name, 0) + 1
            return _real(self, *a, **k)

        monkeypatch.setattr(SqlitePool, name, counted)
    hits = _search(_ctx(settings, "patron"), query="kalem yokboyle", mode="hybrid")
    assert {h["method"] for h in hits} == {"fts+vector"}
    assert calls == {"meta": 1, "change_stamp": 2, "topic_ids": 1}
    calls.clear()
    _search(_ctx(settings, "patron"), query="kalem yokboyle", mode="hybrid")
    assert calls == {"meta": 1, "change_stamp": 1}  # the kept ids answer


def _counting_topic_ids(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = SqlitePool.topic_ids
    monkeypatch.setattr(SqlitePool, "topic_ids", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    return calls


@pytest.mark.parametrize("mode", ["vector", "hybrid", "fts"])
def test_filtered_searches_read_the_allowed_topics_once_while_the_pool_is_unchanged(settings, fixed_query,
                                                                                    monkeypatch, mode):
    search.allowed_topics_cache(process.current()).clear()
    calls = _counting_topic_ids(monkeypatch)
    first = [_search(_ctx(settings, "patron"), mode=mode, collection="big", limit=20) for _ in range(3)]
    assert len(calls) == 1
    assert first[0] == first[1] == first[2]
    outsider = _search(_ctx(settings, "zeynep"), mode=mode, limit=20)  # another caller's access: its own read
    assert len(calls) == 2
    assert not any(s.startswith("big-") for s in _slugs(outsider))


def test_the_allowed_topics_are_read_again_once_the_pool_changes(settings, fixed_query, monkeypatch):
    search.allowed_topics_cache(process.current()).clear()
    calls = _counting_topic_ids(monkeypatch)
    _search(_ctx(settings, "zeynep"), mode="vector", limit=50)
    stamp = SqlitePool.change_stamp
    monkeypatch.setattr(SqlitePool, "change_stamp", lambda self: (*stamp(self), "after an import"))
    _search(_ctx(settings, "zeynep"), mode="vector", limit=50)
    assert len(calls) == 2


@pytest.mark.parametrize("query", ["kalem", "zzqqxx"])  # with and without full-text hits
@pytest.mark.parametrize("limit", [3, 30])
def test_hybrid_answers_the_same_whether_the_matrices_were_loaded_or_not(settings, fixed_query, query, limit):
    ctx = _ctx(settings, "patron")
    pool_vector_cache(process.current()).clear()
    cold = _search(ctx, query=query, mode="hybrid", limit=limit)   # matrices load after full text
    warm = _search(ctx, query=query, mode="hybrid", limit=limit)   # ranked on the worker thread
    assert cold == warm
    assert len(warm) == (limit if query == "zzqqxx" else min(limit, 40))


def test_hybrid_ranks_vectors_off_the_calling_thread_once_the_matrices_are_loaded(settings, fixed_query, monkeypatch):
    import threading

    from knowspec.impl.docpool.vectors import scoring

    threads = []
    real = scoring.vector_rank
    monkeypatch.setattr(scoring, "vector_rank",
                        lambda *a, **k: threads.append(threading.current_thread()) or real(*a, **k))
    ctx = _ctx(settings)
    _search(ctx, mode="vector")  # loads the matrices
    threads.clear()
    assert _search(ctx, mode="hybrid")
    assert threads and threading.current_thread() not in threads


HYBRID_QUERIES = ["kalem", "kalem defter", "defter silgi", "kalem yokboyle", "zzqqxx"]


@pytest.mark.parametrize("access", [search.UNRESTRICTED, Access(frozenset({"patron"})), Access(frozenset())])
@pytest.mark.parametrize("limit", [1, 3, 10, 30])
def test_hybrid_answer_is_the_fusion_of_both_lists_with_every_snippet_cut(settings, fixed_query, access, limit):
    """Snippets are cut only for the hits the fusion keeps; the answer is still the fusion of the
    full-text list (every snippet cut) and the vector list."""
    ctx = _ctx(settings)
    with SqlitePool(settings.appdir / "sales.db") as pool:
        for query in HYBRID_QUERIES:
            got = search.search_pool(ctx, pool, query, access, mode="hybrid", limit=limit)
            fts = search.fts_ranked(pool, query, access, limit=search.HYBRID_TOP)
            depth = search.HYBRID_TOP if fts else limit
            vec = search.search_pool(ctx, pool, query, access, mode="vector", limit=depth)
            assert got == search.fuse(fts, vec, limit, depth), query
            assert all(r.snippet for r in got if "fts" in r.method), query


def test_hybrid_cuts_snippets_only_for_the_hits_it_answers_with(settings, fixed_query, monkeypatch):
    from knowspec.impl.docpool.fulltext import search as fulltext

    cut = []
    for name in ("chunk_snippet", "phrase_snippet"):
        real = getattr(fulltext, name)
        monkeypatch.setattr(fulltext, name, lambda *a, _real=real, **k: cut.append(a) or _real(*a, **k))
    patron = Access(frozenset({"patron"}))
    with SqlitePool(settings.appdir / "sales.db") as pool:
        fts_ids = {r.topic_id for r in search.fts_ranked(pool, "kalem", patron, limit=search.HYBRID_TOP)}
        assert len(fts_ids) == search.HYBRID_TOP and len(cut) == search.HYBRID_TOP
        for limit in (3, 30):  # the vector list's best topics lead; deeper, full-text ones join
            cut.clear()
            hits = search.search_pool(_ctx(settings), pool, "kalem", patron, mode="hybrid", limit=limit)
            shown = [h for h in hits if h.topic_id in fts_ids]
            assert len(cut) == len(shown) < search.HYBRID_TOP
            assert all(h.snippet.startswith("[kalem]") for h in shown)
        assert shown
