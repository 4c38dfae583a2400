"""doc_search (fts) and doc_get per storage (SQLite, PostgreSQL, Firebird) on the databricks pool.

Run: .venv/bin/python benchmarks/docpool_storages.py [--calls 200] [--topics N] [--imports N] [--profile]
     (or ``knowspec bench docpool-storages [--calls N] [--topics N] [--imports N] [--profile]``)

``--topics N`` measures a pool of the first N databricks topics only (a smaller run for a busy
machine); the default is the whole pool (~50k chunks). ``--imports N`` runs the three IMPORTDOCs
N times (each round into fresh pools), for an import figure that does not rest on one moment of a
shared machine: every round's times and ratios are printed and recorded (goal rows per round),
with this process's CPU time per import (SQLite and embedded Firebird do all their work in it, so
their CPU ratio moves less with the machine's load than the wall-time ratio the goal bounds).

One run: a throwaway PostgreSQL cluster (``engines.PgCluster``: initdb / pg_ctl in a temporary
folder, unix socket only, fsync off) and the embedded Firebird engine; a fresh appdir whose
catalog registers three databases, ``sq`` (SQLITE), ``pg`` (POSTGRESQL) and ``fb`` (FIREBIRD),
each with SET DOCUMENTS INTERNAL; the cached databricks source pool (``docpool_setup.cached_pool``)
IMPORTDOC'ed into each, timed per storage, with how far this process's resident size rose
during each import (the server's malloc settings applied, freed heap returned before each: the
server runs IMPORTDOC inside the process that serves).

Then ONE real stdio server answers every storage (the ``database`` argument of each call picks
the pool). That is the fair setup on a shared 2-CPU machine: the same process, pipeline and
client serve all three, and the calls are interleaved -- each query is sent to the three
storages back to back, in an order rotated per query -- so a load spike hits every storage
alike instead of whichever happened to run then. The first search of each storage is timed
apart, in a server started for it alone (after a restart) and in the shared server: every
storage loads the full-text index its import persisted (``doc$fts_snapshot``; a pool without
one builds it then: PostgreSQL and Firebird an in-memory ``fulltext.reader.FtsIndex`` of their
chunks, SQLite arrays from FTS5 with ``KNOWSPEC_FTS_ARRAYS=sync`` unless set, as in
``docpool_fts``); the "warm" figures exclude it. Queries: ``docpool_fts``'s (the labelled databricks set
plus 2-3 words of random concept titles), at the default limit (10).

Agreement (limit 50, over the same server): PostgreSQL and Firebird must each equal SQLite
exactly (slugs, order, scores, snippets), query by query; the topic sets are compared too
(whenever SQLite's set is complete, i.e. fewer than 50 hits), to tell a ranking difference from
a matching one.

Issue #18 goal 7: the fts p95 of PostgreSQL and of Firebird at most 2x SQLite's, measured in the
same run (SQLite's p95 is the floor), with exact agreement. The run prints, per storage, the
floor, the figure, their ratio, the bound and pass/fail, and the load average at start and end.

``--profile`` afterwards profiles each storage's ``fts_ranked`` in-process (cProfile, same pool,
same queries) and prints the top functions to stderr, with in-process p50s in the JSON.

Goals (issue #18 goal 7), each printed with the figure, SQLite's figure in the same run (the
floor), their ratio, the bound and pass/fail, and the load average: the first search after a
start (a fresh server, and again after a restart) at most 300 ms on every storage; IMPORTDOC at
most 3x SQLite's; Firebird's doc_get p50 at most 1.5x SQLite's.

Writes benchmarks/results/docpool_storages.json and prints a short table. Removes the cluster.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from common import PeakResident, percentiles, server_peak_rss_mib, stdio_session, timed, write_results  # noqa: E402
from docpool_fts import title_queries  # noqa: E402
from docpool_setup import CACHE, DATABRICKS, cached_pool, load_queries, machine_load  # noqa: E402
from engines import PgCluster, fresh_pg_database  # noqa: E402

from knowspec.impl.config import Settings  # noqa: E402
from knowspec.impl.docpool import catalog, importdoc  # noqa: E402
from knowspec.impl.server import native_memory  # noqa: E402

COLLECTION = "databricks"
STORAGES = (("sq", "SQLITE"), ("pg", "POSTGRESQL"), ("fb", "FIREBIRD"))
FIRST_QUERY = "delta table"
AGREE_LIMIT = 50
FIRST_SEARCH_BOUND_MS = 300.0   # the first search after a start, every storage (absolute)
IMPORT_BOUND = 3.0              # IMPORTDOC, times SQLite's
DOC_GET_BOUND = {"fb": 1.5}     # doc_get p50, times SQLite's (PostgreSQL's is reported, unbounded)


def subset_pool(source: Path, topics: int) -> Path:
    """The source pool cut to its first ``topics`` topics (cached beside it), FTS rebuilt by the
    same folded insert the IMPORTDOC recipe uses."""
    import sqlite3

    from knowspec.impl.docpool.storage.sqlite import register_functions

    out = source.with_name(f"{source.stem}-{topics}.db")
    if out.is_file():
        return out
    tmp = out.with_suffix(".tmp")
    shutil.copy(source, tmp)
    con = sqlite3.connect(tmp)
    register_functions(con)
    (cut,) = con.execute('select id from "doc$topic" order by id limit 1 offset ?', [topics]).fetchone() or (None,)
    if cut is not None:
        chunks = 'select id from "doc$chunk" where topic_id >= ?'
        for sql in (f'delete from "doc$chunk_vec" where chunk_id in ({chunks})',
                    'delete from "doc$topic_vec" where topic_id >= ?', 'delete from "doc$link" where topic_id >= ?',
                    'delete from "doc$acl" where topic_id >= ?', 'delete from "doc$chunk" where topic_id >= ?',
                    'delete from "doc$topic" where id >= ?'):
            con.execute(sql, [cut])
        con.execute('insert into "doc$chunk_fts"("doc$chunk_fts") values (\'delete-all\')')
        con.execute('insert into "doc$chunk_fts"(rowid, title, heading, body) '
                    'select id, doc_fold(title), doc_fold(heading), doc_fold(body) from "doc$chunk"')
    con.commit()
    con.execute("vacuum")
    con.close()
    tmp.rename(out)
    return out


# -- setup -----------------------------------------------------------------------------------

def make_storages_appdir(root: Path, source: Path, pg_dsn: str
                         ) -> tuple[Settings, dict[str, float], dict[str, float], dict[str, float]]:
    """A fresh appdir whose catalog registers sq / pg / fb with a document pool each, the source
    collection IMPORTDOC'ed into every one (per storage: wall seconds; this process's CPU seconds,
    which hold all of SQLite's and embedded Firebird's work but not the PostgreSQL server's; and
    how far this process's resident size rose during the import, in MiB)."""
    from knowspec.impl.docpool.storage import firebird, postgres

    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    settings = Settings(appdir=root)
    settings.default_database = "sq"
    dsns = {"sq": str(root / "pool-sq.db"), "pg": pg_dsn, "fb": str(root / "pool-fb.fdb")}
    firebird.load_engine()
    native_memory.limit_arenas()  # the server's malloc settings: IMPORTDOC runs inside the serving process
    times, cpu, growth = {}, {}, {}
    for db, kind in STORAGES:
        catalog.register_database(settings.catalog_path, db, kind, dsns[db])
        catalog.execute_alter(settings.catalog_path, f"ALTER DATABASE {db} SET DOCUMENTS INTERNAL")
        native_memory.release_free_memory()  # the previous import's freed heap: not this one's growth
        start, cpu_start = time.perf_counter(), time.process_time()
        with PeakResident().watching() as resident:
            outcome = importdoc.import_collection(settings, db, COLLECTION, str(source))
        times[db] = round(time.perf_counter() - start, 2)
        cpu[db] = round(time.process_time() - cpu_start, 2)
        growth[db] = resident.growth_mib
        if not outcome["result"]:
            raise SystemExit(f"IMPORTDOC refused {COLLECTION} into {db}: {outcome['message']}")
        print(f"IMPORTDOC {db}: {times[db]} s, CPU here {cpu[db]} s, resident size up to "
              f"+{resident.growth_mib} MiB ({outcome['topics']} topics, {outcome['chunks']} chunks)",
              file=sys.stderr, flush=True)
    # The server process opens these pools next: an embedded Firebird file takes one process.
    firebird.close_connections()
    postgres.close_pools()
    return settings, times, cpu, growth


def server_args(settings: Settings) -> list[str]:
    return ["--appdir", str(settings.appdir), "--catalog", str(settings.catalog_path), "--database", "sq"]


# -- measuring through the server -------------------------------------------------------------

def rotated(i: int) -> list[str]:
    names = [db for db, _ in STORAGES]
    k = i % len(names)
    return names[k:] + names[:k]


async def search(session, db: str, query: str, limit: int | None = None) -> tuple[float, list[dict]]:
    args: dict[str, Any] = {"query": query, "collection": COLLECTION, "database": db}
    if limit is not None:
        args["limit"] = limit
    ms, result = await timed(session, "doc_search", args)
    assert not result.is_error, (db, query, result.content)
    return ms, result.structured_content["results"]


async def measure(args: list[str], labelled: list[str], short: list[str], singles: list[str],
                  slugs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {db: {} for db, _ in STORAGES}
    for db, _ in STORAGES:  # a fresh server per storage: its first search after the start
        async with stdio_session(*args) as session:
            ms, _ = await search(session, db, FIRST_QUERY)
            out[db]["first_search_after_restart_ms"] = round(ms, 1)
            print(f"first search after a restart {db}: {ms:.0f} ms", file=sys.stderr, flush=True)
    async with stdio_session(*args) as session:
        for db, _ in STORAGES:  # the first search of each pool in the server that serves the rest
            ms, _ = await search(session, db, FIRST_QUERY)
            out[db]["first_search_ms"] = round(ms, 1)
            print(f"first search {db}: {ms:.0f} ms", file=sys.stderr, flush=True)
        samples: dict[str, dict[str, list[float]]] = {db: {"labelled": [], "title": []} for db, _ in STORAGES}
        for kind, queries in (("labelled", labelled), ("title", short)):
            for i, q in enumerate(queries):
                for db in rotated(i):
                    ms, _ = await search(session, db, q)
                    samples[db][kind].append(ms)
        gets: dict[str, list[float]] = {db: [] for db, _ in STORAGES}
        for i, slug in enumerate(slugs):
            for db in rotated(i):
                ms, result = await timed(session, "doc_get", {"collection": COLLECTION, "slug": slug, "database": db})
                assert not result.is_error, (db, slug, result.content)
                gets[db].append(ms)
        for db, _ in STORAGES:
            out[db]["doc_search_fts"] = percentiles(samples[db]["labelled"] + samples[db]["title"])
            out[db]["doc_search_fts_labelled_queries"] = percentiles(samples[db]["labelled"])
            out[db]["doc_search_fts_title_words"] = percentiles(samples[db]["title"])
            out[db]["doc_get"] = percentiles(gets[db])
        out["agreement"] = await agreement(session, labelled + short, singles)
        out["server_peak_rss_mib"] = server_peak_rss_mib()
    return out


def _hit_key(h: dict) -> tuple:
    return (h["collection"], h["slug"])


def _ranked(hits: list[dict]) -> list[tuple]:
    """What must agree across storages: each hit's topic, score and snippet, in order."""
    return [(h["collection"], h["slug"], h["score"], h["snippet"]) for h in hits]


async def agreement(session, queries: list[str], singles: list[str]) -> dict[str, Any]:
    """PostgreSQL and Firebird vs SQLite: identical ranked lists, and same topic sets when complete."""
    out: dict[str, Any] = {}
    everything = queries + singles
    reference = {q: (await search(session, "sq", q, AGREE_LIMIT))[1] for q in everything}
    for db in ("pg", "fb"):
        identical, differ, complete, same_set = 0, [], 0, 0
        for q in everything:
            _, own = await search(session, db, q, AGREE_LIMIT)
            sq = reference[q]
            if _ranked(own) == _ranked(sq):
                identical += 1
            else:
                differ.append(q)
            if len(sq) < AGREE_LIMIT:
                complete += 1
                same_set += {_hit_key(h) for h in own} == {_hit_key(h) for h in sq}
        out[db] = {"queries": len(everything), "identical": identical, "differ": differ[:20],
                   "complete_sets_compared": complete, "same_set": same_set}
    return out


# -- in-process profile ----------------------------------------------------------------------

def profile_in_process(settings: Settings, queries: list[str], top: int = 25) -> dict[str, Any]:
    """Each storage's ``fts_ranked`` in-process over ``queries`` (warm): p50/p95 and a cProfile."""
    from knowspec.impl.docpool.pools import open_location
    from knowspec.impl.docpool.search import fts_ranked
    from knowspec.impl.docpool.storage.base import UNRESTRICTED

    out = {}
    for db, _ in STORAGES:
        location = catalog.resolve_pool_location(settings.catalog_path, db)
        with open_location(location) as pool:
            fts_ranked(pool, FIRST_QUERY, UNRESTRICTED, limit=10, collection=COLLECTION)  # index, caches
        samples = []
        prof = cProfile.Profile()
        for q in queries:
            start = time.perf_counter()
            prof.enable()
            with open_location(location) as pool:
                fts_ranked(pool, q, UNRESTRICTED, limit=10, collection=COLLECTION)
            prof.disable()
            samples.append((time.perf_counter() - start) * 1000)
        out[db] = percentiles(samples)
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(top)
        print(f"\n===== {db}: in-process fts_ranked, {len(queries)} queries =====\n{text.getvalue()}",
              file=sys.stderr)
    return out


# -- report ----------------------------------------------------------------------------------

GOAL_P95_RATIO = 2.0  # issue #18 goal 7: PostgreSQL and Firebird fts p95 at most 2x SQLite's


def ratios(served: dict[str, Any]) -> dict[str, Any]:
    """Per storage: the floor (SQLite's p95, same run), the figure, their ratio, the bound, pass/fail."""
    base = served["sq"]["doc_search_fts"]
    out: dict[str, Any] = {}
    for db in ("pg", "fb"):
        own = served[db]["doc_search_fts"]
        agree = served["agreement"][db]
        ratio = round(own["p95_ms"] / base["p95_ms"], 2)
        out[db] = {"floor_sqlite_p95_ms": base["p95_ms"], "fts_p95_ms": own["p95_ms"],
                   "fts_p95_vs_sqlite": ratio, "fts_p50_vs_sqlite": round(own["p50_ms"] / base["p50_ms"], 2),
                   "bound": GOAL_P95_RATIO, "p95_within_bound": ratio <= GOAL_P95_RATIO,
                   "identical_to_sqlite": agree["identical"] == agree["queries"]}
    return out


def goal_rows(import_rounds: list[dict[str, float]], served: dict[str, Any], load: dict[str, float]
              ) -> list[dict[str, Any]]:
    """Goal 7's figures per storage: figure, SQLite's (the floor, same run), ratio, bound, pass."""
    rows = []

    def add(goal: str, db: str, figure: float, floor: float, bound: float, absolute: bool) -> None:
        ratio = round(figure / floor, 2) if floor else None
        ok = figure <= bound if absolute else (ratio is not None and ratio <= bound)
        rows.append({"goal": goal, "storage": dict(STORAGES)[db].lower(), "figure": figure, "sqlite": floor,
                     "ratio": ratio, "bound": f"<= {bound:g} ms" if absolute else f"<= {bound:g}x sqlite",
                     "pass": ok, "load": load})

    for db, _ in STORAGES:
        add("first search after start (ms)", db, served[db]["first_search_ms"], served["sq"]["first_search_ms"],
            FIRST_SEARCH_BOUND_MS, True)
        add("first search after restart (ms)", db, served[db]["first_search_after_restart_ms"],
            served["sq"]["first_search_after_restart_ms"], FIRST_SEARCH_BOUND_MS, True)
    for k, import_s in enumerate(import_rounds, 1):
        label = "IMPORTDOC (s)" if len(import_rounds) == 1 else f"IMPORTDOC round {k} (s)"
        for db, _ in STORAGES[1:]:
            add(label, db, import_s[db], import_s["sq"], IMPORT_BOUND, False)
    for db, _ in STORAGES[1:]:
        get, floor = served[db]["doc_get"]["p50_ms"], served["sq"]["doc_get"]["p50_ms"]
        if db in DOC_GET_BOUND:
            add("doc_get p50 (ms)", db, get, floor, DOC_GET_BOUND[db], False)
        else:
            rows.append({"goal": "doc_get p50 (ms)", "storage": dict(STORAGES)[db].lower(), "figure": get,
                         "sqlite": floor, "ratio": round(get / floor, 2), "bound": "(none)", "pass": None,
                         "load": load})
    return rows


def goal_table(rows: list[dict[str, Any]]) -> str:
    head = f"{'goal':<33}{'storage':<11}{'figure':>9}{'sqlite':>9}{'ratio':>7}  {'bound':<15}{'pass':<6}load 1m"
    lines = [head, "-" * len(head)]
    for r in rows:
        ratio = "" if r["ratio"] is None else f"{r['ratio']:.2f}"
        verdict = {True: "PASS", False: "FAIL", None: "-"}[r["pass"]]
        lines.append(f"{r['goal']:<33}{r['storage']:<11}{r['figure']:>9.2f}{r['sqlite']:>9.2f}{ratio:>7}  "
                     f"{r['bound']:<15}{verdict:<6}{r['load']['load_1m']}")
    return "\n".join(lines)


def table(import_s: dict[str, float], served: dict[str, Any], rat: dict[str, Any]) -> str:
    head = (f"{'storage':<11}{'import s':>9}{'first ms':>10}{'fts p50':>9}{'fts p95':>9}"
            f"{'p50/sq':>8}{'p95/sq':>8}{'get p50':>9}")
    lines = [head, "-" * len(head)]
    for db, kind in STORAGES:
        s = served[db]
        r = rat.get(db, {"fts_p50_vs_sqlite": 1.0, "fts_p95_vs_sqlite": 1.0})
        lines.append(f"{kind:<11}{import_s[db]:>9.2f}{s['first_search_ms']:>10.1f}{s['doc_search_fts']['p50_ms']:>9.2f}"
                     f"{s['doc_search_fts']['p95_ms']:>9.2f}{r['fts_p50_vs_sqlite']:>8.2f}"
                     f"{r['fts_p95_vs_sqlite']:>8.2f}{s['doc_get']['p50_ms']:>9.2f}")
    lines.append("(ms, client-side over stdio; 'first' = the first search of the pool (its full-text "
                 "index loaded or built); p50/p95 are warm searches)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="title-word queries and doc_get calls per storage")
    parser.add_argument("--topics", type=int, default=None,
                        help="measure a pool of the first N databricks topics (default: all, ~50k chunks)")
    parser.add_argument("--imports", type=int, default=1,
                        help="run the three IMPORTDOCs this many times (fresh pools each round; default 1)")
    parser.add_argument("--profile", action="store_true", help="also profile fts_ranked in-process per storage")
    ns = parser.parse_args()
    os.environ.setdefault("KNOWSPEC_FTS_ARRAYS", "sync")  # as docpool_fts: SQLite's arrays build in its first search
    source, info = cached_pool("databricks", DATABRICKS, COLLECTION)
    if ns.topics:
        source = subset_pool(source, ns.topics)
        info = {**info, "counts": {"topics_kept": ns.topics, "of": info["counts"]}}
    short, slugs = title_queries(source, ns.calls)
    labelled = [q["query"] for q in load_queries("databricks")["queries"]]
    singles = sorted({w for q in short for w in q.split() if len(w) >= 2})
    start = time.perf_counter()
    load_before = machine_load()
    cluster = PgCluster()
    try:
        cluster_dsn = cluster.start()
        import_rounds, import_cpu, import_growth = [], [], []
        for k in range(max(1, ns.imports)):
            pg_dsn = fresh_pg_database(cluster_dsn, f"knowspec_bench{k + 1}" if k else "knowspec_bench")
            settings, import_s, cpu_s, growth_mib = make_storages_appdir(CACHE / "storages-run", source, pg_dsn)
            import_rounds.append(import_s)
            import_cpu.append(cpu_s)
            import_growth.append(growth_mib)
        load_served = machine_load()
        served = anyio.run(measure, server_args(settings), labelled, short, singles, slugs)
        load_after = machine_load()
        inproc = profile_in_process(settings, labelled + short) if ns.profile else None
    finally:
        cluster.stop()
    rat = ratios(served)
    goals = goal_rows(import_rounds, served, load_after)
    data = {
        "corpus": DATABRICKS.name, "pool": info["counts"], "collection": COLLECTION,
        "setup": "one stdio server for all three storages; calls interleaved per query, order rotated",
        "sqlite_fts_arrays_mode": os.environ["KNOWSPEC_FTS_ARRAYS"],
        "queries": {"labelled": len(labelled), "title_words": len(short), "single_words": len(singles),
                    "first_search": FIRST_QUERY, "limit": 10, "agreement_limit": AGREE_LIMIT},
        "importdoc_s": {kind.lower(): import_s[db] for db, kind in STORAGES},  # the last round (served)
        "importdoc_rounds": [{**{kind.lower(): r[db] for db, kind in STORAGES},
                              **{f"{kind.lower()}_vs_sqlite": round(r[db] / r["sq"], 2) for db, kind in STORAGES[1:]},
                              "cpu_s_here": {kind.lower(): c[db] for db, kind in STORAGES},
                              "firebird_cpu_vs_sqlite": round(c["fb"] / c["sq"], 2),
                              "resident_growth_mib_here": {kind.lower(): g[db] for db, kind in STORAGES}}
                             for r, c, g in zip(import_rounds, import_cpu, import_growth)],
        "storages": {kind.lower(): served[db] for db, kind in STORAGES},
        "ratios_vs_sqlite": {"postgresql": rat["pg"], "firebird": rat["fb"]},
        "goal7": goals, "topics_flag": ns.topics,
        "agreement": served["agreement"],
        "server_peak_rss_mib": served["server_peak_rss_mib"],
        **({"in_process_fts_ranked": {kind.lower(): inproc[db] for db, kind in STORAGES}} if inproc else {}),
        "wall_s": round(time.perf_counter() - start, 1),
        "machine_load_before": load_before, "machine_load_at_serving": load_served,
        "machine_load_after": load_after,
    }
    write_results("docpool_storages", data)
    print()
    print(table(import_s, served, rat))
    for db, kind in STORAGES[1:]:
        r, a = rat[db], served["agreement"][db]
        print(f"{kind}: fts p95 {r['fts_p95_ms']} ms vs floor (SQLite p95) {r['floor_sqlite_p95_ms']} ms = "
              f"{r['fts_p95_vs_sqlite']}x (bound {r['bound']}x: {'pass' if r['p95_within_bound'] else 'FAIL'}); "
              f"identical to SQLite {a['identical']}/{a['queries']}, same topic sets "
              f"{a['same_set']}/{a['complete_sets_compared']}")
    for k, (r, c) in enumerate(zip(import_rounds, import_cpu), 1):
        print(f"IMPORTDOC round {k}: " + ", ".join(f"{kind} {r[db]} s" for db, kind in STORAGES) + "; vs SQLite: "
              + ", ".join(f"{kind} {r[db] / r['sq']:.2f}x" for db, kind in STORAGES[1:])
              + f"; CPU in this process: SQLite {c['sq']} s, Firebird {c['fb']} s = {c['fb'] / c['sq']:.2f}x")
    print(f"load average: start {load_before}, serving {load_served}, end {load_after}")
    print()
    print(goal_table(goals))

if __name__ == "__main__":
    main()
