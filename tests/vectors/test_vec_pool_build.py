"""The pool builder's vector columns (``--model``), IMPORTDOC copying them, and model identity checks.

Uses the tiny random pack (``hf_pack``): its vectors mean nothing, but they go through the real
tokenizer + ONNX Runtime path, so shapes, prefixes, identity rows and refusals are real.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, strategies as st

from knowspec.impl.config import Settings
from knowspec.impl.context import CallContext
from knowspec.impl.docpool import tools
from knowspec.impl.docpool.builder import add_pool_build_parser, build_pool
from knowspec.impl.docpool.recipe import ImportRefused, import_collection
from knowspec.impl.docpool.vectors import embedder as emb
from knowspec.impl.docpool.vectors.pool_embed import (MAX_PASSAGE_CHARS, PoolModelIdentity, chunk_passage,
                                                     identity_conflict, topic_passage)
from knowspec.impl.docpool.vectors.scoring import decode_vectors
from knowspec.impl.errors import ToolError
from tool_args import tool_args

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "help"


def _meta(db: Path) -> dict[str, str]:
    with sqlite3.connect(db) as con:
        return dict(con.execute('select name, value from "doc$meta" where collection = \'\'').fetchall())


def _count(db: Path, table: str) -> int:
    with sqlite3.connect(db) as con:
        return con.execute(f'select count(*) from "doc${table}"').fetchone()[0]


@pytest.fixture(scope="module")
def vec_pool(hf_pack, tmp_path_factory):
    pack, meta, _ = hf_pack
    out = tmp_path_factory.mktemp("vecpool") / "help.db"
    counts = build_pool(SAMPLE, out, "netsim-help", title="Yardım", model_dir=pack)
    return out, counts, pack, meta


def test_builder_stores_one_vector_per_topic_and_chunk(vec_pool):
    out, counts, _, meta = vec_pool
    assert counts["topic_vec"] == counts["topic"] == _count(out, "topic") > 0
    assert counts["chunk_vec"] == counts["chunk"] == _count(out, "chunk") > counts["topic"]
    with sqlite3.connect(out) as con:
        blobs = [r[0] for r in con.execute('select vec from "doc$chunk_vec"')]
    vectors = decode_vectors(blobs, meta["dim"])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)


def test_builder_records_model_identity_and_keeps_the_recipe_query_prefix(vec_pool):
    out, _, _, meta = vec_pool
    recorded = _meta(out)
    assert (recorded["vec_model"], recorded["vec_dim"]) == (meta["model"], str(meta["dim"]))
    assert recorded["vec_query_prefix"] == "query: "          # examples/help/pool.yaml sets it
    assert recorded["vec_passage_prefix"] == meta["passage_prefix"]


def test_chunk_vectors_are_the_passage_embedding_of_their_chunk(vec_pool):
    out, _, pack, _ = vec_pool
    with sqlite3.connect(out) as con:
        rows = con.execute('select t.title, ch.heading, ch.body, v.vec from "doc$chunk" ch join "doc$topic" t '
                           'on t.id = ch.topic_id join "doc$chunk_vec" v on v.chunk_id = ch.id '
                           "order by ch.id limit 3").fetchall()
        topic = con.execute('select t.title, t.description, t.body_md, v.vec from "doc$topic" t '
                            'join "doc$topic_vec" v on v.topic_id = t.id order by t.id limit 1').fetchone()
    embedder = emb.load_embedder(pack)
    prefix = _meta(out)["vec_passage_prefix"]
    for title, heading, body, blob in rows:
        expected = embedder.embed_passages([chunk_passage(title, heading, body)], prefix)[0]
        assert np.allclose(decode_vectors([blob], embedder.info.dim)[0], expected, atol=1e-6)
    expected = embedder.embed_passages([topic_passage(*topic[:3])], prefix)[0]
    assert np.allclose(decode_vectors([topic[3]], embedder.info.dim)[0], expected, atol=1e-6)


def test_builder_without_a_pack_is_model_not_found_and_writes_nothing(tmp_path):
    out = tmp_path / "help.db"
    with pytest.raises(ToolError) as err:
        build_pool(SAMPLE, out, "netsim-help", model_dir=tmp_path / "no-pack")
    assert (err.value.code, err.value.message) == ("embedding_unavailable", "embedding model not found")
    assert not out.exists()


def test_builder_without_the_runtime_is_runtime_not_found(hf_pack, tmp_path, monkeypatch):
    emb.clear_cache()
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    try:
        with pytest.raises(ToolError) as err:
            build_pool(SAMPLE, tmp_path / "help.db", "netsim-help", model_dir=hf_pack[0])
        assert err.value.message == "embedding runtime not found"
    finally:
        emb.clear_cache()


def test_cli_build_reports_a_missing_pack_and_fails(tmp_path, capsys):
    import argparse

    parser = argparse.ArgumentParser()
    add_pool_build_parser(parser.add_subparsers())
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["build", str(SAMPLE), str(tmp_path / "h.db"), "--collection", "netsim-help",
                           "--model", str(tmp_path / "nothing")])
    assert exited.value.code == 2
    assert "folder not found" in capsys.readouterr().err
    ns = parser.parse_args(["build", str(SAMPLE), str(tmp_path / "h.db"), "--collection", "netsim-help",
                            "--model", str(tmp_path)])  # a folder, but no pack in it
    assert ns.func(ns) == 1
    assert "embedding model not found" in capsys.readouterr().err


def test_importdoc_copies_vectors_and_identity(vec_pool, tmp_path):
    src, counts, _, meta = vec_pool
    target = tmp_path / "docs.db"
    result = import_collection(target, src, "netsim-help")
    assert (result.topics, _count(target, "topic_vec"), _count(target, "chunk_vec")) == (
        counts["topic"], counts["topic_vec"], counts["chunk_vec"])
    assert _meta(target)["vec_model"] == meta["model"]
    with sqlite3.connect(target) as con:  # every copied vector hangs off a chunk of the same text
        orphans = con.execute('select count(*) from "doc$chunk_vec" v left join "doc$chunk" ch on ch.id = v.chunk_id '
                              "where ch.id is null").fetchone()[0]
    assert orphans == 0


def _with_identity(src: Path, tmp_path: Path, name: str, **values: str) -> Path:
    copy = tmp_path / name
    shutil.copy(src, copy)
    with sqlite3.connect(copy) as con:
        for key, value in values.items():
            con.execute('update "doc$meta" set value = ? where collection = \'\' and name = ?', [value, key])
        con.execute('update "doc$collection" set id = ?', ["other"])
        con.execute('update "doc$topic" set collection = ?', ["other"])
    return copy


@pytest.mark.parametrize("change", [{"vec_model": "someone/else"}, {"vec_dim": "768"}])
def test_importdoc_refuses_vectors_of_another_model(vec_pool, tmp_path, change):
    src = vec_pool[0]
    target = tmp_path / "docs.db"
    import_collection(target, src, "netsim-help")
    before = _count(target, "topic")
    with pytest.raises(ImportRefused, match="embedding model does not match the pool"):
        import_collection(target, _with_identity(src, tmp_path, "other.db", **change), "other")
    assert _count(target, "topic") == before


def test_importdoc_without_vectors_keeps_the_pool_identity(vec_pool, tmp_path):
    src, _, _, meta = vec_pool
    target = tmp_path / "docs.db"
    import_collection(target, src, "netsim-help")
    plain = tmp_path / "plain.db"
    build_pool(SAMPLE, plain, "plain")
    import_collection(target, plain, "plain")
    recorded = _meta(target)
    assert (recorded["vec_model"], recorded["vec_dim"]) == (meta["model"], str(meta["dim"]))


def _help_ctx(help_db: Path, model_dir: Path | None) -> CallContext:
    settings = Settings(appdir=help_db.parent, help_db=help_db)
    if model_dir is not None:
        (help_db.parent / "models").mkdir(exist_ok=True)
        link = settings.model_dir
        if not link.exists():
            link.symlink_to(model_dir, target_is_directory=True)
    return CallContext(settings=settings)


def _search(ctx: CallContext, mode: str, query: str = "fatura", limit: int = 5):
    args = tool_args("doc_search", query=query, collection="netsim-help", mode=mode, limit=limit)
    return tools.doc_search(args, ctx).structured["results"]


def test_vector_search_runs_end_to_end_with_the_builders_vectors(vec_pool, tmp_path):
    help_db = tmp_path / "help.db"
    shutil.copy(vec_pool[0], help_db)
    hits = _search(_help_ctx(help_db, vec_pool[2]), "vector")
    assert 0 < len(hits) <= 5 and {h["method"] for h in hits} == {"vector"}
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)


def test_a_pack_of_another_model_is_refused_at_query_time(vec_pool, tmp_path):
    help_db = tmp_path / "help.db"
    shutil.copy(vec_pool[0], help_db)
    with sqlite3.connect(help_db) as con:
        con.execute('update "doc$meta" set value = \'someone/else\' where collection = \'\' and name = \'vec_model\'')
    ctx = _help_ctx(help_db, vec_pool[2])
    for mode in ("vector", "hybrid"):
        with pytest.raises(ToolError) as err:
            _search(ctx, mode)
        assert err.value.message == "embedding model does not match the pool"
        assert "someone/else" in err.value.diagnostics[0]["message"]
    assert _search(ctx, "fts")  # full text is not affected


@given(st.sampled_from([None, "a/model", "b/model"]), st.sampled_from([None, "a/model", "b/model"]),
       st.sampled_from([128, 384]), st.sampled_from([128, 384]))
def test_identity_conflict_only_on_known_differences(model_a, model_b, dim_a, dim_b):
    conflict = identity_conflict(PoolModelIdentity(model_a, dim_a), PoolModelIdentity(model_b, dim_b))
    expected = dim_a != dim_b or (model_a is not None and model_b is not None and model_a != model_b)
    assert (conflict is not None) == expected
    assert identity_conflict(None, PoolModelIdentity(model_b, dim_b)) is None


@given(st.text(max_size=3000), st.text(max_size=300), st.text(max_size=3000))
def test_passages_are_capped_and_start_with_the_title(title, middle, body):
    for passage in (topic_passage(title, middle, body), chunk_passage(title, middle, body)):
        assert len(passage) <= MAX_PASSAGE_CHARS
        assert passage.startswith(title.strip()[:MAX_PASSAGE_CHARS])
