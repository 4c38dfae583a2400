"""Where the OKF read side's memory goes (issue #18 goal 6): a tracemalloc profile, in process.

Run: knowspec bench okf_memory_profile [--bundle DIR] [--top 15] [--cold]
Writes benchmarks/results/okf_memory_profile.json. Calls the read handlers directly (no MCP
transport: the server's share is what ``okf_cold_memory`` adds on top) in the order the
server benchmark uses, then reports:

- the RSS after the imports alone (what no change to the bundle model can go under);
- the RSS and the traced bytes after each tool, and the traced peak;
- the live allocations after every tool, grouped by file and line (``--top`` rows), i.e. what
  the runtime's caches and the snapshot keep between calls;
- with ``--cold``, a cProfile of the first get_neighbors instead (top functions by own time).

tracemalloc slows the calls a few times: its times are not the server's.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import require_bundle, write_results  # noqa: E402
from okf_cold_memory import first_concept, read_tool_calls  # noqa: E402


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bundle", type=Path, default=None)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--cold", action="store_true", help="cProfile the first get_neighbors instead")
    args = parser.parse_args()
    bundle = require_bundle(args.bundle)

    from knowspec.generated.registry import BY_NAME
    from knowspec.impl import runtime as process
    from knowspec.impl.context import CallContext
    from knowspec.impl.errors import ToolError
    import importlib

    def handler(name: str):
        module, _, func = BY_NAME[name].impl.rpartition(":")
        return getattr(importlib.import_module(module), func)

    todo = read_tool_calls(str(bundle), first_concept(bundle))
    handlers = {name: handler(name) for name, _ in todo}
    gc.collect()
    results: dict = {"bundle": bundle.name, "rss_imports_only_mib": round(rss_mib(), 1)}
    with process.activated():
        if args.cold:
            name, arguments = todo[0]
            profile = cProfile.Profile()
            start = time.perf_counter()
            profile.enable()
            handlers[name](BY_NAME[name].input_model.model_validate(arguments), CallContext())
            profile.disable()
            results["cold_get_neighbors_s"] = round(time.perf_counter() - start, 3)
            out = io.StringIO()
            pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(args.top)
            print(out.getvalue())
            results["profile"] = out.getvalue()
            write_results("okf_memory_profile", results)
            return
        tracemalloc.start(1)
        steps = []
        for name, arguments in todo:
            start = time.perf_counter()
            try:
                handlers[name](BY_NAME[name].input_model.model_validate(arguments), CallContext())
                error = None
            except ToolError as exc:
                error = exc.code
            current, peak = tracemalloc.get_traced_memory()
            steps.append({"tool": name, "s": round(time.perf_counter() - start, 2), "error": error,
                          "rss_mib": round(rss_mib(), 1), "traced_mib": round(current / 2**20, 1),
                          "traced_peak_mib": round(peak / 2**20, 1)})
            print(steps[-1], flush=True)
        gc.collect()
        snapshot = tracemalloc.take_snapshot()
        top = snapshot.statistics("lineno")
        results["steps"] = steps
        results["traced_after_all_mib"] = round(sum(s.size for s in top) / 2**20, 1)
        results["top"] = [{"where": f"{s.traceback[0].filename.split('knowspec/')[-1]}:{s.traceback[0].lineno}",
                           "mib": round(s.size / 2**20, 2), "blocks": s.count} for s in top[: args.top]]
        by_file = snapshot.statistics("filename")
        results["top_files"] = [{"file": s.traceback[0].filename.split("knowspec/")[-1],
                                 "mib": round(s.size / 2**20, 2)} for s in by_file[: args.top]]
        for row in results["top"]:
            print(f"{row['mib']:8.2f} MiB {row['blocks']:8d} blocks  {row['where']}")
        print("by file:")
        for row in results["top_files"]:
            print(f"{row['mib']:8.2f} MiB  {row['file']}")
        results["rss_after_all_mib"] = round(rss_mib(), 1)
    write_results("okf_memory_profile", results)


if __name__ == "__main__":
    main()
