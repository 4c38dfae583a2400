"""Issue #18 goal 5 and goal 8's cold part, the floor and the figure alternated over several rounds.

Run: knowspec bench okf_cold [--bundle DIR] [--rounds 3] [--scale 50000 | --scale 0]
Writes benchmarks/results/okf_cold.json. The floor (read every ``.md`` + libyaml frontmatter +
pyromark body parse, ``okf_read.floor_seconds``, one pass, in this process) swings by 2x on a
shared machine, so one floor beside one figure says little: each round measures the floor, then a
fresh stdio server's first call, then the floor again, and takes the ratio of the figure to the
mean of the two floors. The goal lines use the median of the rounds' ratios (each round's floor,
figure and ratio are recorded too). Each round also records CPU seconds: the floor's (this
process) and the server's for the call (``/proc``), whose ratio other processes' load inflates
far less than the wall-clock one:

- goal 5: the first ``get_neighbors`` on databricks-okf (``okf_cold_memory`` measures it once,
  beside the memory figures); bound 1.3x;
- goal 8 (cold): the first ``search_concepts`` on the synthetic ``--scale`` bundle of
  ``okf_scale`` (load and index build), the server started with the raised limits; bound 1.3x.

The load average is recorded at start and end; the floor is single-process, and so is the server.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from common import compile_bytecode, goal, require_bundle, server_cpu_seconds, stdio_session, timed, write_results  # noqa: E402
from okf_cold_memory import first_concept  # noqa: E402
from okf_read import floor_seconds  # noqa: E402
from okf_scale import limit_flags, synthetic_bundle  # noqa: E402

BOUND = 1.3


async def first_call(flags: list[str], name: str, arguments: dict) -> tuple[float, float | None]:
    """Wall seconds of a fresh server's first call (client side) and the server's CPU seconds
    spent on it; the answer is checked to be no error."""
    async with stdio_session(*flags) as session:
        cpu_before = server_cpu_seconds()
        ms, result = await timed(session, name, arguments)
        cpu_after = server_cpu_seconds()
        if result.is_error:
            raise SystemExit(f"{name} failed: {result.structured_content}")
        cpu = cpu_after - cpu_before if cpu_before is not None and cpu_after is not None else None
        return ms / 1000, cpu


def cpu_floor(bundle: Path) -> tuple[float, float]:
    """The floor's wall and CPU seconds (one pass, this process)."""
    cpu = time.process_time()
    wall = floor_seconds(bundle)
    return wall, time.process_time() - cpu


def alternated(bundle: Path, rounds: int, flags: list[str], name: str, arguments: dict) -> dict:
    """``rounds`` of floor, figure, floor; each round's ratio against the mean of its two floors,
    in wall time and in CPU time (the server's CPU for the call against this process's)."""
    rows = []
    for _ in range(rounds):
        before, before_cpu = cpu_floor(bundle)
        figure, figure_cpu = anyio.run(first_call, flags, name, arguments)
        after, after_cpu = cpu_floor(bundle)
        floor, floor_cpu = (before + after) / 2, (before_cpu + after_cpu) / 2
        row = {"floor_s": round(floor, 3), "floors_s": [round(before, 3), round(after, 3)],
               "figure_s": round(figure, 3), "ratio": round(figure / floor, 3), "load": os.getloadavg()[0],
               "floor_cpu_s": round(floor_cpu, 3), "figure_cpu_s": None, "cpu_ratio": None}
        if figure_cpu is not None:
            row.update(figure_cpu_s=round(figure_cpu, 3), cpu_ratio=round(figure_cpu / floor_cpu, 3))
        rows.append(row)
        print(f"{bundle.name} {name}: {row}", flush=True)
    median = statistics.median(r["ratio"] for r in rows)
    cpu_ratios = [r["cpu_ratio"] for r in rows if r["cpu_ratio"] is not None]
    return {"rounds": rows, "median_ratio": round(median, 3),
            "median_cpu_ratio": round(statistics.median(cpu_ratios), 3) if cpu_ratios else None,
            "median_floor_s": round(statistics.median(r["floor_s"] for r in rows), 3),
            "median_figure_s": round(statistics.median(r["figure_s"] for r in rows), 3)}


def median_goal(name: str, run: dict) -> dict:
    """The goal line of the median round (floor and figure are the medians; the ratio the median ratio)."""
    row = goal(name, run["median_floor_s"], run["median_figure_s"], BOUND, "s")
    row["ratio"] = run["median_ratio"]
    row["holds"] = run["median_ratio"] <= BOUND
    row["median_cpu_ratio"] = run["median_cpu_ratio"]
    print(f"  median of the rounds' ratios: {run['median_ratio']} ({'PASS' if row['holds'] else 'FAIL'}); "
          f"in CPU time (server's CPU for the call / the floor's): {run['median_cpu_ratio']}", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bundle", type=Path, default=None,
                        help="OKF bundle for goal 5 (default: $KNOWSPEC_CORPUS_DIR/databricks-okf)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scale", type=int, default=50_000, help="goal 8 bundle size (0: skip goal 8)")
    parser.add_argument("--skip-goal5", action="store_true")
    args = parser.parse_args()
    compile_bytecode()  # the servers import bytecode, as an installed wheel's do
    load_start = os.getloadavg()
    started = time.perf_counter()
    results: dict = {"load_start": load_start, "rounds": args.rounds}
    goals = []
    if not args.skip_goal5:
        bundle = require_bundle(args.bundle)
        run = alternated(bundle, args.rounds, [], "get_neighbors",
                         {"bundle_path": str(bundle), "concept_id": first_concept(bundle)})
        results["goal5"] = {"bundle": bundle.name, **run}
        goals.append(median_goal("goal 5 cold start to the first get_neighbors (s, floor: read+yaml+pyromark)", run))
    if args.scale:
        bundle = synthetic_bundle(args.scale)
        nbytes = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
        flags = limit_flags(max(10_000, args.scale + 16), max(64 << 20, 2 * nbytes))
        run = alternated(bundle, args.rounds, flags, "search_concepts", {"bundle_path": str(bundle), "query": "delta"})
        results["goal8"] = {"concepts": args.scale, "flags": flags, **run}
        goals.append(median_goal(f"goal 8 cold load at {args.scale} (first search_concepts; floor: read+yaml+pyromark)",
                                 run))
    results.update(goals=goals, load_end=os.getloadavg(), seconds=round(time.perf_counter() - started, 1))
    write_results("okf_cold", results)


if __name__ == "__main__":
    main()
