"""Why a vector call's parts take longer in the server than alone (issue #18 goal 1).

Run: knowspec bench vector-cache-interference [--calls 60] [--model DIR]. Needs the latency pool
``benchmarks/docpool_vector.py`` builds (``$KNOWSPEC_BENCH_CACHE/vector-run/latency``). Writes
benchmarks/results/vector_cache_interference.json.

In this process, on the labelled queries, p50 of each:

- the query embedding and ``vector_rank``, each run alone call after call, then alternated (one
  embedding, one ranking, as a server's vector call does them);
- the int8 scan of the chunk sketch alone and alternated with the embedding, for the pool's sketch
  and for one of half its rows (half the bytes a query reads: what a 4-bit sketch would read).

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

        results: dict = {"chunks": len(vectors.chunk_ids), "calls": calls,
                         "embedding_and_ranking": alone_and_alternating(
                             embed, lambda i: vector_rank(vectors, q_vectors[i], None, 10), calls)}
        half_rows = len(vectors.chunk_matrix) // 2
        half = build_sketch(np.ascontiguousarray(vectors.chunk_matrix[:half_rows]), kernel)
        for name, sketch in (("embedding_and_chunk_scan", vectors.chunk_sketch),
                             ("embedding_and_half_chunk_scan", half)):
            assert sketch is not None
            results[name] = {"sketch_mib": round(sketch.code_bytes / 2**20, 1),
                             **alone_and_alternating(embed, lambda i, s=sketch: s.scan(shifted[i]), calls)}
    for name in ("embedding_and_ranking", "embedding_and_chunk_scan", "embedding_and_half_chunk_scan"):
        row = results[name]
        print(f"{name}: alone {row['alone_ms'][0]} + {row['alone_ms'][1]} ms, "
              f"alternated {row['alternated_ms'][0]} + {row['alternated_ms'][1]} ms", flush=True)
    write_results("vector_cache_interference", {**results, "load_start": load_start, "load_end": machine_load()})


if __name__ == "__main__":
    main()
