"""The optional approximate vector index against the exact rule: recall@10, latency, build time, memory.

Run: .venv/bin/knowspec bench docpool-ann [--candidates 200,500,1000] [--queries 60]
[--synthetic-rows 1000000] [--skip-pool]. Writes benchmarks/results/docpool_ann.json. Needs the
``ann`` extra (usearch).

Matrices (each ranked in this process, exact and approximate alternating query by query, so
both see the same load on the shared machine):
- ``pool``: the 100k-chunk latency pool ``benchmarks/docpool_vector.py`` builds
  (``KNOWSPEC_BENCH_CACHE/vector-run/latency/bench-docs.db``; run that benchmark once first),
  queried with the labelled queries embedded by the model pack (``KNOWSPEC_MODEL_CACHE``).
- ``synthetic`` (``--synthetic-rows N``): N chunk rows of random unit vectors, ten chunks per
  topic, no model needed; queries are random unit vectors too. Points spread evenly over the
  sphere are the graph's hard case (every row is about as near as every other), so its recall
  is a lower bound rather than a forecast for real embeddings.

Per matrix: the exact ``vector_rank`` (the default path, int8 sketch included) and, for each
candidate count, the approximate index's rank. Recall@10 is, per query, the share of the exact
rule's top 10 topics that the approximate answer also returns (averaged); ``chunk_recall_at_80``
the share of the exact top 80 chunk rows among the approximate top 80. Latency is the p50 wall
and CPU of one ranking (query embedding excluded: it is the same on both paths). Build time is
the graphs' (chunks and topics); memory is the graphs' own bytes (usearch) and the RSS the build
added. The goal line (``common.goal``): the floor is the exact rank's p50, the figure the
approximate rank's p50 at the default candidate count; bound 1.0 (an approximate index that is
not faster than the exact scan has no reason to exist). The issue sets no bound on recall: it
is measured and reported.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import goal, percentiles, write_results  # noqa: E402
from docpool_setup import LATENCY_POOL, default_model_dir, labelled_query_texts, machine_load, pool_vectors  # noqa: E402

from knowspec.impl import runtime as process  # noqa: E402
from knowspec.impl.docpool.vectors import approximate  # noqa: E402
from knowspec.impl.docpool.vectors.scoring import TOP_K, PoolVectors, exact_top, vector_rank  # noqa: E402

POOL = LATENCY_POOL
CHUNKS_PER_TOPIC = 10
DEFAULT_CANDIDATES = process.RuntimeSettings().vector_candidates


def rss_mib() -> float:
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024


def random_units(rng: np.random.Generator, n: int, dim: int, block: int = 100_000) -> np.ndarray:
    out = np.empty((n, dim), dtype=np.float32)
    for a in range(0, n, block):
        rows = rng.standard_normal((min(block, n - a), dim), dtype=np.float32)
        out[a:a + len(rows)] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return out


def synthetic_vectors(n_chunks: int, dim: int, seed: int = 1) -> PoolVectors:
    """``n_chunks`` random unit chunk rows, ``CHUNKS_PER_TOPIC`` per topic, random unit topic rows."""
    rng = np.random.default_rng(seed)
    n_topics = max(1, n_chunks // CHUNKS_PER_TOPIC)
    chunks = random_units(rng, n_chunks, dim)
    topics = random_units(rng, n_topics, dim)
    return PoolVectors(dim=dim, topic_ids=np.arange(1, n_topics + 1, dtype=np.int64), topic_matrix=topics,
                       chunk_ids=np.arange(1, n_chunks + 1, dtype=np.int64),
                       chunk_topic_ids=(np.arange(n_chunks, dtype=np.int64) % n_topics) + 1, chunk_matrix=chunks)



def pool_queries(count: int, model_dir: Path) -> np.ndarray:
    from knowspec.impl.docpool.vectors.embedder import load_embedder

    embedder = load_embedder(model_dir)
    texts = labelled_query_texts()
    return np.stack([embedder.embed_query(texts[i % len(texts)], "query: ") for i in range(count)])


def _clock(fn):
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, (time.perf_counter() - w0) * 1000, (time.process_time() - c0) * 1000


def measure(vectors: PoolVectors, queries: np.ndarray, candidate_counts: list[int]) -> dict:
    """Build the graphs, then per query the exact rank and each approximate one, alternating."""
    before = rss_mib()
    index = approximate.ApproximateIndex.build(vectors)
    out: dict = {"chunks": int(len(vectors.chunk_ids)), "topics": int(len(vectors.topic_ids)),
                 "build_s": round(index.build_seconds, 1),
                 "memory_mib": {"float32_matrices": round((vectors.chunk_matrix.nbytes + vectors.topic_matrix.nbytes) / 2**20, 1),
                                "exact_int8_sketches": round(sum(s.nbytes for s in (vectors.chunk_sketch, vectors.topic_sketch)
                                                                 if s is not None) / 2**20, 1),
                                "graphs_usearch": round(index.nbytes / 2**20, 1),
                                "rss_added_by_build": round(rss_mib() - before, 1)}}
    exact_wall, exact_cpu = [], []
    runs = {c: {"wall": [], "cpu": [], "recall": [], "chunk_recall": []} for c in candidate_counts}
    for i, q in enumerate(queries):
        exact, wall, cpu = _clock(lambda: vector_rank(vectors, q, None, 10))
        exact_wall.append(wall)
        exact_cpu.append(cpu)
        want = {h.topic_id for h in exact}
        true_rows = set(exact_top(vectors.chunk_matrix, vectors.chunk_sketch, q, None, TOP_K)[0].tolist())
        for c in candidate_counts[i % len(candidate_counts):] + candidate_counts[:i % len(candidate_counts)]:
            got, wall, cpu = _clock(lambda: index.rank(q, None, 10, c))
            run = runs[c]
            run["wall"].append(wall)
            run["cpu"].append(cpu)
            run["recall"].append(len(want & {h.topic_id for h in got}) / max(1, len(want)))
            rows = approximate.candidate_rows(index.chunk_index, len(vectors.chunk_matrix), q, None, TOP_K, c)
            top = approximate.rescored_top(vectors.chunk_matrix, rows, q, TOP_K)[0]
            run["chunk_recall"].append(len(true_rows & set(top.tolist())) / max(1, len(true_rows)))
    out["exact"] = {"wall": percentiles(exact_wall), "cpu_p50_ms": round(statistics.median(exact_cpu), 3)}
    out["approximate"] = {
        str(c): {"recall_at_10": round(statistics.mean(r["recall"]), 4),
                 "recall_at_10_min": round(min(r["recall"]), 2),
                 "chunk_recall_at_80": round(statistics.mean(r["chunk_recall"]), 4),
                 "wall": percentiles(r["wall"]), "cpu_p50_ms": round(statistics.median(r["cpu"]), 3)}
        for c, r in runs.items()}
    for c, r in out["approximate"].items():
        print(f"  candidates {c}: recall@10 {r['recall_at_10']:.3f} (min {r['recall_at_10_min']}), "
              f"chunk recall@80 {r['chunk_recall_at_80']:.3f}, p50 {r['wall']['p50_ms']:.2f} ms "
              f"(exact {out['exact']['wall']['p50_ms']:.2f} ms)", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", default=f"200,{DEFAULT_CANDIDATES},1000",
                        help="candidate counts to measure, comma-separated (default: 200,500,1000)")
    parser.add_argument("--queries", type=int, default=60, help="queries per matrix")
    parser.add_argument("--model", type=Path, default=None, help="model pack for the pool's queries")
    parser.add_argument("--synthetic-rows", type=int, default=0, help="also a synthetic matrix of N random chunk rows")
    parser.add_argument("--skip-pool", action="store_true", help="only the synthetic matrix")
    ns = parser.parse_args()
    if not approximate.available():
        raise SystemExit("docpool-ann needs the 'ann' extra: pip install 'knowspec[ann]'")
    counts = [int(c) for c in ns.candidates.split(",") if c.strip()]
    if DEFAULT_CANDIDATES not in counts:
        counts.append(DEFAULT_CANDIDATES)
    results: dict = {"index": {"dtype": approximate.INDEX_DTYPE, "connectivity": approximate.CONNECTIVITY,
                               "expansion_add": approximate.EXPANSION_ADD,
                               "expansion_search": approximate.EXPANSION_SEARCH},
                     "default_candidates": DEFAULT_CANDIDATES, "machine_load_before": machine_load(), "matrices": {}}
    goals = []
    if not ns.skip_pool:
        if not POOL.is_file():
            raise SystemExit(f"no latency pool at {POOL}: run `knowspec bench docpool-vector` once (or --skip-pool)")
        vectors = pool_vectors(POOL)
        print(f"pool: {len(vectors.chunk_ids)} chunks, {len(vectors.topic_ids)} topics", flush=True)
        queries = pool_queries(ns.queries, ns.model or default_model_dir())
        results["matrices"]["pool"] = measure(vectors, queries, counts)
        del vectors
    if ns.synthetic_rows:
        start = time.perf_counter()
        vectors = synthetic_vectors(ns.synthetic_rows, 384)
        print(f"synthetic: {len(vectors.chunk_ids)} chunks, {len(vectors.topic_ids)} topics "
              f"({time.perf_counter() - start:.1f} s to make)", flush=True)
        queries = random_units(np.random.default_rng(2), ns.queries, 384)
        results["matrices"]["synthetic"] = measure(vectors, queries, counts)
        del vectors
    for name, m in results["matrices"].items():
        row = goal(f"approximate rank p50 at {m['chunks']} chunks ({name}, {DEFAULT_CANDIDATES} candidates) "
                   f"vs exact", m["exact"]["wall"]["p50_ms"],
                   m["approximate"][str(DEFAULT_CANDIDATES)]["wall"]["p50_ms"], 1.0, "ms")
        row["recall_at_10"] = m["approximate"][str(DEFAULT_CANDIDATES)]["recall_at_10"]
        print(f"  recall@10 against the exact rule: {row['recall_at_10']:.3f} (reported; no bound)", flush=True)
        goals.append(row)
    results["goal"] = goals
    results["machine_load_after"] = machine_load()
    write_results("docpool_ann", results)


if __name__ == "__main__":
    main()
