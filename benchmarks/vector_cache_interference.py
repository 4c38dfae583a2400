"""Why a vector call's parts take longer in the server than alone (issue #18 goal 1).

Run: knowspec bench vector-cache-interference [--calls 60] [--model DIR]. Needs the latency pool
``benchmarks/docpool_vector.py`` builds (``$KNOWSPEC_BENCH_CACHE/vector-run/latency``). Writes
benchmarks/results/vector_cache_interference.json.

In this process, on the labelled queries, p50 of each:

- the query embedding and ``vector_rank``, each run alone call after call, then alternated (one
  embedding, one ranking, as a server's vector call does them);
- the int8 scan of the chunk sketch alone and alternated with the embedding, for the pool's sketch
  and for one of half its rows (half the bytes a query reads: what a 4-bit sketch would read);
- the host's read bandwidth over buffers of growing size, read again and again (``read_bandwidth``):
  where it drops is the cache a call's working set (the model's weights and both sketches) has to
  fit in for the alternated figures to equal the lone ones.

Both the embedding (the model's layer weights) and the scan (the chunk sketch) are bound by memory
bandwidth: alternated, each finds the cache holding the other's bytes. The half-size sketch shows
how much of that a smaller sketch would win back on the scan and the embedding (not the extra
exact scores a coarser code's wider intervals would ask for: ``vector_code_widths.py`` counts
them, and no code smaller than int8 keeps them few).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from common import write_results  # noqa: E402
from docpool_setup import default_model_dir, labelled_query_texts, machine_load, pool_vectors, require_latency_pool  # noqa: E402

from knowspec.impl import runtime as process  # noqa: E402
from knowspec.impl.docpool.vectors.embedder import load_embedder  # noqa: E402
from knowspec.impl.docpool.vectors.int8_scan import build_sketch, int8_kernel, quantize_query  # noqa: E402
from knowspec.impl.docpool.vectors.scoring import vector_rank  # noqa: E402


def p50_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


READ_SIZES_MIB = (1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 256)


def read_bandwidth(sizes_mib: tuple[int, ...] = READ_SIZES_MIB, seconds: float = 0.2) -> list[dict]:
    """GB/s reading each buffer whole (an OR-reduce over 64-bit words), repeated for ``seconds``
    after one warm-up pass: the plateaus are the caches, the last one main memory."""
    rows = []
    for mib in sizes_mib:
        words = np.ones(mib * 2**20 // 8, dtype=np.uint64)
        np.bitwise_or.reduce(words)
        reads, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds or reads < 3:
            np.bitwise_or.reduce(words)
            reads += 1
        rows.append({"mib": mib, "gb_per_s": round(words.nbytes * reads / elapsed / 1e9, 1)})
    return rows


def alone_and_alternating(first: Callable[[int], object], second: Callable[[int], object], calls: int) -> dict:
    """p50 of ``first`` and ``second`` each run ``calls`` times in a row, then alternated."""
    alone = ([timed(lambda i=i: first(i)) for i in range(calls)], [timed(lambda i=i: second(i)) for i in range(calls)])
    alternated: tuple[list[float], list[float]] = ([], [])
    for i in range(calls):
        alternated[0].append(timed(lambda: first(i)))
        alternated[1].append(timed(lambda: second(i)))
    return {"alone_ms": [p50_ms(alone[0]), p50_ms(alone[1])], "alternated_ms": [p50_ms(alternated[0]), p50_ms(alternated[1])]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--model", type=Path, default=None, help="model pack (default: KNOWSPEC_MODEL_CACHE/e5-int8)")
    args = parser.parse_args()
    pool_file = require_latency_pool("vector_cache_interference")
    kernel = int8_kernel()
    if kernel is None:
        raise SystemExit("vector_cache_interference: the int8 kernel is not available here (onnxruntime missing?)")
    queries = labelled_query_texts()
    calls = max(1, args.calls)
    load_start = machine_load()
    with process.activated():
        embedder = load_embedder(args.model or default_model_dir())
        vectors = pool_vectors(pool_file)
        if vectors.chunk_sketch is None:
            raise SystemExit("vector_cache_interference: the pool's vectors have no int8 sketch")
        query = [queries[i % len(queries)] for i in range(calls)]
        q_vectors = [embedder.embed_query(q, "query: ") for q in query]
        shifted = [quantize_query(q).shifted for q in q_vectors]

        def embed(i: int) -> object:
            return embedder.embed_query(query[i], "query: ")

        model_file = (args.model or default_model_dir()) / "model_int8.onnx"
        sketches = [s for s in (vectors.chunk_sketch, vectors.topic_sketch) if s is not None]
        results: dict = {"chunks": len(vectors.chunk_ids), "calls": calls,
                         "working_set_mib": {
                             "model_file": round(model_file.stat().st_size / 2**20, 1) if model_file.exists() else None,
                             "sketches": round(sum(s.code_bytes for s in sketches) / 2**20, 1)},
                         "embedding_and_ranking": alone_and_alternating(
                             embed, lambda i: vector_rank(vectors, q_vectors[i], None, 10), calls)}
        half_rows = len(vectors.chunk_matrix) // 2
        half = build_sketch(np.ascontiguousarray(vectors.chunk_matrix[:half_rows]), kernel)
        for name, sketch in (("embedding_and_chunk_scan", vectors.chunk_sketch),
                             ("embedding_and_half_chunk_scan", half)):
            assert sketch is not None
            results[name] = {"sketch_mib": round(sketch.code_bytes / 2**20, 1),
                             **alone_and_alternating(embed, lambda i, s=sketch: s.scan(shifted[i]), calls)}
        results["read_bandwidth"] = read_bandwidth()
    for name in ("embedding_and_ranking", "embedding_and_chunk_scan", "embedding_and_half_chunk_scan"):
        row = results[name]
        print(f"{name}: alone {row['alone_ms'][0]} + {row['alone_ms'][1]} ms, "
              f"alternated {row['alternated_ms'][0]} + {row['alternated_ms'][1]} ms", flush=True)
    print("working set (MiB): " + ", ".join(f"{k} {v}" for k, v in results["working_set_mib"].items()), flush=True)
    print("read bandwidth (GB/s) by buffer size: "
          + ", ".join(f"{r['mib']} MiB {r['gb_per_s']}" for r in results["read_bandwidth"]), flush=True)
    write_results("vector_cache_interference", {**results, "load_start": load_start, "load_end": machine_load()})


if __name__ == "__main__":
    main()
