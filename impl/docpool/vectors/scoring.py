"""Vector scoring for doc_search ``vector`` mode, the BLOB layout of stored vectors, and the
per-process cache of a pool's vector matrices.

Seed rule: ``score(topic) = max(chunk·q over the top 80 chunks, topic·q over the top 80 topics
+ 0.02)`` over allowed topics only; the score is a cosine (larger is better); the snippet is the
first 200 characters of the topic's best chunk.

How the pool helper calls it (``impl/docpool/search.py``)::

    vectors = cached_pool_vectors(pool_key, change_stamp, lambda: PoolVectors.from_streams(
        (pool.vector_count("topic", UNRESTRICTED), pool.iter_vectors("topic", UNRESTRICTED)),
        (pool.vector_count("chunk", UNRESTRICTED), pool.iter_vectors("chunk", UNRESTRICTED))))
    hits = vector_rank(vectors, q, allowed_topic_ids, limit)        # [VectorHit]
    # hybrid: knowspec.impl.rules.rrf.hybrid_rank(fts_topic_ids,
    #                                             [(h.topic_id, h.score) for h in hits], limit)

- Rows stream from the storage straight into preallocated float32 matrices (``from_streams``):
  a 100k-chunk pool never exists as 100k Python objects, so loading peaks near the matrices' size.
- ``allowed_topic_ids``: the topics the caller may see *and* that pass the collection filter,
  or ``None`` for all. The mask is applied before the top-80 cut, so a forbidden topic never
  appears and never pushes an allowed one out. It becomes a boolean mask over the pool's topics
  (``searchsorted`` on sorted ids), then over chunk rows by one gather.
- The top 80 of each matrix is exact and, for large matrices, found through an int8 copy
  (``int8_scan``, packed once per pool load by ONNX Runtime): the same rows, order and float32
  scores as a full float32 scan, at about a quarter of the memory traffic, on the calling thread.
- ``VectorHit.chunk_id`` is the best chunk of the topic (``None`` if it has no chunk vector);
  the snippet is ``vector_snippet(chunk_text)``.
- Ties are broken by topic id ascending (chunk rows: lower row first), so the order is deterministic.

BLOB layout (all backends: SQLite BLOB, PostgreSQL ``bytea``, Firebird BLOB): the ``dim``
components of one unit-length vector as IEEE-754 float32, little-endian, packed with no header
and no padding, so ``len(blob) == 4 * dim`` (1,536 bytes for e5-small's 384 dimensions).
"""

from __future__ import annotations

from dataclasses import InitVar, dataclass, field
from typing import Any, Callable, Collection, Hashable, Iterable

import numpy as np

from knowspec.impl import runtime as process
from knowspec.impl.docpool.vectors import int8_scan

TOP_K = 80
TOPIC_BONUS = 0.02
SNIPPET_CHARS = 200
SKETCH_MIN_ROWS = 4096   # below this a float32 scan takes well under a millisecond
_LE_F32 = np.dtype("<f4")


def encode_vector(vector: np.ndarray) -> bytes:
    """One vector as a float32 little-endian BLOB."""
    return np.ascontiguousarray(np.asarray(vector, dtype=_LE_F32).reshape(-1)).tobytes()


def encode_vectors(matrix: np.ndarray) -> list[bytes]:
    """One BLOB per row of ``matrix``."""
    return [encode_vector(row) for row in np.asarray(matrix)]


def _wrong_size(i: int, size: int, dim: int) -> ValueError:
    return ValueError(f"vector {i} has {size} bytes, expected {4 * dim} (dimension {dim})")


def decode_vectors(blobs: Iterable[bytes], dim: int) -> np.ndarray:
    """BLOBs -> float32 ``[n, dim]`` matrix; a BLOB of the wrong size is an error, never padded."""
    parts = list(blobs)  # references only
    out = np.empty((len(parts), dim), dtype=_LE_F32)
    for i, blob in enumerate(parts):
        if len(blob) != 4 * dim:
            raise _wrong_size(i, len(blob), dim)
        out[i] = np.frombuffer(blob, dtype=_LE_F32)
    return out


def read_vector_stream(count: int, rows: Iterable[Any], dim: int | None,
                       with_chunks: bool) -> tuple[int | None, np.ndarray, np.ndarray, np.ndarray]:
    """``(dim, topic_ids, chunk_ids, matrix)`` from storage rows (``topic_id``, ``chunk_id``,
    ``vec``), copied one BLOB at a time into arrays sized by ``count``.

    ``count`` only sizes the arrays: extra rows grow them, missing rows shrink them, so a count
    taken outside the rows' snapshot cannot corrupt the result. ``dim`` None: the first BLOB's.
    ``chunk_ids`` is empty unless ``with_chunks``.
    """
    cap = max(int(count), 0)
    topic_ids = np.empty(cap, dtype=np.int64)
    chunk_ids = np.empty(cap if with_chunks else 0, dtype=np.int64)
    matrix = np.empty((cap, dim or 0), dtype=_LE_F32)
    flat: memoryview | None = matrix.reshape(-1).view(np.uint8).data if dim else None
    n = 0
    for row in rows:
        blob = row.vec
        if dim is None:
            dim = len(blob) // 4
            matrix = np.empty((cap, dim), dtype=_LE_F32)
            flat = matrix.reshape(-1).view(np.uint8).data
        width = 4 * dim
        if len(blob) != width:
            raise _wrong_size(n, len(blob), dim)
        if n == cap:  # more rows than counted: grow (rare; copies once per doubling)
            cap = max(16, 2 * cap)
            topic_ids = np.resize(topic_ids, cap)
            chunk_ids = np.resize(chunk_ids, cap) if with_chunks else chunk_ids
            grown = np.empty((cap, dim), dtype=_LE_F32)
            grown[:n] = matrix[:n]
            matrix = grown
            flat = matrix.reshape(-1).view(np.uint8).data
        assert flat is not None  # set with dim
        flat[n * width:(n + 1) * width] = blob
        topic_ids[n] = row.topic_id
        if with_chunks:
            chunk_ids[n] = row.chunk_id
        n += 1
    if n < cap:  # fewer rows than counted
        topic_ids, matrix = topic_ids[:n].copy(), matrix[:n].copy()
        chunk_ids = chunk_ids[:n].copy() if with_chunks else chunk_ids
    return dim, topic_ids, chunk_ids, matrix


def vector_snippet(chunk_text: str) -> str:
    return chunk_text[:SNIPPET_CHARS]


def matrix_dot(matrix: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``matrix @ q`` on the calling thread, each row's dot product independent of the others.

    ``einsum`` does the same float32 dot products without OpenBLAS, whose worker threads spin
    while they wait (on the shared 2-core host the server's vector p50 at 100k chunks was 96 ms
    with OpenBLAS's default threads and 49 ms with one). A row's result does not depend on which
    other rows are in ``matrix``, so scoring a gathered subset gives the full scan's values.
    """
    return np.einsum("ij,j->i", matrix, q)


def top_rows(scores: np.ndarray, mask: np.ndarray | None, k: int) -> np.ndarray:
    """Indices of the ``k`` best allowed rows, best first (ties: lower row index first)."""
    candidates = np.arange(len(scores)) if mask is None else np.flatnonzero(mask)
    if len(candidates) > k:
        cut = np.partition(scores[candidates], len(candidates) - k)[len(candidates) - k]
        candidates = candidates[scores[candidates] >= cut]
    order = np.lexsort((candidates, -scores[candidates].astype(np.float64)))
    return candidates[order][:k]


def settled_rows(matrix: np.ndarray, q: np.ndarray, found: int8_scan.Candidates, k: int) -> np.ndarray:
    """The candidates that can still be among the ``k`` best once the ``k`` with the best
    centres are scored: every row whose upper end reaches the lowest of those ``k`` float32
    scores. A row below it scores strictly below ``k`` rows, so the top ``k`` (ties included)
    is the candidates' top ``k``; fewer rows are gathered when the intervals are wide."""
    rows = found.rows
    if len(rows) <= 2 * k:
        return rows
    first = np.argpartition(found.centre, len(rows) - k)[len(rows) - k:]
    if not np.isfinite(found.centre[first]).all():
        return rows
    floor = float(matrix_dot(matrix[rows[first]], q).min())
    return rows[found.upper >= floor] if np.isfinite(floor) else rows


def exact_top(matrix: np.ndarray, sketch: int8_scan.Int8Sketch | None, q: np.ndarray,
              mask: np.ndarray | None, k: int,
              codes: int8_scan.QueryCodes | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, scores)``: the ``k`` best rows of ``matrix @ q`` among ``mask``, best first, with
    their float32 scores. Exactly a full float32 scan's answer; only the rows scored differ:
    every allowed row when few are allowed, else the int8 sketch's candidates (``codes``: the
    query's ``int8_scan.quantize_query``, made once for both matrices)."""
    n = len(matrix)
    allowed = n if mask is None else int(np.count_nonzero(mask))
    chosen: np.ndarray | None = None
    if allowed * 4 <= n:  # gathering the allowed rows costs less than scanning the int8 copy
        chosen = np.arange(n) if mask is None else np.flatnonzero(mask)
    elif sketch is not None:
        found = int8_scan.candidates(sketch, q, mask, k, codes)
        if found is not None and len(found.rows) * 4 <= n:
            chosen = settled_rows(matrix, q, found, k)
    if chosen is None:  # full float32 scan
        scores = matrix_dot(matrix, q)
        best = top_rows(scores, mask, k)
        return best, scores[best]
    scores = matrix_dot(matrix[chosen], q)
    best = top_rows(scores, None, k)
    return chosen[best], scores[best]


@dataclass(frozen=True, eq=False)
class PoolVectors:
    """A pool's vectors in memory: topic rows and chunk rows with the topic each chunk belongs to.

    Derived at construction: the sorted ids of every topic with a vector (``topic_keys``), each
    row's index into it (``topic_slot``, ``chunk_slot``), each topic's chunk rows
    (``chunk_order`` / ``chunk_bounds``) and, for large matrices when the int8 kernel loads, the
    int8 sketches. ``sketch``: None = automatic, False = never, True = whenever the kernel loads.
    """

    dim: int
    topic_ids: np.ndarray        # int64 [n_topics]
    topic_matrix: np.ndarray     # float32 [n_topics, dim]
    chunk_ids: np.ndarray        # int64 [n_chunks]
    chunk_topic_ids: np.ndarray  # int64 [n_chunks]
    chunk_matrix: np.ndarray     # float32 [n_chunks, dim]
    sketch: InitVar[bool | None] = None
    topic_keys: np.ndarray = field(init=False, repr=False)
    topic_slot: np.ndarray = field(init=False, repr=False)
    chunk_slot: np.ndarray = field(init=False, repr=False)
    chunk_order: np.ndarray = field(init=False, repr=False)
    chunk_bounds: np.ndarray = field(init=False, repr=False)
    topic_sketch: int8_scan.Int8Sketch | None = field(init=False, repr=False)
    chunk_sketch: int8_scan.Int8Sketch | None = field(init=False, repr=False)

    def __post_init__(self, sketch: bool | None) -> None:
        keys = np.union1d(self.topic_ids, self.chunk_topic_ids).astype(np.int64)
        chunk_slot = np.searchsorted(keys, self.chunk_topic_ids)
        order = np.argsort(chunk_slot, kind="stable")
        bounds = np.searchsorted(chunk_slot[order], np.arange(len(keys) + 1))
        sets = object.__setattr__
        sets(self, "topic_keys", keys)
        sets(self, "topic_slot", np.searchsorted(keys, self.topic_ids))
        sets(self, "chunk_slot", chunk_slot)
        sets(self, "chunk_order", order)
        sets(self, "chunk_bounds", bounds)
        kernel = int8_scan.int8_kernel() if sketch is not False else None

        def build(matrix: np.ndarray) -> int8_scan.Int8Sketch | None:
            big = len(matrix) >= SKETCH_MIN_ROWS or sketch is True
            if kernel is None or not (big and len(matrix)):
                return None
            return int8_scan.build_sketch(matrix, kernel)

        sets(self, "topic_sketch", build(self.topic_matrix))
        sets(self, "chunk_sketch", build(self.chunk_matrix))

    @classmethod
    def from_rows(cls, topic_rows: Iterable[tuple[int, bytes]],
                  chunk_rows: Iterable[tuple[int, int, bytes]], dim: int, *,
                  sketch: bool | None = None) -> "PoolVectors":
        topics = list(topic_rows)
        chunks = list(chunk_rows)
        return cls(
            dim=dim,
            topic_ids=np.array([t for t, _ in topics], dtype=np.int64),
            topic_matrix=decode_vectors((b for _, b in topics), dim),
            chunk_ids=np.array([c for c, _, _ in chunks], dtype=np.int64),
            chunk_topic_ids=np.array([t for _, t, _ in chunks], dtype=np.int64),
            chunk_matrix=decode_vectors((b for _, _, b in chunks), dim),
            sketch=sketch,
        )

    @classmethod
    def from_vector_rows(cls, topic_rows: Iterable, chunk_rows: Iterable, dim: int, *,
                         sketch: bool | None = None) -> "PoolVectors":
        """From storage rows with ``topic_id``, ``chunk_id`` and ``vec`` attributes."""
        return cls.from_rows(((r.topic_id, r.vec) for r in topic_rows),
                             ((r.chunk_id, r.topic_id, r.vec) for r in chunk_rows), dim, sketch=sketch)

    @classmethod
    def from_streams(cls, topics: tuple[int, Iterable], chunks: tuple[int, Iterable], *,
                     dim: int | None = None, default_dim: int = 0,
                     sketch: bool | None = None) -> "PoolVectors":
        """From ``(count, rows)`` pairs as the storage streams them (``vector_count`` and
        ``iter_vectors``); ``dim`` None: the first BLOB's, else ``default_dim`` for an empty pool."""
        dim, topic_ids, _, topic_matrix = read_vector_stream(*topics, dim, with_chunks=False)
        dim, chunk_topic_ids, chunk_ids, chunk_matrix = read_vector_stream(*chunks, dim, with_chunks=True)
        dim = dim or default_dim
        shape = (0, dim)
        return cls(dim=dim, topic_ids=topic_ids,
                   topic_matrix=topic_matrix if len(topic_ids) else np.empty(shape, _LE_F32),
                   chunk_ids=chunk_ids, chunk_topic_ids=chunk_topic_ids,
                   chunk_matrix=chunk_matrix if len(chunk_ids) else np.empty(shape, _LE_F32),
                   sketch=sketch)

    @property
    def nbytes(self) -> int:
        """Memory held: matrices, ids, derived indices and sketches."""
        arrays = (self.topic_ids, self.topic_matrix, self.chunk_ids, self.chunk_topic_ids, self.chunk_matrix,
                  self.topic_keys, self.topic_slot, self.chunk_slot, self.chunk_order, self.chunk_bounds)
        sketches = (s for s in (self.topic_sketch, self.chunk_sketch) if s is not None)
        return sum(a.nbytes for a in arrays) + sum(s.nbytes for s in sketches)

    def allowed_slots(self, allowed_topic_ids: Collection[int] | np.ndarray) -> np.ndarray:
        """Boolean mask over ``topic_keys``: which of the pool's topics are allowed."""
        allowed = np.asarray(allowed_topic_ids if isinstance(allowed_topic_ids, np.ndarray)
                             else np.fromiter(allowed_topic_ids, dtype=np.int64), dtype=np.int64)
        mask = np.zeros(len(self.topic_keys), dtype=bool)
        if len(allowed) and len(self.topic_keys):
            at = np.searchsorted(self.topic_keys, allowed)
            found = at < len(self.topic_keys)
            found[found] = self.topic_keys[at[found]] == allowed[found]
            mask[at[found]] = True
        return mask

    def best_chunks(self, topic_ids: list[int], q: np.ndarray) -> list[int | None]:
        """Row of each topic's highest-scoring chunk (ties: lower row), None if it has none;
        all topics' chunks scored in one gather."""
        slots = np.searchsorted(self.topic_keys, np.asarray(topic_ids, dtype=np.int64)).tolist()
        keys, bounds = self.topic_keys, self.chunk_bounds
        spans = [(int(bounds[s]), int(bounds[s + 1])) if s < len(keys) and keys[s] == t else (0, 0)
                 for s, t in zip(slots, topic_ids)]
        rows = np.concatenate([self.chunk_order[a:b] for a, b in spans] or [np.zeros(0, np.intp)])
        scores = matrix_dot(self.chunk_matrix[rows], q)
        out: list[int | None] = []
        at = 0
        for a, b in spans:  # rows of a topic ascend, so argmax (first maximum) is the lower row
            out.append(int(rows[at + int(np.argmax(scores[at:at + b - a]))]) if b > a else None)
            at += b - a
        return out


# (matrix "chunk" | "topic", query, allowed-row mask or None, k) -> (rows, float32 scores), best first
TopRows = Callable[[str, np.ndarray, "np.ndarray | None", int], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class VectorHit:
    topic_id: int
    score: float
    chunk_id: int | None


def vector_rank(
    pool: PoolVectors,
    query: np.ndarray,
    allowed_topic_ids: Collection[int] | np.ndarray | None,
    limit: int,
    *,
    top_k: int = TOP_K,
    topic_bonus: float = TOPIC_BONUS,
    top: TopRows | None = None,
) -> list[VectorHit]:
    """Topics ranked by the seed's vector score, best first, at most ``limit``.

    ``top`` (the optional approximate index, ``vectors/approximate.py``; never the default)
    replaces the exact top k of the ``"chunk"`` and ``"topic"`` matrices."""
    q = np.asarray(query, dtype=np.float32).reshape(-1)
    if q.shape[0] != pool.dim:
        raise ValueError(f"query vector has dimension {q.shape[0]}, the pool {pool.dim}")
    chunk_mask = topic_mask = None
    if allowed_topic_ids is not None:
        slots = pool.allowed_slots(allowed_topic_ids)
        chunk_mask, topic_mask = slots[pool.chunk_slot], slots[pool.topic_slot]
    if top is None:
        sketched = pool.chunk_sketch is not None or pool.topic_sketch is not None
        codes = int8_scan.quantize_query(q) if sketched else None
        chunk_rows, chunk_scores = exact_top(pool.chunk_matrix, pool.chunk_sketch, q, chunk_mask, top_k, codes)
        topic_rows, topic_scores = exact_top(pool.topic_matrix, pool.topic_sketch, q, topic_mask, top_k, codes)
    else:  # approximate index hook
        chunk_rows, chunk_scores = top("chunk", q, chunk_mask, top_k)
        topic_rows, topic_scores = top("topic", q, topic_mask, top_k)
    tids = np.concatenate([pool.chunk_topic_ids[chunk_rows], pool.topic_ids[topic_rows]])
    scores = np.concatenate([chunk_scores.astype(np.float64), topic_scores.astype(np.float64) + topic_bonus])
    by_topic = np.lexsort((-scores, tids))  # each topic's best score first
    first = np.ones(len(by_topic), dtype=bool)
    first[1:] = tids[by_topic][1:] != tids[by_topic][:-1]
    best = by_topic[first]
    best = best[np.lexsort((tids[best], -scores[best]))][:limit]  # score descending, then topic id
    ranked = list(zip(tids[best].tolist(), scores[best].tolist()))
    rows = pool.best_chunks([tid for tid, _ in ranked], q)
    return [VectorHit(tid, score, None if row is None else int(pool.chunk_ids[row]))
            for (tid, score), row in zip(ranked, rows)]


MAX_CACHED_POOL_VECTORS = 8


def _vector_bytes(vectors: PoolVectors) -> int:
    held = [v for v in vars(vectors).values() if isinstance(v, np.ndarray)]
    sketches = [s for s in (vectors.topic_sketch, vectors.chunk_sketch) if s is not None]
    return sum(a.nbytes for a in held) + sum(s.nbytes for s in sketches)


def pool_vector_cache(runtime: process.Runtime) -> process.Cache:
    """Matrices per pool, kept while the pool's change stamp is unchanged (an import bumps it)."""
    return runtime.cache("docpool.vectors", max_entries=MAX_CACHED_POOL_VECTORS, sizeof=_vector_bytes)


def cached_pool_vectors(pool_key: Hashable, stamp: Hashable, loader: Callable[[], PoolVectors]) -> PoolVectors:
    """The runtime's ``docpool.vectors`` cache: ``pool_key`` names the pool (e.g. database +
    storage path), ``stamp`` changes whenever an import rewrites it (e.g. an import counter or
    the file mtime); stale matrices are dropped before new ones load."""
    return pool_vector_cache(process.current()).get(pool_key, stamp, loader)


def loaded_pool_vectors(pool_key: Hashable, stamp: Hashable) -> PoolVectors | None:
    """The cached matrices of ``pool_key`` at ``stamp`` without loading them; None when absent."""
    return pool_vector_cache(process.current()).peek(pool_key, stamp)
