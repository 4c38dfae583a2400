"""Vector and hybrid doc_search: retrieval quality on labelled queries, and latency at 100k chunks.

Run: .venv/bin/python benchmarks/docpool_vector.py [--model DIR] [--calls 60] [--skip-latency]
Writes benchmarks/results/docpool_vector.json.

Quality (in-process through the ``doc_search`` handler, the same code the server runs):
``benchmarks/queries/sample_help.json`` over the sample help pool (``examples/help``) and
``benchmarks/queries/databricks.json`` over a databricks subset pool (every labelled concept plus
40 random distractors; embedding all 50k databricks chunks takes hours on 2 shared cores).
Side by side for fts, vector and hybrid: recall@10, success@10, MRR, split by language and by
query kind; identifier queries (form classes, transaction codes, API names) are listed one by
one with the rank of their first labelled topic in each mode.

Latency (client-side, through the real stdio server): a pool of the full databricks corpus
imported twice (two collections, 100k+ chunks) whose vectors are the real subset vectors
repeated with noise (cached under the bench cache); vector and hybrid p50/p95 include query
embedding; embedding alone and ``vector_rank`` alone are timed in-process; the vectors' memory
is the size of the in-memory matrices.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import anyio
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import percentiles, server_peak_rss_mib, stdio_session, timed, write_results  # noqa: E402
from docpool_setup import (CACHE, DATABRICKS, SAMPLE, CachedEmbedder, cached_pool, default_model_dir,  # noqa: E402
                           first_relevant_rank, load_queries, machine_load, make_appdir, metrics, subset_bundle)

from knowspec.impl.context import CallContext  # noqa: E402
from knowspec.impl.docpool import tools  # noqa: E402
from knowspec.impl.docpool.storage.base import UNRESTRICTED  # noqa: E402
from knowspec.impl.docpool.storage.sqlite import SqlitePool, open_for_write  # noqa: E402
from knowspec.impl.docpool.vectors.embedder import load_embedder  # noqa: E402
from knowspec.impl.docpool.vectors.pool_embed import embed_pool  # noqa: E402
from knowspec.impl.docpool.vectors.scoring import PoolVectors, encode_vector, vector_rank  # noqa: E402

MODES = ("fts", "vector", "hybrid")
DISTRACTORS = 40
SYNTHETIC_NOISE = 0.3   # norm of the noise added to a real vector before re-normalising


def with_vectors(plain: Path, out: Path, embedder: CachedEmbedder) -> dict[str, float]:
    """Copy of ``plain`` with topic and chunk vectors (the builder's ``embed_pool``, cached)."""
    shutil.copy(plain, out)
    con = open_for_write(out)
    start = time.perf_counter()
    try:
        con.execute("begin")
        counts = embed_pool(con, embedder)
        con.execute("commit")
    finally:
        con.execute("pragma journal_mode = delete")
        con.close()
    embedder.save()
    return {**counts, "seconds": round(time.perf_counter() - start, 1)}


def databricks_subset_slugs() -> list[str]:
    labelled = {s for q in load_queries("databricks")["queries"] for s in q["relevant"]}
    others = sorted(p.stem for p in (DATABRICKS / "concepts").glob("*.md") if p.stem not in labelled)
    return sorted(labelled | set(random.Random(42).sample(others, DISTRACTORS)))


def search(ctx: CallContext, query: str, mode: str, collection: str, limit: int = 10) -> list[str]:
    args = SimpleNamespace(query=query, mode=mode, limit=limit, collection=collection, database=None)
    return [h["slug"] for h in tools.doc_search(args, ctx).structured["results"]]


def quality(ctx: CallContext) -> dict:
    """Per query set: metrics per mode, overall and per language / kind; identifier queries in detail."""
    report: dict = {}
    for name in ("sample_help", "databricks"):
        qs = load_queries(name)
        runs = {mode: [(search(ctx, q["query"], mode, qs["collection"]), set(q["relevant"])) for q in qs["queries"]]
                for mode in MODES}
        groups = {"all": lambda q: True, "tr": lambda q: q["lang"] == "tr", "en": lambda q: q["lang"] == "en",
                  "identifier": lambda q: q["kind"] == "identifier"}
        report[name] = {
            group: {mode: metrics([r for r, q in zip(runs[mode], qs["queries"]) if keep(q)]) for mode in MODES}
            for group, keep in groups.items()}
        report[name]["identifier_ranks"] = [
            {"query": q["query"], **{mode: first_relevant_rank(runs[mode][i][0], runs[mode][i][1]) for mode in MODES}}
            for i, q in enumerate(qs["queries"]) if q["kind"] == "identifier"]
    return report


# -- the 100k-chunk latency pool ---------------------------------------------------------------

def renamed_copy(source: Path, out: Path, collection: str) -> Path:
    """``source`` with its one collection renamed (so the same corpus can be imported twice)."""
    shutil.copy(source, out)
    with sqlite3.connect(out) as con:
        old = con.execute('select id from "doc$collection"').fetchone()[0]
        con.execute('update "doc$collection" set id = ? where id = ?', [collection, old])
        for table in ("topic", "entity", "entity_kind", "alias", "entity_rel", "meta"):
            con.execute(f'update "doc${table}" set collection = ? where collection = ?', [collection, old])
    return out


def synthetic_vectors(base: np.ndarray, n: int, seed: int) -> np.ndarray:
    """``n`` unit vectors: the real ``base`` rows repeated, each moved by noise of norm ~SYNTHETIC_NOISE."""
    rng = np.random.default_rng(seed)
    rows = base[np.arange(n) % len(base)]
    rows = rows + rng.standard_normal(rows.shape).astype(np.float32) * (SYNTHETIC_NOISE / np.sqrt(base.shape[1]))
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def fill_synthetic_vectors(pool_file: Path, real_pool: Path, model: str, dim: int) -> dict[str, int]:
    with SqlitePool(real_pool) as real:
        base = PoolVectors.from_vector_rows(real.vectors("topic", UNRESTRICTED), real.vectors("chunk", UNRESTRICTED), dim)
    con = sqlite3.connect(pool_file)
    try:
        chunk_ids = [r[0] for r in con.execute('select id from "doc$chunk" order by id')]
        topic_ids = [r[0] for r in con.execute('select id from "doc$topic" order by id')]
        chunks = synthetic_vectors(base.chunk_matrix, len(chunk_ids), 1)
        topics = synthetic_vectors(base.topic_matrix, len(topic_ids), 2)
        con.executemany('insert or replace into "doc$chunk_vec"(chunk_id, vec) values (?, ?)',
                        ((i, encode_vector(v)) for i, v in zip(chunk_ids, chunks)))
        con.executemany('insert or replace into "doc$topic_vec"(topic_id, vec) values (?, ?)',
                        ((i, encode_vector(v)) for i, v in zip(topic_ids, topics)))
        con.executemany('insert or replace into "doc$meta"(collection, name, value) values (\'\', ?, ?)',
                        [("vec_model", model), ("vec_dim", str(dim))])
        con.commit()
    finally:
        con.close()
    return {"chunks": len(chunk_ids), "topics": len(topic_ids)}


async def server_latency(args: list[str], queries: list[str], calls: int) -> dict:
    out: dict = {}
    async with stdio_session(*args) as session:
        cold, result = await timed(session, "doc_search", {"query": queries[0], "mode": "vector"})
        if result.is_error:
            raise SystemExit(f"vector search failed: {result.content}")
        out["vector_cold_first_call_ms"] = round(cold, 1)
        for mode in ("vector", "hybrid", "fts"):
            samples = []
            for i in range(calls):
                ms, result = await timed(session, "doc_search", {"query": queries[i % len(queries)], "mode": mode})
                assert not result.is_error, result.content
                samples.append(ms)
            out[mode] = percentiles(samples)
        out["server_peak_rss_mib"] = server_peak_rss_mib()
    return out


def _timed(fn, calls: int) -> tuple[list[float], list[float]]:
    """Wall and CPU milliseconds of ``fn(i)`` per call. CPU time (this process, all threads) is the
    better guide on a shared machine: waiting for a core counts in wall time only."""
    wall, cpu = [], []
    for i in range(calls):
        w0, c0 = time.perf_counter(), time.process_time()
        fn(i)
        wall.append((time.perf_counter() - w0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    return wall, cpu


def _both(wall: list[float], cpu: list[float]) -> dict:
    return {"wall": percentiles(wall), "cpu_p50_ms": round(statistics.median(cpu), 3)}


def in_process_breakdown(settings, pool_file: Path, model_dir: Path, queries: list[str], calls: int) -> dict:
    """The same work in this process: the doc_search handler end to end, then its parts."""
    embedder = load_embedder(model_dir)
    embedder.embed_query("warm up", "query: ")
    ctx = CallContext(settings=settings)
    out: dict = {}
    for mode in ("vector", "hybrid"):
        search(ctx, queries[0], mode, None)  # warm: vectors cached
        out[f"doc_search_{mode}_handler"] = _both(*_timed(lambda i: search(ctx, queries[i % len(queries)], mode, None), calls))
    with SqlitePool(pool_file) as pool:
        start = time.perf_counter()
        vectors = PoolVectors.from_vector_rows(pool.vectors("topic", UNRESTRICTED),
                                               pool.vectors("chunk", UNRESTRICTED), embedder.info.dim)
        load_s = time.perf_counter() - start
        passages = list(pool.chunk_texts([int(c) for c in vectors.chunk_ids[:400:20]]).values())
    q_vectors = [embedder.embed_query(q, "query: ") for q in queries]
    out["query_embedding"] = _both(*_timed(lambda i: embedder.embed_query(queries[i % len(queries)], "query: "), calls))
    out["vector_rank_only"] = _both(*_timed(lambda i: vector_rank(vectors, q_vectors[i % len(queries)], None, 10), calls))
    out["passage_embedding"] = _both(*_timed(  # real databricks chunks, never cached
        lambda i: embedder.embed_passages([passages[i % len(passages)]], "passage: "), len(passages)))
    matrices = [vectors.chunk_matrix, vectors.topic_matrix, vectors.chunk_ids, vectors.chunk_topic_ids, vectors.topic_ids]
    return {**out, "vectors_load_s": round(load_s, 2),
            "vectors_memory_mib": round(sum(m.nbytes for m in matrices) / 2**20, 1),
            "chunks": int(len(vectors.chunk_ids)), "topics": int(len(vectors.topic_ids))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None, help="model pack (default: KNOWSPEC_MODEL_CACHE/e5-int8)")
    parser.add_argument("--calls", type=int, default=60, help="timed calls per mode")
    parser.add_argument("--skip-latency", action="store_true")
    ns = parser.parse_args()
    model_dir = ns.model or default_model_dir()
    embedder = CachedEmbedder(load_embedder(model_dir), CACHE / "passage_vectors.npz")
    work = CACHE / "vector-run"

    sample_plain, _ = cached_pool("sample-plain", SAMPLE, "netsim-help")
    subset_plain, subset_info = cached_pool("databricks-subset-plain", subset_bundle(databricks_subset_slugs(),
                                            CACHE / "databricks-subset"), "databricks")
    sample_vec = CACHE / "sample-vec.db"
    subset_vec = CACHE / "databricks-subset-vec.db"
    embedding = {"sample": with_vectors(sample_plain, sample_vec, embedder),
                 "databricks_subset": with_vectors(subset_plain, subset_vec, embedder),
                 "passages_embedded_this_run": embedder.computed,
                 "ms_per_passage_this_run": round(1000 * embedder.seconds / embedder.computed, 1) if embedder.computed else None}
    app = make_appdir(work / "quality", {"databricks": subset_vec}, help_db=sample_vec, model_dir=model_dir)
    results: dict = {"model": embedder.info.model, "dim": embedder.info.dim, "embedding": embedding,
                     "databricks_subset_pool": subset_info["counts"],
                     "quality": quality(CallContext(settings=app.settings))}

    if not ns.skip_latency:
        full, full_info = cached_pool("databricks", DATABRICKS, "databricks")
        second = renamed_copy(full, CACHE / "databricks-2.db", "databricks-2")
        big = make_appdir(work / "latency", {"databricks": full, "databricks-2": second}, model_dir=model_dir)
        pool_file = big.settings.appdir / "bench-docs.db"
        size = fill_synthetic_vectors(pool_file, subset_vec, embedder.info.model or "", embedder.info.dim)
        queries = [q["query"] for name in ("databricks", "sample_help") for q in load_queries(name)["queries"]]
        results["latency_pool"] = {**size, "import_s": big.import_s}
        results["machine_load_before"] = machine_load()
        results["server"] = anyio.run(server_latency, big.server_args(), queries, ns.calls)
        results["in_process"] = in_process_breakdown(big.settings, pool_file, model_dir, queries, ns.calls)
        results["machine_load_after"] = machine_load()
    write_results("docpool_vector", results)


if __name__ == "__main__":
    main()
