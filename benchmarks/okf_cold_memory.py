"""Issue #18 goals 5 and 6 on the real corpus: the cold first get_neighbors and the server's memory.

Run: knowspec bench okf_cold_memory [--bundle DIR] [--rounds 3]  (default: $KNOWSPEC_CORPUS_DIR/databricks-okf)
Writes benchmarks/results/okf_cold_memory.json. One run measures, side by side:

- the floor: read every ``.md`` file, load its frontmatter with libyaml and parse its body with
  pyromark (``okf_read.floor_seconds``, the best of two passes, in this process);
- goal 5: a fresh stdio server's first call, ``get_neighbors`` (client-side time); bound 1.3x
  the floor;
- the idle server's RSS (after initialize, before any call): the imports alone, which bound
  what any change to the bundle model can achieve;
- goal 6: that server's RSS (``VmRSS``, split into anonymous and file pages, and the peak
  ``VmHWM``) after every read tool
  (list_concepts, read_concept, search_concepts, search_sections, get_neighbors,
  validate_bundle, get_semantic_graph) ran on the bundle; bound 3x the bundle's bytes;
- the libraries' floor: a fresh server's RSS after the same tools on the shipped sample bundle
  (a few KiB): the imports, the extension libraries the tools load (the schema validator's
  code, the parsers; numpy only ever in the search index's helper process) and the caches'
  fixed part. What the bundle
  itself costs is the figure minus this floor (``data_share``, reported beside goal 6);
- beside goal 6, not in it: the RSS after one more search_concepts, a two-word query, which
  has the index's helper process sign every body (``boundary_signatures``: 512 bytes a concept
  kept), a structure the goal's one-word search never builds.

The load average is recorded at start and end: the machine is shared, ratios measured in the
same run are the figures to trust.

Each round starts fresh servers; the goals take the median of the rounds. One server's RSS after
the read tools varies by several MiB between identical runs (databricks-okf: 125.8-133.0 MiB
before get_semantic_graph, same code): which worker thread serves a call, hence which malloc
arena and which objects land where, changes what stays resident (session 28: after search_concepts a
round lands at 118-120 or at 124 MiB; with one malloc arena every round was low, but the vector
path's threads then contend for it). Every round's figures are kept (``rounds``), with the mapped
files' resident pages per library (``rss_file_by_library_mib``): the schema validator's, say, are
memory the OKF model does not choose.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from common import (child_pids, compile_bytecode, goal, require_bundle, server_memory_mib, server_temp_files_mib, stdio_session,  # noqa: E402
                    timed, write_results)
from okf_read import floor_seconds  # noqa: E402

COLD_BOUND = 1.3
MEMORY_BOUND = 3.0
TWO_WORD_QUERY = "delta table"  # after the goal's figure: what signing the bodies adds


def bundle_bytes(bundle: Path) -> int:
    return sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())


def read_tool_calls(path: str, concept_id: str) -> list[tuple[str, dict]]:
    """The read tools in the order both memory benchmarks call them, the cold get_neighbors first."""
    return [
        ("get_neighbors", {"bundle_path": path, "concept_id": concept_id}),
        ("list_concepts", {"bundle_path": path}),
        ("read_concept", {"bundle_path": path, "concept_id": concept_id}),
        ("search_concepts", {"bundle_path": path, "query": "delta"}),
        ("search_sections", {"bundle_path": path, "query": "delta table"}),
        ("get_neighbors", {"bundle_path": path, "concept_id": concept_id, "direction": "both"}),
        ("validate_bundle", {"bundle_path": path}),
        ("get_semantic_graph", {"bundle_path": path}),
    ]


def first_concept(bundle: Path) -> str:
    """A concept ID of the bundle with links (the first concept file in path order)."""
    paths = sorted(p for p in bundle.rglob("*.md") if p.name not in ("index.md", "log.md"))
    return paths[0].relative_to(bundle).as_posix()[:-3]


def rss_parts() -> dict[str, float | None]:
    """The resident size split: anonymous memory (the process's own) and mapped files (mostly the
    extension libraries' pages, whose count depends on the page cache's state: the same code
    measured 2-3 MiB apart between two copies of one virtualenv)."""
    return {field: server_memory_mib(field) for field in ("RssAnon", "RssFile", "RssShmem")}


def file_pages_by_library(top: int = 8) -> dict[str, float]:
    """The serving child's resident pages of mapped files (``/proc/PID/smaps``), in MiB per file
    name, the ``top`` largest; empty where /proc cannot tell."""
    pages: Counter[str] = Counter()
    for pid in child_pids():
        try:
            lines = Path(f"/proc/{pid}/smaps").read_text().splitlines()
        except OSError:
            continue
        name = None
        for line in lines:
            fields = line.split()
            if fields and not fields[0].endswith(":"):  # a mapping's header: range, perms, ..., path
                name = Path(fields[5]).name if len(fields) > 5 and fields[5].startswith("/") else None
            elif fields[:1] == ["Rss:"] and name is not None:
                pages[name] += int(fields[1])
    return {name: round(kib / 1024, 1) for name, kib in pages.most_common(top)}


def sample_bundle() -> Path:
    from knowspec.impl.demo import EXAMPLES

    return EXAMPLES / "okf-sample"


async def floor_run(bundle: Path) -> float | None:
    """A fresh server's RSS after the read tools on ``bundle`` (a tiny one: the libraries' floor)."""
    path = str(bundle)
    async with stdio_session() as session:
        for name, arguments in read_tool_calls(path, first_concept(bundle)):
            await timed(session, name, arguments)
        return server_memory_mib("VmRSS")


async def server_run(bundle: Path, concept_id: str) -> dict:
    out: dict = {}
    path = str(bundle)
    async with stdio_session() as session:
        out["rss_idle_mib"] = server_memory_mib("VmRSS")  # imports alone: no change to the bundle model goes under it
        out["rss_idle_parts_mib"] = rss_parts()
        ms, result = await timed(session, "get_neighbors", {"bundle_path": path, "concept_id": concept_id})
        out["cold_get_neighbors_s"] = round(ms / 1000, 3)
        out["cold_get_neighbors_error"] = result.is_error
        out["rss_after_first_call_mib"] = server_memory_mib("VmRSS")
        calls = read_tool_calls(path, concept_id)[1:]  # the cold get_neighbors was the first
        out["tools"] = {}
        for name, arguments in calls:
            ms, result = await timed(session, name, arguments)
            code = (result.structured_content or {}).get("code") if result.is_error else None
            out["tools"][name] = {"ms": round(ms, 1), "error": code or result.is_error,
                                  "rss_after_mib": server_memory_mib("VmRSS")}
        out["rss_after_all_tools_mib"] = server_memory_mib("VmRSS")
        out["rss_after_all_tools_parts_mib"] = rss_parts()
        out["rss_file_by_library_mib"] = file_pages_by_library()
        out["temp_files_after_all_tools_mib"] = server_temp_files_mib()  # in the page cache, not in RSS
        out["peak_rss_mib"] = server_memory_mib("VmHWM")
        # Reported beside goal 6, not in it: a two-word query makes the index sign every body
        # (boundary_signatures), which the goal's one-word search never asks for.
        ms, result = await timed(session, "search_concepts", {"bundle_path": path, "query": TWO_WORD_QUERY})
        out["two_word_search"] = {"ms": round(ms, 1), "error": result.is_error,
                                  "rss_after_mib": server_memory_mib("VmRSS")}
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bundle", type=Path, default=None,
                        help="OKF bundle (default: $KNOWSPEC_CORPUS_DIR/databricks-okf)")
    parser.add_argument("--rounds", type=int, default=3, help="fresh servers; the goals take their median")
    args = parser.parse_args()
    bundle = require_bundle(args.bundle)
    size_mib = bundle_bytes(bundle) / 2**20
    if not size_mib:
        raise SystemExit(f"okf_cold_memory: {bundle.name} holds no bytes to measure against")
    compile_bytecode()  # the servers import bytecode, as an installed wheel's do
    load_start = os.getloadavg()
    started = time.perf_counter()
    floor = min(floor_seconds(bundle) for _ in range(2))
    rounds = []
    for _ in range(max(1, args.rounds)):
        run = anyio.run(server_run, bundle, first_concept(bundle))
        run["rss_libraries_floor_mib"] = anyio.run(floor_run, sample_bundle())
        rounds.append(run)
        if run.get("rss_idle_mib") is not None:
            print(f"idle server RSS (imports only) {run['rss_idle_mib']:.1f} MiB; after all tools "
                  f"{run['rss_after_all_tools_mib']:.1f} MiB (and {run['temp_files_after_all_tools_mib']} MiB in "
                  f"nameless temporary files), peak {run['peak_rss_mib']:.1f} MiB", flush=True)
    two_word = sorted(run["two_word_search"]["rss_after_mib"] for run in rounds if "two_word_search" in run)
    if two_word:
        print(f"beside goal 6: RSS after a two-word search_concepts ({TWO_WORD_QUERY!r}, the bodies signed) per round: "
              f"{', '.join(f'{mib:.1f}' for mib in two_word)} MiB", flush=True)
    fields = ("cold_get_neighbors_s", "rss_idle_mib", "rss_after_all_tools_mib", "peak_rss_mib", "rss_libraries_floor_mib")
    if any(run[field] is None for run in rounds for field in fields):
        raise SystemExit("okf_cold_memory: the server's memory cannot be read here (/proc/PID/status, Linux only)")
    median = {field: statistics.median(run[field] for run in rounds) for field in fields}
    after_all = sorted(run["rss_after_all_tools_mib"] for run in rounds)
    print(f"RSS after all tools per round: {', '.join(f'{mib:.1f}' for mib in after_all)} MiB (the goal takes the "
          f"median; rounds fall into two modes a few MiB apart, see the module docstring)", flush=True)
    data_share = (median["rss_after_all_tools_mib"] - median["rss_libraries_floor_mib"]) / size_mib
    print(f"libraries' floor (the same tools on {sample_bundle().name}) {median['rss_libraries_floor_mib']:.1f} MiB; "
          f"the bundle's own share {data_share:.2f}x its bytes (goal 6 leaves it "
          f"{(MEMORY_BOUND * size_mib - median['rss_libraries_floor_mib']) / size_mib:.2f}x)", flush=True)
    goals = [
        goal("goal 5 cold start to the first get_neighbors (s, floor: read+yaml+pyromark)",
             floor, median["cold_get_neighbors_s"], COLD_BOUND, "s"),
        goal("goal 6 server RSS after every read tool (MiB, floor: the bundle's bytes)",
             size_mib, median["rss_after_all_tools_mib"], MEMORY_BOUND, "MiB"),
    ]
    results = {"bundle": bundle.name, "bundle_mib": round(size_mib, 1), "floor_s": round(floor, 3),
               "load_start": load_start, "median": median, "data_share": round(data_share, 2),
               "two_word_search_rss_median_mib": statistics.median(two_word) if two_word else None,
               "rounds": rounds, "goals": goals,
               "load_end": os.getloadavg(), "seconds": round(time.perf_counter() - started, 1)}
    write_results("okf_cold_memory", results)


if __name__ == "__main__":
    main()
