"""The optional approximate vector index, for pools past one machine's comfort (about 1M chunks).

Never the default: an operator asks for it (``knowspec serve --vector-index approximate
--vector-candidates N``; ``RuntimeSettings.vector_index`` / ``vector_candidates``) and installs
the ``ann`` extra (usearch, imported here only when an index is built). Without the setting,
ranking is the exact scan of ``scoring.exact_top``.

How it ranks. Each matrix of a pool (chunks, topics) larger than ``INDEX_MIN_ROWS`` gets an
HNSW graph over int8 copies of its rows (inner product; built from the float32 matrix the pool's
vector cache already holds, on a helper thread from the first vector query on, the exact rule
answering until it is ready, by a plain float32 scan since this setting loads no int8 sketch;
kept in the runtime cache ``docpool.vector_index`` until the pool's change stamp moves).
A query asks the graph for its ``N`` nearest rows, keeps
the allowed ones, scores them again exactly in float32 (``scoring.matrix_dot``) and takes the
top 80 of those; the seed's rule (top 80 chunks / topics, +0.02, ties by topic id) then runs
unchanged (``scoring.vector_rank``'s ``top`` hook). So every score is the exact one, and the
answer differs from the exact rule only where the graph's candidates miss a true top-80 row.

- ``N`` >= a matrix's rows, or a matrix below ``INDEX_MIN_ROWS``: every row is a candidate, so
  that matrix's top 80 is the exact one.
- Few allowed rows (an ACL or collection filter leaving at most a quarter): every allowed row is
  scored, as the exact path does (cheaper than the graph, and exact).
- A filter that drops most of the ``N`` candidates: the graph is asked again for twice as many
  (up to every row) until at least 80 allowed rows, or every allowed row, are candidates.

``benchmarks/docpool_ann.py`` measures recall@10 against the exact rule, latency, build time
and memory.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Callable, Hashable

import numpy as np

from knowspec.impl import runtime as process
from knowspec.impl.docpool.vectors.parallelism import available_cores
from knowspec.impl.docpool.vectors.scoring import PoolVectors, VectorHit, matrix_dot, top_rows, vector_rank

log = logging.getLogger(__name__)

INDEX_MIN_ROWS = 4096       # below this every row is scored: an exact scan costs well under a millisecond
INDEX_DTYPE = "i8"          # the graph's copy of the rows: a quarter of float32's bytes
CONNECTIVITY = 16           # graph edges per row
EXPANSION_ADD = 64          # search breadth while building
EXPANSION_SEARCH = 64       # search breadth per query (at least the count asked for)

Propose = Callable[[np.ndarray, int], np.ndarray]   # (query, count) -> up to count rows, nearest first


def usearch_index_module():
    """``usearch.index``, or ``MissingExtra`` naming the ``ann`` extra."""
    from knowspec.impl.extras import require

    return require("usearch.index")


def available() -> bool:
    """Whether the ``ann`` extra is installed (imports nothing)."""
    import importlib.util

    return importlib.util.find_spec("usearch") is not None


@dataclass(frozen=True, eq=False)
class MatrixIndex:
    """A graph over one matrix's rows: ``propose(q, count)`` gives candidate rows."""

    propose: Propose
    nbytes: int
    build_seconds: float


def build_matrix_index(matrix: np.ndarray, threads: int | None = None) -> MatrixIndex:
    """An HNSW graph (usearch, int8 copies, inner product) over ``matrix``'s rows, keyed by row."""
    usearch = usearch_index_module()
    start = time.perf_counter()
    index = usearch.Index(ndim=matrix.shape[1], metric="ip", dtype=INDEX_DTYPE, connectivity=CONNECTIVITY,
                          expansion_add=EXPANSION_ADD, expansion_search=EXPANSION_SEARCH)
    index.add(np.arange(len(matrix), dtype=np.uint64), np.ascontiguousarray(matrix, dtype=np.float32),
              threads=threads or available_cores())

    def propose(q: np.ndarray, count: int) -> np.ndarray:
        return np.asarray(index.search(q, count, threads=1).keys, dtype=np.intp)

    return MatrixIndex(propose, int(index.memory_usage), time.perf_counter() - start)


def candidate_rows(index: MatrixIndex | None, n: int, q: np.ndarray, mask: np.ndarray | None,
                   k: int, count: int) -> np.ndarray:
    """Ascending rows to score exactly (all allowed by ``mask``): see the module docstring."""
    every = np.arange(n) if mask is None else np.flatnonzero(mask)
    allowed = len(every)
    if index is None or allowed * 4 <= n:
        return every
    want = max(count, k)
    while want < n:  # a count of every row or more: every allowed row
        rows = np.unique(index.propose(q, want))
        rows = rows[(rows >= 0) & (rows < n)]
        if mask is not None:
            rows = rows[mask[rows]]
        if len(rows) >= min(k, allowed):
            return rows
        want *= 2
    return every


def rescored_top(matrix: np.ndarray, rows: np.ndarray, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, float32 scores)``: the ``k`` best of the ascending ``rows``, best first, ties by
    lower row: what ``scoring.exact_top`` gives when those are all the rows there are."""
    scores = matrix_dot(matrix[rows], q)
    best = top_rows(scores, None, k)
    return rows[best], scores[best]


@dataclass(frozen=True, eq=False)
class ApproximateIndex:
    """A pool's vectors with a graph per large matrix (``None``: every row is a candidate)."""

    vectors: PoolVectors
    chunk_index: MatrixIndex | None
    topic_index: MatrixIndex | None

    @classmethod
    def build(cls, vectors: PoolVectors, threads: int | None = None,
              min_rows: int | None = None) -> "ApproximateIndex":
        smallest = max(INDEX_MIN_ROWS if min_rows is None else min_rows, 1)

        def graph(matrix: np.ndarray) -> MatrixIndex | None:
            return build_matrix_index(matrix, threads) if len(matrix) >= smallest else None

        return cls(vectors, graph(vectors.chunk_matrix), graph(vectors.topic_matrix))

    @property
    def nbytes(self) -> int:
        """The graphs' bytes (the float32 matrices belong to the pool's vector cache)."""
        return sum(i.nbytes for i in (self.chunk_index, self.topic_index) if i is not None)

    @property
    def build_seconds(self) -> float:
        return sum(i.build_seconds for i in (self.chunk_index, self.topic_index) if i is not None)

    def rank(self, query: np.ndarray, allowed_topic_ids, limit: int, candidates: int) -> list[VectorHit]:
        """``scoring.vector_rank`` with each matrix's top 80 taken from ``candidates`` proposed rows."""
        v = self.vectors

        def top(kind: str, q: np.ndarray, mask: np.ndarray | None, k: int) -> tuple[np.ndarray, np.ndarray]:
            matrix, index = (v.chunk_matrix, self.chunk_index) if kind == "chunk" else (v.topic_matrix, self.topic_index)
            return rescored_top(matrix, candidate_rows(index, len(matrix), q, mask, k, candidates), q, k)

        return vector_rank(v, query, allowed_topic_ids, limit, top=top)


MAX_CACHED_INDEXES = 4


def _built_bytes(build: Future) -> int:
    return build.result().nbytes if build.done() and build.exception() is None else 0


def index_build(pool_key: Hashable, stamp: Hashable, vectors: PoolVectors) -> Future:
    """The build of the pool's index, started once per pool state on the runtime's
    ``vector_index`` thread; its future is kept in the runtime cache ``docpool.vector_index``
    (rebuilt when the change stamp moves or the vectors were loaded again)."""
    runtime = process.current()
    cache = runtime.cache("docpool.vector_index", max_entries=MAX_CACHED_INDEXES, sizeof=_built_bytes)

    def start() -> Future:
        build = runtime.executor("vector_index", 1).submit(ApproximateIndex.build, vectors)
        build.add_done_callback(lambda _: cache.resize(pool_key))  # its bytes count once it is built
        return build

    return cache.get(pool_key, (stamp, id(vectors)), start)


def approximate_rank(pool_key: Hashable, stamp: Hashable, vectors: PoolVectors, query: np.ndarray,
                     allowed_topic_ids, limit: int, candidates: int) -> list[VectorHit]:
    """The pool's index ranks ``query``; until its graphs are built (minutes at a million rows)
    the exact rule answers. A missing ``ann`` extra is ``embedding_unavailable``."""
    from knowspec.impl.errors import ToolError, diagnostic
    from knowspec.impl.extras import MissingExtra

    try:
        usearch_index_module()  # asked for and missing is an error whatever the pool's size
    except MissingExtra as exc:
        raise ToolError("embedding_unavailable", "embedding runtime not found",
                        diagnostics=[diagnostic("embedding_unavailable", f"the approximate vector index "
                                                f"(--vector-index approximate): {exc}")]) from exc
    build = index_build(pool_key, stamp, vectors)
    if build.done() and build.exception() is None:
        return build.result().rank(query, allowed_topic_ids, limit, candidates)
    if build.done():  # a failed build (e.g. out of memory): logged, tried again at the next query
        log.warning("approximate vector index build failed: %s", build.exception())
        process.current().cache("docpool.vector_index", max_entries=MAX_CACHED_INDEXES).pop(pool_key)
    return vector_rank(vectors, query, allowed_topic_ids, limit)
