"""How many rows a coarser sketch would leave to score exactly (issue #18 goal 1).

Run: knowspec bench vector-code-widths [--queries 40] [--model DIR]. Needs the latency pool
``benchmarks/docpool_vector.py`` builds (``$KNOWSPEC_BENCH_CACHE/vector-run/latency``). Writes
benchmarks/results/vector_code_widths.json.

The int8 chunk sketch is the call's biggest read (38 MB at 100k chunks), and a smaller one would
leave more of the cache to the query embedding (``vector_cache_interference.py``). But the top 80
must stay exactly a float32 scan's, so a sketch only helps if its intervals stay narrow enough to
rule most rows out. For each candidate code, in this process, over the pool's chunk matrix and
the labelled queries, this counts the rows whose rigorous interval reaches the 80th best lower
end (the rows that would be scored exactly):

- row codes of fewer levels (``s_v = max|v|/L``, codes in [-L, L]): 8 bits down to 4;
- the same codes of the centred rows ``v - m`` (``m`` the matrix's mean row: ``q.m`` is the same
  for every row, so only the centred part needs an interval, and e5 rows share a large mean, so
  what is left to code is about half as long);
- the first ``d`` dimensions after a rotation onto the matrix's principal axes, int8-coded, the
  rest bounded by ``|q_rest|*|v_rest|`` (fewer bytes a row, same rigour).

The query is taken exactly and float rounding is ignored, so each count is a lower bound of what
a real kernel would leave: the shipped sketch (``int8_scan.candidates``, its query quantized too)
is measured beside the 8-bit figure to show how close the model is.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from common import write_results  # noqa: E402
from docpool_setup import default_model_dir, labelled_query_texts, machine_load, pool_vectors, require_latency_pool  # noqa: E402

from knowspec.impl import runtime as process  # noqa: E402
from knowspec.impl.docpool.vectors import int8_scan  # noqa: E402
from knowspec.impl.docpool.vectors.embedder import load_embedder  # noqa: E402

TOP_K = 80
LEVELS = (127, 63, 31, 15, 7)          # 8, 7, 6, 5 and 4 bits a value
KEPT_DIMENSIONS = (288, 192, 128)
RANKS = (1, 80, 500, 5000)


def bits(levels: int) -> int:
    """Bits a code in [-levels, levels] needs."""
    return math.ceil(math.log2(2 * levels + 1))


def coded_rows(matrix: np.ndarray, levels: int) -> tuple[np.ndarray, np.ndarray]:
    """``(coded, err)``: each row rounded to ``levels`` steps of ``max|v|/levels`` (float32) and
    the norm of what the rounding lost (float64)."""
    top = np.abs(matrix).max(axis=1).astype(np.float64)
    scale = np.where(top > 0, top / levels, 1.0)
    codes = np.clip(np.rint(matrix / scale[:, None]), -levels, levels)
    coded = (codes * scale[:, None]).astype(np.float32)
    return coded, np.linalg.norm(matrix.astype(np.float64) - coded, axis=1)


def reaching_rows(centre: np.ndarray, radius: np.ndarray, k: int = TOP_K) -> np.ndarray:
    """Rows whose interval ``centre ± radius`` reaches the ``k``-th best lower end: the rows an
    exact top ``k`` must score (every other row scores below ``k`` rows)."""
    low = centre - radius
    if len(low) <= k:
        return np.arange(len(low))
    kth_low = np.partition(low, len(low) - k)[len(low) - k]
    return np.flatnonzero(centre + radius >= kth_low)


def candidates_per_query(coded: np.ndarray, err: np.ndarray, queries: np.ndarray, k: int = TOP_K,
                         rest: tuple[np.ndarray, np.ndarray] | None = None) -> list[int]:
    """How many rows each query must score exactly with ``coded`` rows (``err``: each row's
    rounding loss); ``rest``: the dimensions left out, as (rows' norms, queries' norms)."""
    counts = []
    for i, q in enumerate(queries):
        centre = coded @ q.astype(np.float32)
        radius = float(np.linalg.norm(q)) * err
        if rest is not None:
            radius = radius + rest[1][i] * rest[0]
        counts.append(len(reaching_rows(centre.astype(np.float64), radius, k)))
    return counts


def summary(counts: list[int], rows: int) -> dict:
    return {"median": statistics.median(counts), "max": max(counts),
            "median_share": round(statistics.median(counts) / rows, 4)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--model", type=Path, default=None, help="model pack (default: KNOWSPEC_MODEL_CACHE/e5-int8)")
    args = parser.parse_args()
    pool_file = require_latency_pool("vector_code_widths")
    texts = labelled_query_texts()
    load_start = machine_load()
    with process.activated():
        embedder = load_embedder(args.model or default_model_dir())
        vectors = pool_vectors(pool_file)
        queries = np.array([embedder.embed_query(texts[i % len(texts)], "query: ")
                            for i in range(max(1, args.queries))], dtype=np.float64)
    matrix = vectors.chunk_matrix
    rows, dim = matrix.shape
    print(f"{rows} chunks of {dim} dimensions, {len(queries)} queries, top {TOP_K}", flush=True)
    shipped = None
    if vectors.chunk_sketch is not None:
        found = [int8_scan.candidates(vectors.chunk_sketch, q.astype(np.float32), None, TOP_K) for q in queries]
        shipped = summary([len(f.rows) for f in found if f is not None], rows)
        print(f"shipped int8 sketch (query quantized too): median {shipped['median']}, max {shipped['max']}", flush=True)

    codes, centred_codes = [], []
    centred = matrix - matrix.mean(axis=0, dtype=np.float64).astype(np.float32)
    for levels in LEVELS:
        for rows_coded, table, label in ((matrix, codes, ""), (centred, centred_codes, " centred")):
            coded, err = coded_rows(rows_coded, levels)
            row = {"levels": levels, "bits": bits(levels),
                   "sketch_mib": round(rows * dim * bits(levels) / 8 / 2**20, 1),
                   "err_median": round(float(np.median(err)), 4),
                   **summary(candidates_per_query(coded, err, queries), rows)}
            table.append(row)
            print(f"{row['bits']} bits{label}: sketch {row['sketch_mib']} MiB, |e_v| median {row['err_median']}, "
                  f"rows to score median {row['median']} ({row['median_share']:.1%}), max {row['max']}", flush=True)
            del coded
    del centred

    _, _, axes = np.linalg.svd(matrix[::10].astype(np.float64), full_matrices=False)
    turned, turned_queries = matrix @ axes.T.astype(np.float32), queries @ axes.T
    truncated = []
    for d in KEPT_DIMENSIONS:
        coded, err = coded_rows(np.ascontiguousarray(turned[:, :d]), 127)
        rest = (np.linalg.norm(turned[:, d:].astype(np.float64), axis=1), np.linalg.norm(turned_queries[:, d:], axis=1))
        row = {"dimensions": d, "sketch_mib": round(rows * d / 2**20, 1),
               "rest_norm_median": round(float(np.median(rest[0])), 3),
               **summary(candidates_per_query(coded, err, turned_queries[:, :d], rest=rest), rows)}
        truncated.append(row)
        print(f"int8 on {d} principal dimensions: sketch {row['sketch_mib']} MiB, |v_rest| median "
              f"{row['rest_norm_median']}, rows to score median {row['median']} ({row['median_share']:.1%})", flush=True)

    scores = np.sort(queries.astype(np.float32) @ matrix.T, axis=1)[:, ::-1]
    by_rank = {str(r): round(float(np.median(scores[:, r - 1])), 4) for r in RANKS if r <= rows}
    print(f"median score at rank {', '.join(f'{r}: {s}' for r, s in by_rank.items())}", flush=True)
    write_results("vector_code_widths", {
        "chunks": rows, "dim": dim, "queries": len(queries), "top_k": TOP_K, "shipped_int8_sketch": shipped,
        "row_codes": codes, "centred_row_codes": centred_codes, "principal_dimensions_int8": truncated, "median_score_at_rank": by_rank,
        "load_start": load_start, "load_end": machine_load()})


if __name__ == "__main__":
    main()
