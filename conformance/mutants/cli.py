"""``knowspec conform mutants``: run the suite through every mutant and report the kill rate."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from knowspec.conformance.config import RunConfig
from knowspec.conformance.reporters import report_path


def add_mutants_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--server", required=True, help='the real stdio server command, e.g. "knowspec serve --stdio"')
    p.add_argument("--mutant", action="append", default=[], help="only this mutant (repeatable)")
    p.add_argument("--contract", type=Path, default=None)
    p.add_argument("--family", choices=("okf", "docpool", "all"), default="okf")
    p.add_argument("--max-examples", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--check", action="append", default=[], dest="checks")
    p.add_argument("--tool", action="append", default=[], dest="tools",
                   help="check only this tool (repeatable); default: every tool of the family")
    p.add_argument("--kill-rate", action="store_true", help="exit 1 unless every mutant is killed")
    p.add_argument("--json", type=Path, default=None, help="write the per-mutant results here")
    p.add_argument("--list", action="store_true", help="list the mutants and the rule each breaks")


def run_mutants(ns: argparse.Namespace) -> int:
    from knowspec.conformance.mutants.catalogue import CLIENT_MUTANTS, MUTANTS
    from knowspec.conformance.mutants.killrate import ALL_MUTANTS, kill_rate

    console = Console(stderr=True)
    if ns.list:
        for name in ALL_MUTANTS:
            m = MUTANTS.get(name) or CLIENT_MUTANTS.get(name)
            console.print(f"{name:36} {m.rule if m else 'concurrent answers are swapped'}", highlight=False)
        return 0
    unknown = [m for m in ns.mutant if m not in ALL_MUTANTS]
    if unknown:
        console.print(f"[red]unknown mutant(s): {', '.join(unknown)}")
        return 2
    base = RunConfig(target="", family=ns.family, seed=ns.seed, max_examples=ns.max_examples,
                     contract_path=ns.contract, checks=tuple(ns.checks), tools=tuple(ns.tools),
                     shared_session=True)
    results = []
    for res in kill_rate(base, shlex.split(ns.server), ns.mutant or None):
        results.append(res)
        if res.name == "identity":
            if res.unreachable:
                console.print("[red]the server is unreachable through the identity proxy")
                return 2
            console.print(f"baseline (identity proxy): {len(res.killed_by)} failing case(s)")
            continue
        verdict = "[green]killed[/]" if res.killed else "[red]survived[/]"
        console.print(f"{res.name:36} {verdict} {escape(', '.join(res.killed_by[:4]))}", highlight=False)
    mutants = [r for r in results if r.name != "identity"]
    killed = sum(r.killed for r in mutants)
    console.print(f"baseline failures (identity proxy): {len(results[0].killed_by)}")
    console.print(f"[bold]kill rate {killed}/{len(mutants)}")
    if ns.json:
        report_path(ns.json).write_text(json.dumps({"killed": killed, "total": len(mutants), "baseline_failures":
                                       list(results[0].killed_by), "mutants": [
                                           {"name": r.name, "killed": r.killed, "by": list(r.killed_by)}
                                           for r in mutants]}, indent=2) + "\n", encoding="utf-8")
    return 1 if ns.kill_rate and killed < len(mutants) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="knowspec conform mutants", description=__doc__)
    add_mutants_arguments(parser)
    ns = parser.parse_args(argv)
    return run_mutants(ns)
