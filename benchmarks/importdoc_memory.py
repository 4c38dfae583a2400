"""How much memory one IMPORTDOC takes on each storage (SQLite, PostgreSQL, Firebird).

Run: knowspec bench importdoc-memory [--source POOL] [--collection NAME] [--rounds N]
     [--storages sqlite,postgresql,firebird]

A server runs IMPORTDOC inside the process that serves, so what an import holds at its peak
is memory the serving process needs. Each import here runs in a fresh child process with the server's malloc
settings (``native_memory.limit_arenas``), into an empty pool, and reports how far the child's
resident size rose above where it stood just before the import (sampled every 5 ms), beside the
source file's size. The source is the databricks pool by default (text only); ``--source`` takes
any pool file, e.g. docpool_vector.py's latency pool, whose 50k chunks carry vectors
(``$KNOWSPEC_BENCH_CACHE/vector-run/latency/bench-docs.db``). PostgreSQL runs in a throwaway
cluster (``engines.PgCluster``), Firebird embedded.

Writes benchmarks/results/importdoc_memory.json. No bound: issue #18 names none for imports'
memory; this records the figure a change moves.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import PeakResident, write_results  # noqa: E402
from docpool_setup import DATABRICKS, cached_pool, machine_load  # noqa: E402

STORAGES = ("sqlite", "postgresql", "firebird")


def child(kind: str, source: str, collection: str, dsn: str) -> None:
    """One import in this (fresh) process; prints its figures as one JSON line."""
    from knowspec.impl import runtime as process
    from knowspec.impl.docpool import recipe
    from knowspec.impl.docpool.storage import firebird, postgres
    from knowspec.impl.server import native_memory

    native_memory.limit_arenas()
    importer = {"sqlite": recipe.import_collection, "postgresql": postgres.import_collection,
                "firebird": firebird.import_collection}[kind]
    with process.activated():
        if kind == "firebird":
            firebird.load_engine()
        start = time.perf_counter()
        with PeakResident().watching() as resident:
            result = importer(dsn, source, collection)
        print(json.dumps({"seconds": round(time.perf_counter() - start, 2), "growth_mib": resident.growth_mib,
                          "before_mib": round(resident.start / 2**20, 1), "topics": result.topics,
                          "chunks": result.chunks}), flush=True)


def one_import(kind: str, source: Path, collection: str, work: Path, pg_dsn: str | None, k: int) -> dict:
    from engines import fresh_pg_database

    if kind == "postgresql":
        assert pg_dsn is not None
        dsn = fresh_pg_database(pg_dsn, f"knowspec_importmem{k}")
    else:
        dsn = str(work / f"pool-{kind}-{k}.{'fdb' if kind == 'firebird' else 'db'}")
    out = subprocess.run([sys.executable, __file__, "--child", kind, str(source), collection, dsn],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{kind} import failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) == 6 and sys.argv[1] == "--child":
        child(*sys.argv[2:])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", type=Path, default=None, help="a pool file (default: the databricks pool)")
    parser.add_argument("--collection", default="databricks")
    parser.add_argument("--rounds", type=int, default=1, help="imports per storage (each in a fresh process)")
    parser.add_argument("--storages", default=",".join(STORAGES))
    ns = parser.parse_args()
    kinds = [k for k in ns.storages.split(",") if k]
    source = ns.source or cached_pool("databricks", DATABRICKS, "databricks")[0]
    source_mib = round(source.stat().st_size / 2**20, 1)
    load_start = machine_load()
    runs: dict[str, list[dict]] = {k: [] for k in kinds}
    cluster = None
    with tempfile.TemporaryDirectory(prefix="knowspec-importmem-") as folder:
        work = Path(folder)
        os.chmod(work, 0o777)  # the embedded Firebird engine may write as another user
        pg_dsn = None
        if "postgresql" in kinds:
            from engines import PgCluster

            cluster = PgCluster()
            pg_dsn = cluster.start()
        try:
            for k in range(max(1, ns.rounds)):
                for kind in kinds:  # storages alternate, so a load spike hits each alike
                    run = one_import(kind, source, ns.collection, work, pg_dsn, k)
                    runs[kind].append(run)
                    print(f"{kind}: {run['seconds']} s, resident size +{run['growth_mib']} MiB "
                          f"({run['topics']} topics, {run['chunks']} chunks; source {source_mib} MiB)",
                          file=sys.stderr, flush=True)
        finally:
            if cluster is not None:
                cluster.stop()
    summary = {kind: {"growth_mib": [r["growth_mib"] for r in rs], "seconds": [r["seconds"] for r in rs],
                      "growth_per_source_mib": round(min(r["growth_mib"] for r in rs) / source_mib, 2)}
               for kind, rs in runs.items()}
    for kind, row in summary.items():
        print(f"{kind:<11} resident growth {row['growth_mib']} MiB = {row['growth_per_source_mib']}x the source "
              f"({source_mib} MiB), {row['seconds']} s")
    write_results("importdoc_memory", {"source": source.name, "source_mib": source_mib, "collection": ns.collection,
                                       "runs": runs, "summary": summary,
                                       "load_start": load_start, "load_end": machine_load()})


if __name__ == "__main__":
    main()
