"""search_concepts' index at a git revision against the working tree, alternated call by call in
one process (issue #18 goal 8's per-query figures).

Run: knowspec bench okf_search_ab --before REV [--sizes 5000,50000] [--calls 30] [--queries Q,...]
Writes benchmarks/results/okf_search_ab.json. For each size, the synthetic bundle of
``okf_scale`` is indexed once in this process (limits raised); then each query is answered by
``ConceptSearchIndex.search`` with the search modules as they are and as they were at ``REV``
(their source from ``git show REV:impl/okf/search/<module>.py``, module functions and class
methods swapped in place), in turns, and the medians of each side are printed with their ratio.
The answers of both sides are compared on every turn: a revision whose modules do not read the
index built by today's code fails the run rather than timing something else.

Why in one process: on a shared host the speed of everything swings by up to 2x within seconds
(``host_phases``), so two runs of a few seconds each, alternated, can differ by more than a change
does; turns of one call each see the same host.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import types
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

sys.path.insert(0, str(Path(__file__).parent))
from common import write_results  # noqa: E402
from docpool_setup import machine_load  # noqa: E402
from okf_scale import QUERIES, synthetic_bundle  # noqa: E402

from knowspec.impl import runtime as process  # noqa: E402

REPOSITORY = Path(__file__).resolve().parent.parent
SEARCH_MODULES = ("row_bitmaps", "vocabulary_index", "token_postings", "boundary_signatures", "folded_bodies",
                  "concepts_index")


def module_at(source: str, live: types.ModuleType) -> types.ModuleType:
    """``source`` run as a module beside ``live`` (same package, so its own imports resolve to
    the live modules, whose functions the swap replaces at the same time)."""
    module = types.ModuleType(live.__name__ + "__before")
    module.__dict__.update(__package__=live.__package__, __file__=getattr(live, "__file__", None))
    sys.modules[module.__name__] = module  # dataclasses look their module up by name
    exec(compile(source, f"<{live.__name__} before>", "exec"), module.__dict__)
    return module


def replacements(live: types.ModuleType, before: types.ModuleType) -> list[tuple[Any, str, Any]]:
    """``(owner, name, value)`` that make ``live`` behave as ``before``: its functions, and the
    methods of each class both define (the live classes stay, so objects built by today's code
    answer through yesterday's methods)."""
    swaps: list[tuple[Any, str, Any]] = []
    for name, value in vars(before).items():
        current = getattr(live, name, None)
        if isinstance(value, types.FunctionType) and getattr(value, "__module__", None) == before.__name__:
            swaps.append((live, name, value))
        elif isinstance(value, type) and isinstance(current, type) and value.__module__ == before.__name__:
            for attr, member in vars(value).items():
                if isinstance(member, (types.FunctionType, staticmethod, classmethod, property)):
                    swaps.append((current, attr, member))
    return swaps


@contextmanager
def swapped(swaps: list[tuple[Any, str, Any]]) -> Iterator[None]:
    """The ``swaps`` in place, and what they replaced back after."""
    kept = [(owner, name, owner.__dict__.get(name, _ABSENT)) for owner, name, _ in swaps]
    try:
        for owner, name, value in swaps:
            setattr(owner, name, value)
        yield
    finally:
        for owner, name, value in kept:
            if value is _ABSENT:
                delattr(owner, name)
            else:
                setattr(owner, name, value)


_ABSENT = object()


def alternated(turns: int, before: Callable[[], Any], after: Callable[[], Any],
               swap: Callable[[], Any]) -> dict[str, Any]:
    """Medians of ``before`` (run inside ``swap()``) and ``after`` over ``turns`` each, taken in
    turns whose order flips every time; every pair of answers must be equal."""
    times: dict[str, list[float]] = {"before": [], "after": []}
    for turn in range(turns):
        answers = {}
        for side in (("before", "after") if turn % 2 else ("after", "before")):
            if side == "before":
                with swap():  # in place before the clock starts: only the call is timed
                    answers[side], elapsed = _timed(before)
            else:
                answers[side], elapsed = _timed(after)
            times[side].append(elapsed)
        if answers["before"] != answers["after"]:
            raise SystemExit(f"the two sides answered differently: {answers['before']!r} != {answers['after']!r}")
    medians = {side: round(statistics.median(samples), 3) for side, samples in times.items()}
    return {**{f"{side}_ms": value for side, value in medians.items()},
            "ratio": round(medians["after"] / medians["before"], 2) if medians["before"] else None}


def _timed(call: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    answer = call()
    return answer, (time.perf_counter() - start) * 1000


def revision_swaps(revision: str) -> list[tuple[Any, str, Any]]:
    """The swaps that make today's search modules those of ``revision``."""
    import importlib

    swaps: list[tuple[Any, str, Any]] = []
    for name in SEARCH_MODULES:
        live = importlib.import_module(f"knowspec.impl.okf.search.{name}")
        shown = subprocess.run(["git", "show", f"{revision}:impl/okf/search/{name}.py"], cwd=REPOSITORY,
                               capture_output=True, text=True)
        if shown.returncode != 0:
            raise SystemExit(f"git show {revision}:impl/okf/search/{name}.py: {shown.stderr.strip()}")
        swaps += replacements(live, module_at(shown.stdout, live))
    return swaps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the git revision to compare with (e.g. HEAD~3)")
    parser.add_argument("--sizes", default="5000,50000", help="concepts per synthetic bundle")
    parser.add_argument("--calls", type=int, default=30, help="turns per side and query")
    parser.add_argument("--queries", default=None, help="comma-separated (default: okf_scale's, each once)")
    args = parser.parse_args()
    queries = args.queries.split(",") if args.queries else list(dict.fromkeys(QUERIES))
    swaps = revision_swaps(args.before)
    load_start = machine_load()
    sizes: dict[int, dict[str, Any]] = {}
    for n in (int(size) for size in args.sizes.split(",")):
        bundle = synthetic_bundle(n)
        settings = process.RuntimeSettings(max_bundle_files=n + 1000, max_bundle_bytes=1 << 31)
        with process.activated(process.Runtime(settings)):
            from knowspec.impl.okf.model import load_snapshot
            from knowspec.impl.okf.search.concepts import normalise_query
            from knowspec.impl.okf.search.concepts_index import index_for_snapshot

            index = index_for_snapshot(load_snapshot(str(bundle), None))
            index.signatures()  # made once, outside the timed calls (both sides read the same)
            by_query = {}
            for query in queries:
                folded = normalise_query(query)
                row = alternated(args.calls, lambda: index.search(folded, 10), lambda: index.search(folded, 10),
                                 lambda: swapped(swaps))
                row["total"] = index.search(folded, 10).total
                by_query[query] = row
                print(f"{n:>6} {query!r:<18} before {row['before_ms']:8.3f} ms  after {row['after_ms']:8.3f} ms"
                      f"  ({row['ratio']}x)  total {row['total']}", flush=True)
            sizes[n] = by_query
    write_results("okf_search_ab", {"before": args.before, "calls": args.calls, "sizes": sizes,
                                    "load_start": load_start, "load_end": machine_load()})


if __name__ == "__main__":
    main()
