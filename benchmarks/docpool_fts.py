"""Full-text doc_search and doc_get on the databricks corpus through the real stdio server.

Run: .venv/bin/python benchmarks/docpool_fts.py [--calls 200] [--rebuild]
Writes benchmarks/results/docpool_fts.json: the pool build (topic and chunk counts, seconds),
the IMPORTDOC time into a fresh SQLite document pool, doc_search (fts) p50/p95 and doc_get p50
measured client-side over stdio, the server's peak RSS, and fts retrieval quality of the
labelled databricks queries on the full pool (recall@10, success@10, MRR).

The server runs with ``KNOWSPEC_FTS_ARRAYS=sync`` (unless set otherwise) so the one-time read of
the FTS5 index into arrays lands in the first call, reported as ``doc_search_first_call_ms``
(a search waits for the arrays in every mode: they are the pool's only ranker).

Queries: the labelled set (``queries/databricks.json``) plus words taken from random concept
titles, so both long natural-language queries (AND then OR) and short ones are timed.
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import sys
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from common import percentiles, server_peak_rss_mib, stdio_session, timed, write_results  # noqa: E402
from docpool_setup import CACHE, DATABRICKS, cached_pool, load_queries, machine_load, make_appdir, metrics  # noqa: E402


def title_queries(pool: Path, n: int, seed: int = 7) -> tuple[list[str], list[str]]:
    """``n`` short queries (2-3 words of a random title) and ``n`` random slugs."""
    with sqlite3.connect(pool) as con:
        rows = con.execute('select slug, title from "doc$topic" order by id').fetchall()
    rng = random.Random(seed)
    picked = rng.sample(rows, n)
    queries = []
    for _, title in picked:
        words = title.split()
        take = min(len(words), rng.choice((2, 3)))
        start = rng.randrange(0, len(words) - take + 1)
        queries.append(" ".join(words[start:start + take]))
    return queries, [slug for slug, _ in rng.sample(rows, n)]


async def measure(args: list[str], labelled: list[dict], short: list[str], slugs: list[str], calls: int) -> dict:
    out: dict = {}
    async with stdio_session(*args) as session:
        cold, _ = await timed(session, "doc_search", {"query": "delta table", "collection": "databricks"})
        out["doc_search_first_call_ms"] = round(cold, 1)
        ranked, samples_long = [], []
        for q in labelled:
            ms, result = await timed(session, "doc_search", {"query": q["query"], "collection": "databricks"})
            assert not result.is_error, result.content
            samples_long.append(ms)
            hits = result.structured_content["results"]
            ranked.append(([h["slug"] for h in hits], set(q["relevant"])))
        samples_short = []
        for q in short[:calls]:
            ms, result = await timed(session, "doc_search", {"query": q, "collection": "databricks"})
            assert not result.is_error, result.content
            samples_short.append(ms)
        out["doc_search_fts"] = percentiles(samples_long + samples_short)
        out["doc_search_fts_labelled_queries"] = percentiles(samples_long)
        out["doc_search_fts_title_words"] = percentiles(samples_short)
        get_samples = []
        for slug in slugs[:calls]:
            ms, result = await timed(session, "doc_get", {"collection": "databricks", "slug": slug})
            assert not result.is_error, result.content
            get_samples.append(ms)
        out["doc_get"] = percentiles(get_samples)
        out["server_peak_rss_mib"] = server_peak_rss_mib()
        out["fts_quality_full_pool"] = metrics(ranked)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="timed doc_search (short) and doc_get calls")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the source pool even if cached")
    ns = parser.parse_args()
    os.environ.setdefault("KNOWSPEC_FTS_ARRAYS", "sync")
    if ns.rebuild:
        for suffix in (".db", ".json"):
            (CACHE / f"databricks{suffix}").unlink(missing_ok=True)
    source, info = cached_pool("databricks", DATABRICKS, "databricks")
    app = make_appdir(CACHE / "fts-run", {"databricks": source})
    short, slugs = title_queries(source, ns.calls)
    labelled = load_queries("databricks")["queries"]
    start = time.perf_counter()
    load_before = machine_load()
    served = anyio.run(measure, app.server_args(), labelled, short, slugs, ns.calls)
    write_results("docpool_fts", {
        "corpus": DATABRICKS.name, "pool": info["counts"], "pool_build_s": info["build_s"],
        "pool_file_mib": round(source.stat().st_size / 2**20, 1),
        "importdoc_s": app.import_s["databricks"], **served,
        "fts_arrays_mode": os.environ["KNOWSPEC_FTS_ARRAYS"],
        "wall_s": round(time.perf_counter() - start, 1),
        "machine_load_before": load_before, "machine_load_after": machine_load(),
    })


if __name__ == "__main__":
    main()
