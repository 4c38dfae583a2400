"""Issue #18 goal 8: bundles past the default limits (synthetic, built by this benchmark).

Run: knowspec bench okf_scale [--small 5000] [--large 50000]
Writes benchmarks/results/okf_scale.json. The bundles (concepts with frontmatter, headings,
links to other concepts and prose from a fixed vocabulary, about 1 KB each) are generated once
under ``$KNOWSPEC_BENCH_CACHE`` (default /tmp/knowspec-bench). For each size, one fresh stdio
server started with the limits raised (``--max-bundle-files``, ``--max-bundle-bytes``) answers a
cold ``search_concepts`` (the load and the index build). Both servers then answer the warm
queries in turns, query by query, the order flipping each round: a change of the machine's
speed (this VM has fast and slow spells) touches both sizes alike, where one size measured after
the other could land in different spells (a sequential run once gave 2.06 between two runs
giving 0.90 and 1.29). One run prints:

- warm search_concepts p50 at the large size against the small one (bound 2x: the index must be
  sublinear in the number of concepts);
- the large bundle's cold load (first search_concepts) beside its parse floor (read + libyaml +
  pyromark, ``okf_read.floor_seconds``, the best of two passes in this run: one pass alone took
  24.8-35 s at 50k in earlier runs against 3.4-4.6 s here, most likely reading files the page
  cache had let go, which the server then found cached: the ratio came out at 0.18 instead of
  ~1.1), for reference only: one cold call against the best of two floors is biased against the
  figure, so goal 8's cold verdict (bound 1.3x) is ``okf_cold``'s, which alternates the floor
  and the figure over rounds;

and the load average at start and end (the machine is shared: ratios of one run are what counts).
Most of the queries are single vocabulary words that every concept's prose holds, so their exact
total is linear in their hits whatever the index; the warm figures are also split into broad
queries (hits >= 10% of the concepts) and selective ones, each with its own ratio, and each
query's total and median time at each size are recorded and printed: a two-word phrase such as
``merge partition`` holds in ~9% of the bodies, under the broad share, yet its candidate bodies
(two to four times its hits) are read to count it exactly, so its time follows its hits. The search
index's bytes per concept (built in this process from the same bundle, by part) are reported
beside them.
A server without the limit flags (before goal 8) is run without them and reports its refusal.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
from mcp import ClientSession

sys.path.insert(0, str(Path(__file__).parent))
from common import (child_pids, compile_bytecode, goal, percentiles, server_memory_mib, stdio_session, timed,  # noqa: E402
                    write_results)
from okf_read import floor_seconds  # noqa: E402

from knowspec.impl import runtime as process  # noqa: E402
from knowspec.impl.okf.model import load_snapshot  # noqa: E402
from knowspec.impl.okf.search.concepts_index import index_for_snapshot  # noqa: E402

SEARCH_BOUND = 2.0
BROAD_SHARE = 0.10  # a query whose hits reach this share of the concepts is "broad"
COLD_BOUND = 1.3
CACHE = Path(os.environ.get("KNOWSPEC_BENCH_CACHE") or "/tmp/knowspec-bench")
WORDS = ("table cluster stream delta schema volume token python lakehouse notebook pipeline warehouse "
         "catalog permission job metric model serving vector index query engine storage account region "
         "policy budget compute photon autoloader checkpoint merge partition snapshot history").split()
QUERIES = ["delta", "cluster", "stream", "unity catalog", "lakehouse", "notebook 17", "photon engine",
           "checkpoint", "zz-not-there", "concept 4242", "merge partition", "warehouse"] * 3


def concept_text(i: int, n: int, rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(120)]
    paragraphs = [" ".join(words[k:k + 40]) + "." for k in range(0, 120, 40)]
    links = " ".join(f"[see {j}](/concepts/c{j:06d}.md)" for j in rng.sample(range(n), 3))
    tags = ", ".join(rng.sample(WORDS, 2))
    return (f"---\ntype: Reference\ntitle: Concept {i} {rng.choice(WORDS)}\n"
            f"description: About {rng.choice(WORDS)} and {rng.choice(WORDS)} number {i}\ntags: [{tags}]\n---\n"
            f"# Concept {i}\n\n{paragraphs[0]}\n\n## Details\n\n{paragraphs[1]} {links}\n\n"
            f"## Notes\n\n{paragraphs[2]}\n\n```\ncode {i} not a [link](/x.md)\n```\n")


def synthetic_bundle(n: int) -> Path:
    """A bundle of ``n`` concepts (built once, reused while its marker file exists)."""
    root = CACHE / f"okf-scale-{n}"
    done = root / ".okf" / "complete"
    if done.exists():
        return root
    rng = random.Random(n)
    (root / "concepts").mkdir(parents=True, exist_ok=True)
    (root / "index.md").write_text("---\nokf_version: \"0.1\"\n---\n# Index\n")
    for i in range(n):
        (root / "concepts" / f"c{i:06d}.md").write_text(concept_text(i, n, rng))
    done.parent.mkdir(exist_ok=True)
    done.write_text("")
    return root


def limit_flags(files: int, nbytes: int) -> list[str]:
    """The serve flags raising the bundle limits, when this build has them."""
    usage = subprocess.run([sys.executable, "-m", "knowspec.impl.cli", "serve", "--help"],
                           capture_output=True, text=True).stdout
    if "--max-bundle-files" not in usage:
        return []
    return ["--max-bundle-files", str(files), "--max-bundle-bytes", str(nbytes)]


def by_breadth(samples_ms: list[float], totals: list[int | None], n_concepts: int) -> dict:
    """Percentiles of the broad queries (hits >= BROAD_SHARE of the concepts) and of the others."""
    broad = [ms for ms, total in zip(samples_ms, totals) if (total or 0) >= BROAD_SHARE * n_concepts]
    selective = [ms for ms, total in zip(samples_ms, totals) if (total or 0) < BROAD_SHARE * n_concepts]
    return {"broad": percentiles(broad) if broad else None, "selective": percentiles(selective) if selective else None}


def by_query(samples_ms: list[float]) -> dict[str, float]:
    """Each distinct query's median over its turns (the first turn of a multi-word query at a
    size also signs that size's bodies, so its median is the warm figure)."""
    turns: dict[str, list[float]] = {}
    for q, ms in zip(QUERIES, samples_ms):
        turns.setdefault(q, []).append(ms)
    return {q: round(statistics.median(times), 3) for q, times in turns.items()}


def index_bytes(bundle: Path, files: int, nbytes: int) -> dict:
    """The search index of ``bundle`` built in this process: its bytes per concept, by part."""
    settings = process.RuntimeSettings(max_bundle_files=files, max_bundle_bytes=nbytes)
    with process.activated(process.Runtime(settings)):
        snapshot = load_snapshot(str(bundle), None)
        index = index_for_snapshot(snapshot)
        index.signatures()  # the signatures the warm multi-word queries make
        n = len(snapshot.concepts)
        return {part: round(size / n, 1) for part, size in index.nbytes_by_part().items()}


async def server_runs(sizes: list[tuple[int, Path, list[str]]]) -> dict[int, dict]:
    """Per size: a fresh server's cold search, then the warm queries, taken in turns."""
    out: dict[int, dict] = {}
    live: dict[int, tuple[ClientSession, int, str]] = {}
    async with AsyncExitStack() as stack:
        for n, bundle, flags in sizes:
            before = child_pids()
            session = await stack.enter_async_context(stdio_session(*flags))
            [pid] = child_pids() - before
            ms, result = await timed(session, "search_concepts", {"bundle_path": str(bundle), "query": "delta"})
            out[n] = {"cold_search_s": round(ms / 1000, 3)}
            if result.is_error:
                out[n]["error"] = (result.structured_content or {}).get("code", "error")
            else:
                live[n] = (session, pid, str(bundle))
        warm: dict[int, list[float]] = {n: [] for n in live}
        totals: dict[int, dict[str, int | None]] = {n: {} for n in live}
        for turn, q in enumerate(QUERIES):
            for n in (list(live) if turn % 2 == 0 else list(live)[::-1]):
                session, _, path = live[n]
                ms, result = await timed(session, "search_concepts", {"bundle_path": path, "query": q})
                warm[n].append(ms)
                totals[n][q] = (result.structured_content or {}).get("total")
        for n, (_, pid, _) in live.items():
            out[n].update(warm_search_concepts=percentiles(warm[n]), query_totals=totals[n],
                          warm_by_breadth=by_breadth(warm[n], [totals[n][q] for q in QUERIES], n),
                          warm_by_query=by_query(warm[n]),
                          rss_mib=server_memory_mib("VmRSS", pid))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", type=int, default=5_000)
    parser.add_argument("--large", type=int, default=50_000)
    args = parser.parse_args()
    compile_bytecode()  # the servers import bytecode, as an installed wheel's do
    load_start = os.getloadavg()
    started = time.perf_counter()
    results: dict = {"load_start": load_start, "sizes": {}}
    sizes = []
    for n in (args.small, args.large):
        bundle = synthetic_bundle(n)
        nbytes = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
        files, limit = max(10_000, n + 16), max(64 << 20, 2 * nbytes)  # never below the contract's
        flags = limit_flags(files, limit)
        results["sizes"][str(n)] = {"concepts": n, "bundle_mib": round(nbytes / 2**20, 1), "flags": flags,
                                    "floor_s": round(min(floor_seconds(bundle) for _ in range(2)), 3),
                                    "index_bytes_per_concept": index_bytes(bundle, files, limit)}
        sizes.append((n, bundle, flags))
    for n, run in anyio.run(server_runs, sizes).items():
        results["sizes"][str(n)].update(run)
        print(f"{n} concepts: {results['sizes'][str(n)]}", flush=True)
    small, large = results["sizes"][str(args.small)], results["sizes"][str(args.large)]
    goals = []
    if "warm_search_concepts" in small and "warm_search_concepts" in large:
        goals.append(goal(f"goal 8 warm search_concepts p50 at {args.large} (floor: p50 at {args.small})",
                          small["warm_search_concepts"]["p50_ms"], large["warm_search_concepts"]["p50_ms"],
                          SEARCH_BOUND, "ms"))
        for kind in ("broad", "selective"):
            low, high = small["warm_by_breadth"][kind], large["warm_by_breadth"][kind]
            if low and high:
                goals.append(goal(f"goal 8 ({kind} queries only) warm search_concepts p50 at {args.large} "
                                  f"(floor: p50 at {args.small})", low["p50_ms"], high["p50_ms"], SEARCH_BOUND, "ms"))
    if "warm_by_query" in small and "warm_by_query" in large:
        print(f"warm search_concepts by query, median of its turns (ms, total hits) at {args.small} -> {args.large}:")
        for q, low in small["warm_by_query"].items():
            high = large["warm_by_query"][q]
            print(f"  {q!r:18} {low:7.3f} ({small['query_totals'][q]}) -> {high:7.3f} ({large['query_totals'][q]}): "
                  f"{high / low:.2f}x", flush=True)
    if "error" not in large:
        # One cold call against the best of two floors taken before it is biased against the
        # figure (floor 4.20 s, ratio 1.32 here, while okf_cold gave 1.15 in the same hour):
        # goal 8's cold verdict is okf_cold's, floor and figure alternated over rounds.
        results["cold_reference"] = {"floor_s": large["floor_s"], "figure_s": large["cold_search_s"],
                                     "ratio": round(large["cold_search_s"] / large["floor_s"], 2)}
        print(f"cold load at {args.large} (first search_concepts), one run: {large['cold_search_s']:.3f} s against "
              f"a floor of {large['floor_s']:.3f} s, ratio {results['cold_reference']['ratio']:.2f}; goal 8's cold "
              f"verdict: `knowspec bench okf-cold --scale {args.large}` (bound {COLD_BOUND}x)", flush=True)
    else:
        print(f"goal 8: the server refused {args.large} concepts ({large['error']})", flush=True)
    results.update(goals=goals, load_end=os.getloadavg(), seconds=round(time.perf_counter() - started, 1))
    write_results("okf_scale", results)


if __name__ == "__main__":
    main()
