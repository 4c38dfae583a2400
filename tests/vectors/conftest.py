"""Fixtures: tiny random BERT models in both source formats, and packs built from them once."""

from __future__ import annotations

import re

import pytest
from rich.console import Console

from knowspec.impl.docpool.vectors.onnx_graph import BertShape
from knowspec.impl.docpool.vectors.pack_builder import SANITY_PAIRS, VERIFY_SENTENCES, build_pack

from .synth_models import random_weights, write_hf_folder

TINY = BertShape(hidden=128, layers=2, heads=4, ffn=256, eps=1e-12)


def corpus_words() -> list[str]:
    text = " ".join(VERIFY_SENTENCES + [q for q, _ in SANITY_PAIRS] + [p for _, p in SANITY_PAIRS]).lower()
    return sorted(set(re.findall(r"\w+", text)))


@pytest.fixture(scope="session")
def quiet_console():
    return Console(file=open("/dev/null", "w"), force_terminal=False)


@pytest.fixture(scope="session")
def hf_folder(tmp_path_factory):
    words = corpus_words()
    weights = random_weights(TINY, vocab=len(words) + 4, max_pos=40, seed=1)
    folder = write_hf_folder(tmp_path_factory.mktemp("hf") / "tiny-bert", weights, words)
    return folder, weights


@pytest.fixture(scope="session")
def hf_pack(hf_folder, tmp_path_factory, quiet_console):
    folder, weights = hf_folder
    out = tmp_path_factory.mktemp("packs") / "tiny-int8"
    meta = build_pack(f"hf:{folder}", out, console=quiet_console)
    return out, meta, weights
