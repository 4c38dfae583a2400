"""Model input and output shaping shared by the embedder, the reference pass and the builder.

The seed fixes pooling: attention-mask weighted mean over the tokens, then L2 normalisation.
"""

from __future__ import annotations

import numpy as np


def mean_pool_l2(hidden: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """``[batch, seq, H]`` hidden states and ``[batch, seq]`` mask -> float32 ``[batch, H]`` unit rows."""
    mask = attention_mask.astype(np.float64)[:, :, None]
    summed = (hidden.astype(np.float64) * mask).sum(axis=1)
    counts = np.maximum(mask.sum(axis=1), 1e-9)
    pooled = summed / counts
    norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return (pooled / norms).astype(np.float32)


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine of two ``[n, H]`` matrices."""
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    num = (a * b).sum(axis=1)
    den = np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)
    return num / den


def encode_batch(tokenizer, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and attention mask, right-padded (padding is masked out, so the pad id does not matter)."""
    encodings = tokenizer.encode_batch(texts)
    width = max((len(e.ids) for e in encodings), default=0)
    ids = np.zeros((len(texts), width), dtype=np.int64)
    mask = np.zeros((len(texts), width), dtype=np.int64)
    for row, enc in enumerate(encodings):
        ids[row, :len(enc.ids)] = enc.ids
        mask[row, :len(enc.ids)] = 1
    return ids, mask
