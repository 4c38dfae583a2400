"""The distinct values of a small array, ascending, without ``np.unique``.

numpy 2.3+'s ``np.unique`` tests ``np.ma.is_masked`` before hashing, which imports ``numpy.ma``
(1.2 MiB resident, for the server's lifetime) at a first query; sorting a query's few trigram
codes or token ids gives the same array.
"""

from __future__ import annotations

import numpy as np


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` of a 1-D array: its distinct values, ascending, in its dtype."""
    ordered = np.sort(values)
    first = np.ones(len(ordered), dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    return ordered[first]
