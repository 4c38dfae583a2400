"""Run-time embedding: lazy runtime import, the seed's error messages, pack/pool mismatch
refusal, pooling and the per-process session cache."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from knowspec.impl.docpool.vectors import embedder as emb
from knowspec.impl.errors import ToolError


@pytest.fixture(autouse=True)
def fresh_cache():
    emb.clear_cache()
    yield
    emb.clear_cache()


def test_missing_model_folder_is_embedding_model_not_found(tmp_path):
    with pytest.raises(ToolError) as err:
        emb.query_vector(tmp_path / "absent", "fatura", prefix="query: ")
    assert err.value.code == "embedding_unavailable"
    assert err.value.message == "embedding model not found"
    assert err.value.diagnostics and "absent" in err.value.diagnostics[0]["message"]


def test_missing_tokenizer_is_embedding_model_not_found(hf_pack, tmp_path):
    out, _, _ = hf_pack
    partial = tmp_path / "partial"
    partial.mkdir()
    shutil.copy(out / emb.MODEL_FILE, partial / emb.MODEL_FILE)
    with pytest.raises(ToolError, match="embedding model not found") as err:
        emb.load_embedder(partial)
    assert "tokenizer.json" in err.value.diagnostics[0]["message"]


def test_missing_runtime_is_embedding_runtime_not_found(hf_pack, monkeypatch):
    out, _, _ = hf_pack
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # makes `import onnxruntime` raise ImportError
    with pytest.raises(ToolError) as err:
        emb.query_vector(out, "fatura", prefix="")
    assert (err.value.code, err.value.message) == ("embedding_unavailable", "embedding runtime not found")


def test_corrupt_model_file_is_reported_as_model_not_found(hf_pack, tmp_path):
    out, _, _ = hf_pack
    broken = tmp_path / "broken"
    shutil.copytree(out, broken)
    (broken / emb.MODEL_FILE).write_bytes(b"not an onnx file")
    with pytest.raises(ToolError, match="embedding model not found"):
        emb.load_embedder(broken)


def test_pack_with_other_dimension_is_refused(hf_pack):
    out, meta, _ = hf_pack
    with pytest.raises(ToolError) as err:
        emb.query_vector(out, "fatura", prefix="", pool_dim=meta["dim"] + 1)
    assert err.value.code == "embedding_unavailable"
    assert "does not match the pool" in err.value.message
    assert "dimension" in err.value.diagnostics[0]["message"]


def test_pack_of_other_model_is_refused(hf_pack):
    out, _, _ = hf_pack
    with pytest.raises(ToolError, match="does not match the pool"):
        emb.query_vector(out, "fatura", prefix="", pool_model="intfloat/multilingual-e5-small")


def test_matching_pool_gets_a_unit_vector(hf_pack):
    out, meta, _ = hf_pack
    q = emb.query_vector(out, "cancel the invoice", prefix="", pool_model=meta["model"], pool_dim=meta["dim"])
    assert q.shape == (meta["dim"],) and q.dtype == np.float32
    assert abs(float(np.linalg.norm(q)) - 1.0) < 1e-5


def test_prefix_changes_the_embedded_text(hf_pack):
    embedder = emb.load_embedder(hf_pack[0])
    plain = embedder.embed_query("invoice", "")
    prefixed = embedder.embed_query("invoice", "cancel ")
    assert np.allclose(prefixed, embedder.embed(["cancel invoice"])[0], atol=1e-6)
    assert not np.allclose(plain, prefixed, atol=1e-3)


def test_query_path_equals_the_batch_path(hf_pack):
    embedder = emb.load_embedder(hf_pack[0])
    for text in ("stok", "İstanbul Boğazı naïve café's e-mail", ""):
        np.testing.assert_array_equal(embedder.embed_query(text, "query: "), embedder.embed([text], "query: ")[0])


def test_a_text_embeds_identically_alone_and_in_a_list(hf_pack):
    embedder = emb.load_embedder(hf_pack[0])
    texts = ["stok", "the warehouse transfer form moves stock between depots"]
    together = embedder.embed_passages(texts, "")
    alone = np.stack([embedder.embed([t])[0] for t in texts])
    np.testing.assert_array_equal(together, alone)


def test_padding_is_masked_out_of_pooling(hf_pack):
    """Batched runs pad; the pooled vectors stay close (int8 activation scaling aside)."""
    embedder = emb.load_embedder(hf_pack[0])
    texts = ["stok", "the warehouse transfer form moves stock between depots"]
    batched = embedder.embed(texts, batch_size=2)
    alone = embedder.embed(texts)
    assert (batched * alone).sum(axis=1).min() > 0.99


def test_session_is_cached_per_folder_and_reloaded_on_change(hf_pack, tmp_path):
    out, _, _ = hf_pack
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    first = emb.load_embedder(copy)
    assert emb.load_embedder(copy) is first
    os.utime(copy / emb.MODEL_FILE, ns=(1, 1))
    assert emb.load_embedder(copy) is not first


def test_pack_without_pack_json_reads_dimension_from_graph(hf_pack, tmp_path):
    out, meta, _ = hf_pack
    bare = tmp_path / "bare"
    shutil.copytree(out, bare)
    (bare / emb.PACK_FILE).unlink()
    info = emb.load_embedder(bare).info
    assert (info.model, info.dim) == (None, meta["dim"])


def test_pack_json_disagreeing_with_graph_is_refused(hf_pack, tmp_path):
    out, meta, _ = hf_pack
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    (bad / emb.PACK_FILE).write_text(json.dumps({**meta, "dim": meta["dim"] * 2}))
    with pytest.raises(ToolError, match="embedding model not found"):
        emb.load_embedder(bad)


def test_importing_vector_modules_does_not_load_onnxruntime():
    code = (
        "import sys\n"
        "import knowspec.impl.docpool.vectors.embedder, knowspec.impl.docpool.vectors.scoring\n"
        "import knowspec.impl.docpool.vectors.pack_builder, knowspec.impl.rules.rrf\n"
        "print(sorted(m for m in ('onnx', 'onnxruntime') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def _counting_runs(monkeypatch, embedder):
    """Count the embedder's session runs (one per text actually embedded)."""
    runs = []
    real = embedder.embed_query
    monkeypatch.setattr(embedder, "embed_query", lambda q, p: runs.append(p + q) or real(q, p))
    return runs


def test_a_repeated_query_is_embedded_once_and_gets_the_same_vector(hf_pack, monkeypatch):
    out = hf_pack[0]
    runs = _counting_runs(monkeypatch, emb.load_embedder(out))
    first = emb.query_vector(out, "invoice", prefix="")
    again = emb.query_vector(out, "invoice", prefix="")
    other = emb.query_vector(out, "invoice", prefix="cancel ")  # another text embedded: another entry
    assert runs == ["invoice", "cancel invoice"]
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(first, emb.load_embedder(out).embed(["invoice"], "")[0])
    assert not np.array_equal(first, other)
    with pytest.raises(ValueError):  # shared between calls: nobody may change it in place
        first[0] = 0.0


def test_query_vector_cache_off_embeds_every_time(hf_pack, monkeypatch, runtime_settings):
    runtime_settings(query_vectors=0)
    out = hf_pack[0]
    runs = _counting_runs(monkeypatch, emb.load_embedder(out))
    emb.query_vector(out, "stok", prefix="")
    emb.query_vector(out, "stok", prefix="")
    assert runs == ["stok", "stok"]


def test_a_replaced_model_never_answers_from_the_old_query_vectors(hf_pack, tmp_path, monkeypatch):
    copy = tmp_path / "copy"
    shutil.copytree(hf_pack[0], copy)
    emb.query_vector(copy, "stok", prefix="")
    os.utime(copy / emb.MODEL_FILE, ns=(1, 1))
    runs = _counting_runs(monkeypatch, emb.load_embedder(copy))
    emb.query_vector(copy, "stok", prefix="")
    assert runs == ["stok"]


def test_query_vector_setting_reads_zero_as_off(monkeypatch):
    from knowspec.impl.runtime import DEFAULT_QUERY_VECTORS, RuntimeSettings

    monkeypatch.setenv("KNOWSPEC_QUERY_VECTORS", "0")
    assert RuntimeSettings.from_environment().query_vectors == 0
    monkeypatch.setenv("KNOWSPEC_QUERY_VECTORS", "12")
    assert RuntimeSettings.from_environment().query_vectors == 12
    monkeypatch.setenv("KNOWSPEC_QUERY_VECTORS", "many")
    assert RuntimeSettings.from_environment().query_vectors == DEFAULT_QUERY_VECTORS


def _optimized_ops(path) -> set[str]:
    onnx = pytest.importorskip("onnx")
    return {node.op_type for node in onnx.load(str(path), load_external_data=False).graph.node}


def test_the_session_runs_layer_norms_unfused(hf_pack, tmp_path):
    """ORT fuses a residual Add and its LayerNormalization into SkipLayerNormalization, whose
    kernel is the slower of the two here (docs/model-pack.md): the pack's session leaves it out."""
    import onnxruntime as ort

    model = hf_pack[0] / emb.MODEL_FILE

    def optimized_graph_ops(name: str, **unfused: tuple[str, ...]) -> set[str]:
        options = emb.session_options(ort, 1)
        options.optimized_model_filepath = str(tmp_path / name)
        emb.pack_session(ort, model, 1, options=options, **unfused)
        return _optimized_ops(tmp_path / name)

    assert "SkipLayerNormalization" in optimized_graph_ops("every-fusion.onnx", unfused=())  # the fusion exists
    shipped = optimized_graph_ops("shipped.onnx")  # the embedder's default
    assert "SkipLayerNormalization" not in shipped
    assert "LayerNormalization" in shipped


def test_the_packs_session_is_made_inside_the_huge_page_collapse(hf_pack, monkeypatch):
    out, _, _ = hf_pack
    events: list[str] = []
    make_session = emb.pack_session

    @contextlib.contextmanager
    def recording():
        events.append("enter")
        yield
        events.append("exit")

    def session(*args, **kwargs):
        events.append("session")
        return make_session(*args, **kwargs)

    monkeypatch.setattr(emb, "on_huge_pages", recording)
    monkeypatch.setattr(emb, "pack_session", session)
    emb.open_pack(out, 1)
    assert events == ["enter", "session", "exit"]
