"""Embedding latency of two model packs, alternated call by call in one process.

Run: .venv/bin/python benchmarks/model_pack_ab.py --pack NAME=DIR --pack NAME=DIR [--calls 200]
[--out NAME]. Writes benchmarks/results/model_pack_ab.json (or ``--out``).

For a change to the pack's graph (``onnx_graph``, e.g. fused attention): build one pack before
and one after (``knowspec model build --out DIR``), then time both here. Each call embeds with
one pack then the other (the order flips each call), so the shared host's load reaches both
alike; the ratio of the p50s in one run is the figure to trust. Timed: the labelled benchmark
queries with the ``query: `` prefix (``embed_query``, the vector search path), and passages of
at most 64 and 256 tokens (``embed``, the import path). Also the largest cosine gap between the two
packs' vectors of the same text: a faster graph must not move the vectors.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from common import percentiles, write_results  # noqa: E402
from docpool_setup import labelled_query_texts, machine_load  # noqa: E402

from knowspec.impl.docpool.vectors.embedder import load_embedder  # noqa: E402

PASSAGE_TOKENS = (64, 256)


def passage_of(embedder, tokens: int) -> str:
    """The longest run of this file's words that encodes to at most ``tokens`` tokens."""
    words = Path(__file__).read_text("utf-8").split()
    text = ""
    for end in range(1, len(words) + 1):
        longer = " ".join(words[:end])
        if len(embedder.tokenizer.encode("passage: " + longer).ids) > tokens:
            break
        text = longer
    return text


def alternate(calls: dict[str, callable], n: int) -> dict[str, list[float]]:
    """Wall milliseconds of each call, run in turn with the order flipped every round."""
    samples: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    for i in range(n):
        for name in (names if i % 2 == 0 else names[::-1]):
            start = time.perf_counter()
            calls[name](i)
            samples[name].append((time.perf_counter() - start) * 1000)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pack", action="append", required=True, metavar="NAME=DIR",
                        help="a model pack folder, twice (the first is the baseline)")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--out", default="model_pack_ab", help="results name")
    ns = parser.parse_args()
    packs = dict(item.split("=", 1) for item in ns.pack)
    if len(packs) != 2:
        raise SystemExit("name exactly two packs: --pack before=DIR --pack after=DIR")
    embedders = {name: load_embedder(Path(folder)) for name, folder in packs.items()}
    queries = labelled_query_texts()
    base, other = list(embedders)
    cosines = [float(embedders[base].embed_query(q, "query: ") @ embedders[other].embed_query(q, "query: "))
               for q in queries]
    load0 = machine_load()
    results: dict[str, dict] = {}
    query_samples = alternate({name: (lambda i, e=e: e.embed_query(queries[i % len(queries)], "query: "))
                               for name, e in embedders.items()}, ns.calls)
    results["query"] = {name: percentiles(s) for name, s in query_samples.items()}
    for tokens in PASSAGE_TOKENS:
        text = passage_of(embedders[base], tokens)
        samples = alternate({name: (lambda i, e=e: e.embed([text], "passage: ")) for name, e in embedders.items()},
                            max(10, ns.calls // 10))
        results[f"passage_{tokens}_tokens"] = {name: percentiles(s) for name, s in samples.items()}
    for figures in results.values():
        figures["ratio_p50"] = round(figures[other]["p50_ms"] / figures[base]["p50_ms"], 3)
    load1 = machine_load()
    for kind, figures in results.items():
        print(f"{kind:22s} {base} {figures[base]['p50_ms']:8.3f} ms  {other} {figures[other]['p50_ms']:8.3f} ms"
              f"  ratio {figures['ratio_p50']:.3f}")
    print(f"smallest cosine between the packs' query vectors: {min(cosines):.7f}")
    write_results(ns.out, {"packs": {name: str(Path(folder).name) for name, folder in packs.items()},
                           "calls": ns.calls, "figures": results,
                           "min_query_cosine": round(float(np.min(cosines)), 7),
                           "load_start": load0, "load_end": load1})


if __name__ == "__main__":
    main()
