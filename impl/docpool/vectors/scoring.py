"""Vector scoring for doc_search ``vector`` mode, the BLOB layout of stored vectors, and the
per-process cache of a pool's vector matrices.

Seed rule: ``score(topic) = max(chunk·q over the top 80 chunks, topic·q over the top 80 topics
+ 0.02)`` over allowed topics only; the score is a cosine (larger is better); the snippet is the
first 200 characters of the topic's best chunk.

How the pool helper calls it (``impl/docpool/search.py``)::

    vectors = cached_pool_vectors(pool_key, change_stamp,
                                  lambda: PoolVectors.from_rows(topic_rows, chunk_rows, dim))
    hits = vector_rank(vectors, q, allowed_topic_ids, limit)        # [VectorHit]
    # hybrid: knowspec.impl.rules.rrf.hybrid_rank(fts_topic_ids,
    #                                             [(h.topic_id, h.score) for h in hits], limit)

- ``topic_rows``: ``(topic_id, blob)``; ``chunk_rows``: ``(chunk_id, topic_id, blob)``; ids are
  integers (the pool's row ids).
- ``allowed_topic_ids``: the topics the caller may see *and* that pass the collection filter,
  or ``None`` for all. The mask is applied before the top-80 cut, so a forbidden topic never
  appears and never pushes an allowed one out.
- ``VectorHit.chunk_id`` is the best chunk of the topic (``None`` if it has no chunk vector);
  the snippet is ``vector_snippet(chunk_text)``.
- Ties are broken by topic id ascending, so the order is deterministic.

BLOB layout (all backends: SQLite BLOB, PostgreSQL ``bytea``, Firebird BLOB): the ``dim``
components of one unit-length vector as IEEE-754 float32, little-endian, packed with no header
and no padding, so ``len(blob) == 4 * dim`` (1,536 bytes for e5-small's 384 dimensions).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Collection, Hashable, Iterable

import numpy as np

TOP_K = 80
TOPIC_BONUS = 0.02
SNIPPET_CHARS = 200
_LE_F32 = np.dtype("<f4")


def encode_vector(vector: np.ndarray) -> bytes:
    """One vector as a float32 little-endian BLOB."""
    return np.ascontiguousarray(np.asarray(vector, dtype=_LE_F32).reshape(-1)).tobytes()


def encode_vectors(matrix: np.ndarray) -> list[bytes]:
    """One BLOB per row of ``matrix``."""
    return [encode_vector(row) for row in np.asarray(matrix)]


def decode_vectors(blobs: Iterable[bytes], dim: int) -> np.ndarray:
    """BLOBs -> float32 ``[n, dim]`` matrix; a BLOB of the wrong size is an error, never padded."""
    parts = list(blobs)  # references only: a 100k-chunk pool's BLOBs are ~150 MB, never copied whole
    out = np.empty((len(parts), dim), dtype=np.float32)
    for i, blob in enumerate(parts):
        if len(blob) != 4 * dim:
            raise ValueError(f"vector {i} has {len(blob)} bytes, expected {4 * dim} (dimension {dim})")
        out[i] = np.frombuffer(blob, dtype=_LE_F32)
    return out


def vector_snippet(chunk_text: str) -> str:
    return chunk_text[:SNIPPET_CHARS]


@dataclass(frozen=True)
class PoolVectors:
    """A pool's vectors in memory: topic rows and chunk rows with the topic each chunk belongs to."""

    dim: int
    topic_ids: np.ndarray        # int64 [n_topics]
    topic_matrix: np.ndarray     # float32 [n_topics, dim]
    chunk_ids: np.ndarray        # int64 [n_chunks]
    chunk_topic_ids: np.ndarray  # int64 [n_chunks]
    chunk_matrix: np.ndarray     # float32 [n_chunks, dim]

    @classmethod
    def from_rows(cls, topic_rows: Iterable[tuple[int, bytes]],
                  chunk_rows: Iterable[tuple[int, int, bytes]], dim: int) -> "PoolVectors":
        topics = list(topic_rows)
        chunks = list(chunk_rows)
        return cls(
            dim=dim,
            topic_ids=np.array([t for t, _ in topics], dtype=np.int64),
            topic_matrix=decode_vectors((b for _, b in topics), dim),
            chunk_ids=np.array([c for c, _, _ in chunks], dtype=np.int64),
            chunk_topic_ids=np.array([t for _, t, _ in chunks], dtype=np.int64),
            chunk_matrix=decode_vectors((b for _, _, b in chunks), dim),
        )

    @classmethod
    def from_vector_rows(cls, topic_rows: Iterable, chunk_rows: Iterable, dim: int) -> "PoolVectors":
        """From storage rows with ``topic_id``, ``chunk_id`` and ``vec`` attributes."""
        return cls.from_rows(((r.topic_id, r.vec) for r in topic_rows),
                             ((r.chunk_id, r.topic_id, r.vec) for r in chunk_rows), dim)


@dataclass(frozen=True)
class VectorHit:
    topic_id: int
    score: float
    chunk_id: int | None


def matrix_dot(matrix: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``matrix @ q`` on the calling thread.

    ``einsum`` does the same float32 dot products without OpenBLAS, whose worker threads spin
    while they wait. On the shared 2-core project host the server's vector p50 at 100k chunks was
    96 ms with OpenBLAS's default threads and 49 ms with one; einsum costs the same CPU as
    single-threaded BLAS (~10 ms for 100k x 384) and needs no environment variable.
    """
    return np.einsum("ij,j->i", matrix, q)


def _allowed_mask(ids: np.ndarray, allowed: np.ndarray | None) -> np.ndarray:
    return np.ones(len(ids), dtype=bool) if allowed is None else np.isin(ids, allowed)


def top_rows(scores: np.ndarray, mask: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` best allowed rows, best first (ties: lower row index first)."""
    candidates = np.flatnonzero(mask)
    if len(candidates) > k:
        cut = np.partition(scores[candidates], len(candidates) - k)[len(candidates) - k]
        candidates = candidates[scores[candidates] >= cut]
    order = np.lexsort((candidates, -scores[candidates].astype(np.float64)))
    return candidates[order][:k]


def _best_chunk_per_topic(pool: PoolVectors, chunk_scores: np.ndarray, rows: np.ndarray) -> dict[int, int]:
    """``{topic_id: chunk row}`` of each topic's best-scoring chunk among ``rows``."""
    if len(rows) == 0:
        return {}
    topics = pool.chunk_topic_ids[rows]
    order = np.lexsort((rows, -chunk_scores[rows].astype(np.float64), topics))
    first = np.unique(topics[order], return_index=True)[1]
    best_rows = rows[order][first]
    return dict(zip(pool.chunk_topic_ids[best_rows].tolist(), best_rows.tolist()))


def vector_rank(
    pool: PoolVectors,
    query: np.ndarray,
    allowed_topic_ids: Collection[int] | None,
    limit: int,
    *,
    top_k: int = TOP_K,
    topic_bonus: float = TOPIC_BONUS,
) -> list[VectorHit]:
    """Topics ranked by the seed's vector score, best first, at most ``limit``."""
    q = np.asarray(query, dtype=np.float32).reshape(-1)
    if q.shape[0] != pool.dim:
        raise ValueError(f"query vector has dimension {q.shape[0]}, the pool {pool.dim}")
    allowed = None if allowed_topic_ids is None else np.fromiter(allowed_topic_ids, dtype=np.int64)
    chunk_scores = matrix_dot(pool.chunk_matrix, q)
    topic_scores = matrix_dot(pool.topic_matrix, q)
    chunk_mask = _allowed_mask(pool.chunk_topic_ids, allowed)
    best: dict[int, float] = {}
    for row in top_rows(chunk_scores, chunk_mask, top_k):
        tid = int(pool.chunk_topic_ids[row])
        best[tid] = max(best.get(tid, -np.inf), float(chunk_scores[row]))
    for row in top_rows(topic_scores, _allowed_mask(pool.topic_ids, allowed), top_k):
        tid = int(pool.topic_ids[row])
        best[tid] = max(best.get(tid, -np.inf), float(topic_scores[row]) + topic_bonus)
    ranked = sorted(best.items(), key=lambda item: (-item[1], item[0]))[:limit]
    if not ranked:
        return []
    wanted = np.isin(pool.chunk_topic_ids, np.array([t for t, _ in ranked], dtype=np.int64)) & chunk_mask
    best_chunk = _best_chunk_per_topic(pool, chunk_scores, np.flatnonzero(wanted))
    return [
        VectorHit(tid, score, int(pool.chunk_ids[best_chunk[tid]]) if tid in best_chunk else None)
        for tid, score in ranked
    ]


class PoolVectorCache:
    """Matrices per pool, kept while the pool's change stamp is unchanged (an import bumps it)."""

    def __init__(self) -> None:
        self._entries: dict[Hashable, tuple[Hashable, PoolVectors]] = {}
        self._lock = threading.Lock()

    def get(self, pool_key: Hashable, stamp: Hashable, loader: Callable[[], PoolVectors]) -> PoolVectors:
        with self._lock:
            entry = self._entries.get(pool_key)
            if entry is not None and entry[0] == stamp:
                return entry[1]
            vectors = loader()
            self._entries[pool_key] = (stamp, vectors)
            return vectors

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


pool_vector_cache = PoolVectorCache()


def cached_pool_vectors(pool_key: Hashable, stamp: Hashable, loader: Callable[[], PoolVectors]) -> PoolVectors:
    """The process-wide cache: ``pool_key`` names the pool (e.g. database + storage path),
    ``stamp`` changes whenever an import rewrites it (e.g. an import counter or the file mtime)."""
    return pool_vector_cache.get(pool_key, stamp, loader)
