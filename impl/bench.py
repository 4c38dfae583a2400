"""`knowspec bench NAME [args]`: run an on-demand benchmark from benchmarks/ (results as JSON)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def available() -> list[str]:
    """Benchmark scripts: every module with a ``main()`` entry point (helpers like common.py have none)."""
    return sorted(p.stem.replace("_", "-") for p in BENCHMARKS.glob("*.py")
                  if "\ndef main(" in p.read_text(encoding="utf-8"))


def add_bench_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("bench", help="run an on-demand benchmark (writes benchmarks/results/<name>.json)")
    p.add_argument("name", choices=available() or ["none"], help="which benchmark")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the benchmark")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    script = BENCHMARKS / f"{args.name.replace('-', '_')}.py"
    return subprocess.call([sys.executable, str(script), *args.args])
