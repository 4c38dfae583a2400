"""The word table outside the graph: the split graph gives the vectors of the graph with the
table inside, bit for bit; rows are read as ``table[ids]``; a pack without its table is refused."""

from __future__ import annotations

import shutil

import numpy as np
import onnxruntime as ort
import pytest

from knowspec.impl import runtime as process
from knowspec.impl.docpool.vectors import embedder as emb
from knowspec.impl.docpool.vectors.onnx_graph import quantize_int8, write_fp32_graph
from knowspec.impl.docpool.vectors.word_codes import WORD_CODES_FILE, WORD_CODES_INPUT, WordCodes, split_word_table
from knowspec.impl.errors import ToolError

from .conftest import TINY, corpus_words
from .synth_models import random_weights


@pytest.fixture(scope="module")
def int8_graph(tmp_path_factory):
    """A tiny int8 graph with its word table inside."""
    folder = tmp_path_factory.mktemp("graph")
    fp32 = write_fp32_graph(random_weights(TINY, vocab=60, max_pos=40, seed=5), folder / "fp32.onnx")
    return quantize_int8(fp32, folder / "inside.onnx")


def test_split_graph_gives_the_same_hidden_states_bit_for_bit(int8_graph, tmp_path):
    split = tmp_path / "split.onnx"
    shutil.copy(int8_graph, split)
    assert split_word_table(split, tmp_path / WORD_CODES_FILE)
    ids = np.array([[0, 7, 59, 7, 3, 2], [0, 11, 2, 1, 1, 1]], dtype=np.int64)
    mask = (np.arange(6) < np.array([[6], [3]])).astype(np.int64)
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    inside = ort.InferenceSession(str(int8_graph)).run(None, feeds)[0]
    outside = ort.InferenceSession(str(split)).run(
        None, {**feeds, WORD_CODES_INPUT: WordCodes(tmp_path / WORD_CODES_FILE).gather(ids)})[0]
    np.testing.assert_array_equal(inside, outside)


def test_rows_are_read_as_table_of_ids(tmp_path):
    table = np.random.default_rng(1).integers(-127, 128, size=(50, 8)).astype(np.int8)
    np.save(tmp_path / WORD_CODES_FILE, table)
    codes = WordCodes(tmp_path / WORD_CODES_FILE)
    ids = np.array([[3, 49, 3, 0], [7, 7, 7, 7]])
    np.testing.assert_array_equal(codes.gather(ids), table[ids])
    with pytest.raises(ValueError, match="outside"):
        codes.gather(np.array([[50]]))


def test_a_graph_without_a_quantized_word_table_is_left_alone(tmp_path):
    fp32 = write_fp32_graph(random_weights(TINY, vocab=60, max_pos=40, seed=5), tmp_path / "fp32.onnx")
    before = fp32.read_bytes()
    assert not split_word_table(fp32, tmp_path / WORD_CODES_FILE)
    assert fp32.read_bytes() == before and not (tmp_path / WORD_CODES_FILE).exists()


def test_a_pack_without_its_word_table_is_embedding_model_not_found(hf_pack, tmp_path):
    out, _, _ = hf_pack
    partial = tmp_path / "partial"
    shutil.copytree(out, partial)
    (partial / WORD_CODES_FILE).unlink()
    emb.clear_cache()
    with pytest.raises(ToolError, match="embedding model not found") as err:
        emb.load_embedder(partial)
    assert WORD_CODES_FILE in err.value.diagnostics[0]["message"]


def test_a_word_table_cut_short_while_loaded_answers_embedding_unavailable(hf_pack, tmp_path):
    """A hostile review truncated the table under a running server: the query answered a
    generic rejection (REST 400) instead of the pack's own error."""
    out, _, _ = hf_pack
    pack = tmp_path / "pack"
    shutil.copytree(out, pack)
    emb.clear_cache()
    with process.activated():
        assert emb.query_vector(pack, "the warehouse transfer form", prefix="query: ").shape == (TINY.hidden,)
        table = pack / WORD_CODES_FILE
        table.write_bytes(table.read_bytes()[:200])
        with pytest.raises(ToolError, match="embedding model not found") as err:
            emb.query_vector(pack, "another form entirely", prefix="query: ")
    assert err.value.code == "embedding_unavailable"


def test_a_pack_whose_pack_json_is_not_json_is_embedding_model_not_found(hf_pack, tmp_path):
    out, _, _ = hf_pack
    pack = tmp_path / "pack"
    shutil.copytree(out, pack)
    (pack / emb.PACK_FILE).write_text("{ not json", encoding="utf-8")
    emb.clear_cache()
    with pytest.raises(ToolError, match="embedding model not found") as err:
        emb.load_embedder(pack)
    assert emb.PACK_FILE in err.value.diagnostics[0]["message"]


def test_a_pack_with_the_table_inside_still_embeds(hf_pack, tmp_path):
    """Packs from builder 2 and older keep their table in the graph."""
    out, _, _ = hf_pack
    inside = tmp_path / "inside"
    inside.mkdir()
    shutil.copy(out / emb.TOKENIZER_FILE, inside / emb.TOKENIZER_FILE)
    fp32 = write_fp32_graph(random_weights(TINY, vocab=len(corpus_words()) + 4, max_pos=40, seed=1), tmp_path / "fp32.onnx")
    quantize_int8(fp32, inside / emb.MODEL_FILE)
    emb.clear_cache()
    loaded = emb.load_embedder(inside)
    assert loaded.word_codes is None
    assert loaded.embed(["the warehouse transfer form"]).shape == (1, TINY.hidden)
