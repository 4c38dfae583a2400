"""Whether a vector call's parts move with the host's own speed (issue #18 goal 1's wall times).

Run: knowspec bench host-phases [--seconds 90] [--queries 20] [--pause 2] [--model DIR]. Needs the
latency pool ``benchmarks/docpool_vector.py`` builds (``$KNOWSPEC_BENCH_CACHE/vector-run/latency``).
Writes benchmarks/results/host_phases.json.

In this process, round after round until ``--seconds`` have passed: for each of ``--queries``
labelled queries, the yardstick (``common.yardstick_ms``, one loop: pure Python that no knowspec
change can move), the query embedding and ``vector_rank`` over the pool's 100k chunks; a row is
the round's p50 of each. A round is slow when its yardstick is at least ``SLOW_FACTOR`` times the
run's fastest. The summary gives each part's median in the fast and the slow rounds and its
correlation with the yardstick across rounds: a part that is slow only when the yardstick is
slow is slowed by the host, not by its own code or by the other part.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

sys.path.insert(0, str(Path(__file__).parent))
from common import write_results, yardstick_ms  # noqa: E402
from docpool_setup import default_model_dir, labelled_query_texts, machine_load, pool_vectors, require_latency_pool  # noqa: E402

from knowspec.impl import runtime as process  # noqa: E402
from knowspec.impl.docpool.vectors.embedder import load_embedder  # noqa: E402
from knowspec.impl.docpool.vectors.scoring import vector_rank  # noqa: E402

SLOW_FACTOR = 1.25
PARTS = ("embedding_ms", "ranking_ms")


def phase_summary(rows: list[dict[str, float]], slow_factor: float = SLOW_FACTOR) -> dict:
    """Rounds split by their yardstick (slow: at least ``slow_factor`` times the fastest), each
    part's median in both, and each part's correlation with the yardstick (None when either
    side is constant or there are fewer than two rounds)."""
    fastest = min(r["yardstick_ms"] for r in rows)
    slow = [r for r in rows if r["yardstick_ms"] >= slow_factor * fastest]
    fast = [r for r in rows if r["yardstick_ms"] < slow_factor * fastest]

    def median(group: list[dict[str, float]], key: str) -> float | None:
        return round(statistics.median(r[key] for r in group), 3) if group else None

    def correlation(key: str) -> float | None:
        ys, xs = [r["yardstick_ms"] for r in rows], [r[key] for r in rows]
        if len(rows) < 2 or len(set(ys)) < 2 or len(set(xs)) < 2:
            return None
        return round(statistics.correlation(ys, xs), 3)

    return {"rounds": len(rows), "fastest_yardstick_ms": round(fastest, 3), "slow_factor": slow_factor,
            "fast_rounds": len(fast), "slow_rounds": len(slow),
            "fast": {key: median(fast, key) for key in ("yardstick_ms", *PARTS)},
            "slow": {key: median(slow, key) for key in ("yardstick_ms", *PARTS)},
            "correlation_with_yardstick": {key: correlation(key) for key in PARTS}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=90.0, help="how long to keep measuring rounds")
    parser.add_argument("--queries", type=int, default=20, help="queries per round")
    parser.add_argument("--pause", type=float, default=2.0, help="seconds between rounds")
    parser.add_argument("--model", type=Path, default=None, help="model pack (default: KNOWSPEC_MODEL_CACHE/e5-int8)")
    args = parser.parse_args()
    pool_file = require_latency_pool("host_phases")
    texts = labelled_query_texts()
    load_start = machine_load()
    rows: list[dict[str, float]] = []
    with process.activated():
        embedder = load_embedder(args.model or default_model_dir())
        vectors = pool_vectors(pool_file)
        vector_rank(vectors, embedder.embed_query(texts[0], "query: "), None, 10)  # warm
        end = time.monotonic() + args.seconds
        while time.monotonic() < end:
            stick, embedding, ranking = [], [], []
            for i in range(max(1, args.queries)):
                stick.append(yardstick_ms(repeats=1))
                start = time.perf_counter()
                q = embedder.embed_query(texts[i % len(texts)], "query: ")
                middle = time.perf_counter()
                vector_rank(vectors, q, None, 10)
                embedding.append((middle - start) * 1000)
                ranking.append((time.perf_counter() - middle) * 1000)
            row = {"at": time.strftime("%H:%M:%S"), "yardstick_ms": round(statistics.median(stick), 3),
                   "embedding_ms": round(statistics.median(embedding), 3),
                   "ranking_ms": round(statistics.median(ranking), 3)}
            rows.append(row)
            print(f"{row['at']} yardstick {row['yardstick_ms']:6.2f} ms, embedding {row['embedding_ms']:5.2f} ms, "
                  f"ranking {row['ranking_ms']:5.2f} ms", flush=True)
            time.sleep(max(0.0, args.pause))
    summary = phase_summary(rows)
    print(f"{summary['fast_rounds']} fast rounds (yardstick < {SLOW_FACTOR} x {summary['fastest_yardstick_ms']} ms): "
          f"{summary['fast']}; {summary['slow_rounds']} slow: {summary['slow']}; correlation with the yardstick "
          f"{summary['correlation_with_yardstick']}", flush=True)
    write_results("host_phases", {"chunks": len(vectors.chunk_ids), "queries_per_round": args.queries, "rows": rows,
                                  "summary": summary, "load_start": load_start, "load_end": machine_load()})


if __name__ == "__main__":
    main()
