"""Where the OKF read side's memory goes (issue #18 goal 6): a tracemalloc profile, in process.

Run: knowspec bench okf_memory_profile [--bundle DIR] [--top 15] [--cold | --untraced]
Writes benchmarks/results/okf_memory_profile.json. Calls the read handlers directly (no MCP
transport: the server's share is what ``okf_cold_memory`` adds on top) in the order the
server benchmark uses, then reports:

- the RSS after the imports alone (what no change to the bundle model can go under);
- the RSS and the traced bytes after each tool, and the traced peak;
- the live allocations after every tool, grouped by file and line (``--top`` rows), i.e. what
  the runtime's caches and the snapshot keep between calls;
- with ``--untraced`` instead (no tracemalloc, whose bookkeeping changes the memory layout and
  hides the figures below), the RSS after each tool under the server's malloc settings and heap
  trim, and the small-object allocator's figures (``obmalloc_mib``): its arenas, the objects live
  in them, and its slack (free blocks in used pools, unused pools in kept arenas). Python returns
  an arena only once nothing in it lives, so a call's peak of small objects can stay resident
  after it as slack. Beside them, the bytes in use in glibc's heap (``c_heap_in_use_mib``:
  numpy's arrays, big strings and bytes, the tables of big dicts and lists);
- with ``--cold``, a cProfile of the first get_neighbors instead (top functions by own time).

tracemalloc slows the calls a few times: its times are not the server's.
"""

from __future__ import annotations

import argparse
import cProfile
import ctypes
import gc
import io
import os
import pstats
import re
import sys
import tempfile
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


_OBMALLOC_FIELDS = {
    "arenas": r"(\d+) arenas \* \d+ bytes/arena\s+=\s+([\d,]+)",
    "live": r"# bytes in allocated blocks\s+=\s+([\d,]+)",
    "free_blocks": r"# bytes in available blocks\s+=\s+([\d,]+)",
    "unused_pools": r"\d+ unused pools \* \d+ bytes\s+=\s+([\d,]+)",
}


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def c_heap_in_use_mib() -> float | None:
    """MiB malloc has handed out and not got back (glibc's ``mallinfo2``: in use in its arenas plus
    its own mappings); None elsewhere. CPython's small-object arenas are not among them."""
    try:
        mallinfo2 = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None
    mallinfo2.restype = _MallInfo2
    info = mallinfo2()
    return round((info.uordblks + info.hblkhd) / 2**20, 1)


def obmalloc_mib() -> dict[str, float] | None:
    """CPython's small-object allocator (``sys._debugmallocstats``, which writes to fd 2): MiB in
    its arenas, in live objects, in free blocks of used pools and in unused pools. None where the
    report lacks them (not CPython, another allocator, tracemalloc on)."""
    report = getattr(sys, "_debugmallocstats", None)
    if report is None:
        return None
    with tempfile.TemporaryFile("w+") as out:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(out.fileno(), 2)
        try:
            report()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read()
    figures = {}
    for name, pattern in _OBMALLOC_FIELDS.items():
        found = re.search(pattern, text)
        if found is None:
            return None
        figures[name] = round(int(found.groups()[-1].replace(",", "")) / 2**20, 1)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bundle", type=Path, default=None)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--cold", action="store_true", help="cProfile the first get_neighbors instead")
    parser.add_argument("--untraced", action="store_true",
                        help="no tracemalloc: the RSS and allocator figures under the server's malloc settings")
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
        if args.untraced:
            from knowspec.impl.server.native_memory import limit_arenas, release_free_memory

            limit_arenas()
            results["obmalloc_after_imports_mib"] = obmalloc_mib()
            results["c_heap_in_use_after_imports_mib"] = c_heap_in_use_mib()
        else:
            tracemalloc.start(1)
        steps = []
        for name, arguments in todo:
            start = time.perf_counter()
            try:
                handlers[name](BY_NAME[name].input_model.model_validate(arguments), CallContext())
                error = None
            except ToolError as exc:
                error = exc.code
            seconds = round(time.perf_counter() - start, 2)
            if args.untraced:
                release_free_memory()  # as the server does after a big call
                steps.append({"tool": name, "s": seconds, "error": error, "rss_mib": round(rss_mib(), 1),
                              "obmalloc_mib": obmalloc_mib(), "c_heap_in_use_mib": c_heap_in_use_mib()})
                print(steps[-1], flush=True)
                continue
            current, peak = tracemalloc.get_traced_memory()
            steps.append({"tool": name, "s": seconds, "error": error,
                          "rss_mib": round(rss_mib(), 1), "traced_mib": round(current / 2**20, 1),
                          "traced_peak_mib": round(peak / 2**20, 1)})
            print(steps[-1], flush=True)
        if args.untraced:
            results["steps"] = steps
            results["rss_after_all_mib"] = round(rss_mib(), 1)
            write_results("okf_memory_profile", results)
            return
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
