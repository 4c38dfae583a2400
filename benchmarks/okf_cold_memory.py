"""Issue #18 goals 5 and 6 on the real corpus: the cold first get_neighbors and the server's memory.

Run: knowspec bench okf_cold_memory [--bundle DIR]  (default: $KNOWSPEC_CORPUS_DIR/databricks-okf)
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
  validate_bundle, get_semantic_graph) ran on the bundle; bound 3x the bundle's bytes.

The load average is recorded at start and end: the machine is shared, ratios measured in the
same run are the figures to trust.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from common import goal, require_bundle, server_memory_mib, server_temp_files_mib, stdio_session, timed, write_results  # noqa: E402
from okf_read import floor_seconds  # noqa: E402

COLD_BOUND = 1.3
MEMORY_BOUND = 3.0


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
        out["temp_files_after_all_tools_mib"] = server_temp_files_mib()  # in the page cache, not in RSS
        out["peak_rss_mib"] = server_memory_mib("VmHWM")
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bundle", type=Path, default=None,
                        help="OKF bundle (default: $KNOWSPEC_CORPUS_DIR/databricks-okf)")
    args = parser.parse_args()
    bundle = require_bundle(args.bundle)
    load_start = os.getloadavg()
    size_mib = bundle_bytes(bundle) / 2**20
    started = time.perf_counter()
    floor = min(floor_seconds(bundle) for _ in range(2))
    run = anyio.run(server_run, bundle, first_concept(bundle))
    goals = [
        goal("goal 5 cold start to the first get_neighbors (s, floor: read+yaml+pyromark)",
             floor, run["cold_get_neighbors_s"], COLD_BOUND, "s"),
        goal("goal 6 server RSS after every read tool (MiB, floor: the bundle's bytes)",
             size_mib, run["rss_after_all_tools_mib"] or 0.0, MEMORY_BOUND, "MiB"),
    ]
    results = {"bundle": bundle.name, "bundle_mib": round(size_mib, 1), "floor_s": round(floor, 3),
               "load_start": load_start, **run, "goals": goals, "load_end": os.getloadavg(),
               "seconds": round(time.perf_counter() - started, 1)}
    if run.get("rss_idle_mib") is not None:
        print(f"idle server RSS (imports only) {run['rss_idle_mib']:.1f} MiB; after all tools "
              f"{run['rss_after_all_tools_mib']:.1f} MiB (and {run['temp_files_after_all_tools_mib']} MiB in "
              f"nameless temporary files), peak {run['peak_rss_mib']:.1f} MiB", flush=True)
    write_results("okf_cold_memory", results)


if __name__ == "__main__":
    main()
