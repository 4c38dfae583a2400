"""A plain numpy forward pass of the BERT encoder: the yardstick a built pack is checked against.

It follows the same canonical weights as ``onnx_graph`` but shares no code with it, so a
mistake in the graph shows up as a cosine drop rather than being reproduced on both sides.
"""

from __future__ import annotations

import math

import numpy as np

from knowspec.impl.docpool.vectors.onnx_graph import BertWeights
from knowspec.impl.docpool.vectors.pooling import mean_pool_l2


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def hidden_states(weights: BertWeights, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """``last_hidden_state`` for int ``[batch, seq]`` inputs, computed in float64."""
    s = weights.shape
    t = {k: v.astype(np.float64) for k, v in weights.tensors.items()}
    batch, seq = input_ids.shape
    x = t["emb.word"][input_ids] + t["emb.type"][0] + t["emb.pos"][s.pos_offset:s.pos_offset + seq]
    x = _layer_norm(x, t["emb.ln.w"], t["emb.ln.b"], s.eps)
    bias = np.where(attention_mask[:, None, None, :] > 0, 0.0, -1e30)
    hd = s.head_dim
    for layer in range(s.layers):
        p = f"l{layer}."

        def proj(name: str, inp: np.ndarray) -> np.ndarray:
            return inp @ t[p + name + ".w"].T + t[p + name + ".b"]

        def split(m: np.ndarray) -> np.ndarray:
            return m.reshape(batch, seq, s.heads, hd).transpose(0, 2, 1, 3)

        q, k, v = split(proj("q", x)), split(proj("k", x)), split(proj("v", x))
        probs = _softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd) + bias)
        ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, s.hidden)
        x = _layer_norm(x + proj("ao", ctx), t[p + "aln.w"], t[p + "aln.b"], s.eps)
        h = proj("fi", x)
        h = 0.5 * h * (1.0 + _erf(h / math.sqrt(2.0)))
        x = _layer_norm(x + proj("fo", h), t[p + "oln.w"], t[p + "oln.b"], s.eps)
    return x


def embed(weights: BertWeights, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """Pooled, L2-normalised float32 sentence embeddings ``[batch, hidden]``."""
    hidden = hidden_states(weights, input_ids, attention_mask)
    return mean_pool_l2(hidden, attention_mask)
