"""Embedding latency of two model packs, alternated call by call in one process.

Run: .venv/bin/python benchmarks/model_pack_ab.py --pack NAME=DIR --pack NAME=DIR [--calls 200]
[--every-fusion NAME] [--op-profile] [--out NAME]. Writes benchmarks/results/model_pack_ab.json
(or ``--out``).

For a change to the pack's graph (``onnx_graph``, e.g. fused attention): build one pack before
and one after (``knowspec model build --out DIR``), then time both here. Each call embeds with
one pack then the other (the order flips each call), so the shared host's load reaches both
alike; the ratio of the p50s in one run is the figure to trust. Timed: the labelled benchmark
queries with the ``query: `` prefix (``embed_query``, the vector search path), and passages of
at most 64 and 256 tokens (``embed``, the import path). Also the largest cosine gap between the two
packs' vectors of the same text: a faster graph must not move the vectors.

For a change to the session instead (``embedder.pack_session``): name the same folder twice and
load one with ``--every-fusion NAME``, i.e. with every ONNX Runtime fusion, ``embedder.UNFUSED``
included. ``--op-profile`` adds, per pack, ONNX Runtime's profile of the query runs: the nodes
and the kernel microseconds per run of each operator type (``kernel_time_by_op``), and the
microseconds per run outside the kernels.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from common import percentiles, write_results  # noqa: E402
from docpool_setup import labelled_query_texts, machine_load  # noqa: E402

from knowspec.impl.docpool.vectors.embedder import MODEL_FILE, UNFUSED, open_pack, pack_session, session_options  # noqa: E402
from knowspec.impl.docpool.vectors.parallelism import query_threads  # noqa: E402

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


def kernel_time_by_op(events: Iterable[dict], skip_runs: int = 0) -> dict[str, dict[str, float]]:
    """ONNX Runtime profile events -> per operator type, nodes and kernel microseconds per run,
    the costliest first: the nodes' kernel events of every run (``model_run``) after the first
    ``skip_runs``."""
    events = list(events)
    starts = sorted(float(e["ts"]) for e in events if e.get("cat") == "Session" and e.get("name") == "model_run")
    counted = starts[skip_runs:]
    if not counted:
        return {}
    totals: dict[str, list[float]] = {}
    for event in events:
        if (event.get("cat") == "Node" and str(event.get("name", "")).endswith("_kernel_time")
                and float(event.get("ts", 0)) >= counted[0]):
            op = event.get("args", {}).get("op_name", "?")
            entry = totals.setdefault(op, [0, 0.0])
            entry[0] += 1
            entry[1] += float(event.get("dur", 0))
    runs = len(counted)
    ranked = sorted(totals.items(), key=lambda item: -item[1][1])
    return {op: {"nodes_per_run": round(count / runs, 2), "kernel_us_per_run": round(us / runs, 1)}
            for op, (count, us) in ranked}


WARM_RUNS = 5


def op_profile(embedder, unfused: tuple[str, ...], queries: list[str]) -> dict:
    """``kernel_time_by_op`` over one embedding of each query, with a profiled copy of the
    embedder's session, and the microseconds a query's ``embed_query`` spends outside the
    kernels (tokens, inputs, ONNX Runtime between nodes, pooling; the profiler on)."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory(prefix="knowspec-ort-profile-") as folder:
        options = session_options(ort, query_threads())
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(folder) / "profile")
        saved, embedder.session = embedder.session, pack_session(ort, embedder.model_dir / MODEL_FILE, query_threads(),
                                                                 options=options, unfused=unfused)
        try:
            for q in queries[:WARM_RUNS]:
                embedder.embed_query(q, "query: ")
            start = time.perf_counter()
            for q in queries:
                embedder.embed_query(q, "query: ")
            wall_us = (time.perf_counter() - start) * 1e6 / len(queries)
            events = json.loads(Path(embedder.session.end_profiling()).read_text())
        finally:
            embedder.session = saved
    by_op = kernel_time_by_op(events, skip_runs=WARM_RUNS)
    kernels = sum(v["kernel_us_per_run"] for v in by_op.values())
    return {"by_op": by_op, "kernel_us_per_run": round(kernels, 1),
            "outside_kernels_us_per_run": round(wall_us - kernels, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pack", action="append", required=True, metavar="NAME=DIR",
                        help="a model pack folder, twice (the first is the baseline)")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--every-fusion", action="append", default=[], metavar="NAME",
                        help="load this pack's session with every ONNX Runtime fusion (embedder.UNFUSED included)")
    parser.add_argument("--op-profile", action="store_true", help="add ONNX Runtime's kernel time per operator type")
    parser.add_argument("--out", default="model_pack_ab", help="results name")
    ns = parser.parse_args()
    packs = dict(item.split("=", 1) for item in ns.pack)
    if len(packs) != 2:
        raise SystemExit("name exactly two packs: --pack before=DIR --pack after=DIR")
    unknown = set(ns.every_fusion) - set(packs)
    if unknown:
        raise SystemExit(f"--every-fusion names no pack: {', '.join(sorted(unknown))}")
    unfused = {name: () if name in ns.every_fusion else UNFUSED for name in packs}
    embedders = {name: open_pack(Path(folder), query_threads(), unfused=unfused[name]) for name, folder in packs.items()}
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
    profiles = {name: op_profile(e, unfused[name], queries) for name, e in embedders.items()} if ns.op_profile else None
    for name, profile in (profiles or {}).items():
        ops = ", ".join(f"{op} {v['kernel_us_per_run']:.0f}" for op, v in list(profile["by_op"].items())[:6])
        print(f"{name}: kernels {profile['kernel_us_per_run']:.0f} us a query ({ops}), "
              f"outside them {profile['outside_kernels_us_per_run']:.0f} us")
    write_results(ns.out, {"packs": {name: str(Path(folder).name) for name, folder in packs.items()},
                           "unfused": {name: list(u) for name, u in unfused.items()}, "op_profile": profiles,
                           "calls": ns.calls, "figures": results,
                           "min_query_cosine": round(float(np.min(cosines)), 7),
                           "load_start": load0, "load_end": load1})


if __name__ == "__main__":
    main()
