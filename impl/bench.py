"""`knowspec bench NAME [args]`: run an on-demand benchmark from benchmarks/ (results as JSON).

The benchmarks live in the source checkout (``benchmarks/`` beside ``impl/``), with the corpora
they measure; the wheel does not ship them, so an installed knowspec says so instead of offering
an empty choice.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
NOT_IN_WHEEL = ("knowspec bench runs from a source checkout: the benchmarks and their corpora are not part of "
                "the installed package (run `.venv/bin/knowspec bench NAME` in a clone of the repository)")


def available(folder: Path = BENCHMARKS) -> list[str]:
    """Benchmark scripts: every module with a ``main()`` entry point (helpers like common.py have none)."""
    return sorted(p.stem.replace("_", "-") for p in folder.glob("*.py")
                  if "\ndef main(" in p.read_text(encoding="utf-8"))


def add_bench_parser(subparsers: argparse._SubParsersAction) -> None:
    names = available()
    p = subparsers.add_parser("bench", help="run an on-demand benchmark (writes benchmarks/results/<name>.json; "
                                            "needs a source checkout)")
    if names:
        p.add_argument("name", choices=names, help="which benchmark")
    else:
        p.add_argument("name", nargs="?", help="which benchmark (none: not a source checkout)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the benchmark")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if not available():
        print(NOT_IN_WHEEL, file=sys.stderr)
        return 2
    script = BENCHMARKS / f"{args.name.replace('-', '_')}.py"
    return subprocess.call([sys.executable, str(script), *args.args])
