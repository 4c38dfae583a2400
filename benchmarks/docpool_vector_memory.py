"""Vector server memory (issue #18 goal 6, second half): RSS per 100k chunks, with each part's share.

Run: .venv/bin/knowspec bench docpool-vector-memory [--model DIR] [--queries N]
Writes benchmarks/results/docpool_vector_memory.json. Needs the latency pool that
``benchmarks/docpool_vector.py`` builds (``KNOWSPEC_BENCH_CACHE/vector-run/latency/bench-docs.db``,
100k+ chunks; run that benchmark once first) and the model pack (``KNOWSPEC_MODEL_CACHE``).

Two measurements of the same pool:
- ``shares``: one fresh process, with the server's malloc settings, loads what a vector
  ``doc_search`` needs, one part at a time, and records its RSS (``VmRSS``) after each: the
  libraries' imports, the tokenizer, the ONNX embedding session, the first query embedded (ONNX
  Runtime's arena), the pool's float32 matrices with their ids and indices, the int8 sketches
  (each with its ONNX Runtime session, which packs the codes), and the first ranking. Each
  part's share is the RSS it added; the order is the server's.
- ``server``: the real stdio server over the pool (``--pool-dir``): RSS idle after initialize,
  after the first vector call, after ``--queries`` more; the figure is the RSS the vector
  calls added, per 100k chunks.
Nothing here has a bound in the issue ("reported"): the run prints the shares and the figure
with the load average, and the in-process total beside the server's, which also holds the
full-text side and the SDK.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import server_memory_mib, server_peak_rss_mib, write_results  # noqa: E402
from docpool_setup import DATABASE, LATENCY_POOL, default_model_dir, load_queries, machine_load  # noqa: E402

from knowspec.impl.config import Settings  # noqa: E402

POOL = LATENCY_POOL
PER = 100_000

# One fresh interpreter per run of this script, so no part is already loaded.
_SHARES_SCRIPT = r"""
import json, os, sys, time
from pathlib import Path

def rss():
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) / 1024

pool_file, model_dir, queries = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
from knowspec.impl.server.native_memory import limit_arenas
limit_arenas()  # the server's malloc settings (impl/cli.py), so each share is what the server holds
steps = [("python", rss())]
import numpy, onnxruntime, tokenizers
from knowspec.impl.docpool.storage.base import UNRESTRICTED
from knowspec.impl.docpool.storage.sqlite import SqlitePool
from knowspec.impl.docpool.vectors import embedder, int8_scan
from knowspec.impl.docpool.vectors.compact_unigram import load_tokenizer
from knowspec.impl.docpool.vectors.scoring import PoolVectors, vector_rank
steps.append(("imports (numpy, onnxruntime, tokenizers, knowspec)", rss()))
tokenizer = load_tokenizer(model_dir / embedder.TOKENIZER_FILE)  # as the embedder loads it
steps.append(("tokenizer", rss()))
del tokenizer
model = embedder.load_embedder(model_dir)  # its own tokenizer again: the share above is that copy
steps.append(("embedding session (its own tokenizer reuses the freed copy above)", rss()))
q = model.embed_query(queries[0], model.info.query_prefix)
steps.append(("first query embedded (ONNX Runtime arena)", rss()))
with SqlitePool(pool_file) as pool:
    vectors = PoolVectors.from_streams(
        *((pool.vector_count(w, UNRESTRICTED), pool.iter_vectors(w, UNRESTRICTED)) for w in ("topic", "chunk")),
        sketch=False)
steps.append(("float32 matrices, ids and indices", rss()))
kernel = int8_scan.int8_kernel()
sketches = [int8_scan.build_sketch(m, kernel) for m in (vectors.chunk_matrix, vectors.topic_matrix)] if kernel else []
steps.append(("int8 sketches (codes, interval terms, ONNX Runtime sessions)", rss()))
object.__setattr__(vectors, "chunk_sketch", sketches[0] if sketches else None)
object.__setattr__(vectors, "topic_sketch", sketches[1] if sketches else None)
for text in queries:
    vector_rank(vectors, model.embed_query(text, model.info.query_prefix), None, 10)
steps.append((f"{len(queries)} rankings", rss()))
print(json.dumps({"steps": steps, "chunks": int(len(vectors.chunk_ids)), "topics": int(len(vectors.topic_ids)),
                  "float32_bytes": int(vectors.chunk_matrix.nbytes + vectors.topic_matrix.nbytes),
                  "sketch_bytes": int(sum(s.nbytes for s in sketches))}))
"""


def shares(pool_file: Path, model_dir: Path, queries: list[str]) -> dict:
    """Each part's RSS share, measured in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", _SHARES_SCRIPT, str(pool_file), str(model_dir), json.dumps(queries)],
                          check=True, capture_output=True, text=True, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    raw = json.loads(done.stdout.strip().splitlines()[-1])
    steps = raw.pop("steps")
    parts = [{"part": name, "rss_mib": round(mib, 1), "added_mib": round(mib - steps[i - 1][1], 1) if i else None}
             for i, (name, mib) in enumerate(steps)]
    chunks = raw["chunks"]
    model_mib = sum(p["added_mib"] for p in parts[2:5])  # tokenizer, session, first query's arena
    pool_mib = sum(p["added_mib"] for p in parts[5:])  # matrices, sketches, rankings
    return {**raw, "parts": parts, "tokenizer_mib": parts[2]["added_mib"], "model_mib": round(model_mib, 1),
            "pool_mib": round(pool_mib, 1), "pool_mib_per_100k_chunks": round(pool_mib * PER / chunks, 1)}


def server(pool_file: Path, queries: list[str]) -> dict:
    """The stdio server of the latency appdir (its catalog, pool and model link): RSS idle, after
    one vector call and after the rest (a raw JSON-lines client)."""
    settings = Settings(appdir=pool_file.parent)
    proc = subprocess.Popen([sys.executable, "-m", "knowspec.impl.cli", "serve", "--stdio", "--appdir",
                             str(settings.appdir), "--catalog", str(settings.catalog_path), "--database", DATABASE],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env={**os.environ, "KNOWSPEC_QUERY_VECTORS": "0"})

    def ask(message: dict) -> dict | None:
        proc.stdin.write((json.dumps(message) + "\n").encode())
        proc.stdin.flush()
        return json.loads(proc.stdout.readline()) if "id" in message else None

    try:
        ask({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "memory", "version": "1"}}})
        ask({"jsonrpc": "2.0", "method": "notifications/initialized"})
        time.sleep(0.5)
        out = {"idle_mib": round(server_memory_mib(), 1)}
        for i, text in enumerate(queries):
            answer = ask({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": {
                "name": "doc_search", "arguments": {"query": text, "mode": "vector"}}})
            if answer is None or answer.get("result", {}).get("isError"):
                raise SystemExit(f"vector doc_search failed: {json.dumps(answer)[:400]}")
            if i == 0:
                out["after_first_vector_call_mib"] = round(server_memory_mib(), 1)
        out[f"after_{len(queries)}_vector_calls_mib"] = round(server_memory_mib(), 1)
        out["peak_mib"] = round(server_peak_rss_mib(), 1)
    finally:
        proc.stdin.close()
        proc.wait(60)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, default=None, help="model pack (default: KNOWSPEC_MODEL_CACHE's e5-int8)")
    parser.add_argument("--queries", type=int, default=20, help="vector calls after the first")
    args = parser.parse_args(argv)
    if not POOL.is_file():
        raise SystemExit(f"latency pool not found ({POOL}): run benchmarks/docpool_vector.py once first")
    model_dir = args.model or default_model_dir()
    texts = [q["query"] for q in load_queries("databricks")["queries"]][: args.queries + 1]
    out: dict = {"load_start": machine_load()}
    out["shares"] = shares(POOL, model_dir, texts)
    out["server"] = srv = server(POOL, texts)
    share = out["shares"]
    chunks = share["chunks"]
    added = srv[f"after_{len(texts)}_vector_calls_mib"] - srv["idle_mib"]
    out["server_added_by_vector_calls_mib"] = round(added, 1)
    out["server_per_100k_chunks_mib"] = round((added - share["model_mib"]) * PER / chunks, 1)
    out["load_end"] = machine_load()
    for p in share["parts"]:
        print(f"  {p['part']:62} {p['rss_mib']:7.1f} MiB" + (f"  (+{p['added_mib']:.1f})" if p["added_mib"] is not None else ""))
    print(f"in process: the model {share['model_mib']} MiB whatever the pool (of which the tokenizer "
          f"{share['tokenizer_mib']}); the pool ({chunks} chunks, {share['topics']} topics) {share['pool_mib']} MiB = "
          f"{share['pool_mib_per_100k_chunks']} MiB per 100k chunks")
    print(f"server: idle {srv['idle_mib']} MiB, after the first vector call {srv['after_first_vector_call_mib']}, "
          f"after {len(texts)} calls {srv[f'after_{len(texts)}_vector_calls_mib']} (peak {srv['peak_mib']}): "
          f"+{out['server_added_by_vector_calls_mib']} MiB = the model's {share['model_mib']} + "
          f"{out['server_per_100k_chunks_mib']} MiB per 100k chunks")
    print(f"load average: start {out['load_start']}, end {out['load_end']}")
    write_results("docpool_vector_memory", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
