"""``knowspec conform mutants``: run the suite through every mutant and report the kill rate.

Host mode (fast, all tools, server-side mutants too)::

    knowspec conform mutants --kill-rate --json killrate.json \\
        --server ".venv/bin/python tests/conformance/mutant_host.py --control {control} --pool {pool} \\
                  --admin {admin} --reader {reader} --vectors --http 127.0.0.1:{port}"

Proxy mode (any stdio server; response, client and pairing mutants)::

    knowspec conform mutants --server "knowspec serve --stdio" --kill-rate
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shlex
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from knowspec.conformance.cli import hypothesis_cache_outside_cwd
from knowspec.conformance.config import RunConfig
from knowspec.conformance.reporters import report_path


def add_mutants_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--server", required=True,
                   help='the real server command, e.g. "knowspec serve --stdio"; with {control} it is a mutant '
                        "host ({port}: HTTP started once; {pool}: the pool fixture the runner writes)")
    p.add_argument("--mutant", action="append", default=[], help="only this mutant (repeatable)")
    p.add_argument("--contract", type=Path, default=None)
    p.add_argument("--family", choices=("okf", "docpool", "all"), default=None,
                   help="default: okf in proxy mode, all in host mode")
    p.add_argument("--max-examples", type=int, default=None, help="default 10 (proxy), 3 (host)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--check", action="append", default=[], dest="checks")
    p.add_argument("--tool", action="append", default=[], dest="tools",
                   help="proxy mode: check only this tool (repeatable); default: every tool of the family")
    p.add_argument("--jobs", type=int, default=None,
                   help="host mode: parallel workers, each with its own server (default: the CPU count)")
    p.add_argument("--quick", action="store_true", help="one mutant per tool plus the key server-side mutants (CI)")
    p.add_argument("--kill-rate", action="store_true", help="exit 1 unless every mutant is killed")
    p.add_argument("--min-rate", type=float, default=1.0, help="with --kill-rate: the rate that passes (0..1)")
    p.add_argument("--json", type=Path, default=None, help="write the per-mutant results here")
    p.add_argument("--list", action="store_true", help="list the mutants and the rule each breaks")


def _checks_of(cases: tuple[str, ...]) -> list[str]:
    """``check[tool]`` case ids → the distinct check ids, in order."""
    out: list[str] = []
    for case in cases:
        check = case.split("[", 1)[0]
        if check not in out:
            out.append(check)
    return out


def _tools_of(r) -> tuple[str, ...]:
    """The tools a mutant is counted under; a REST-surface mutant (no MCP tool) under "(REST)"."""
    return r.tools or (("(REST)",) if r.kind == "rest" else ("-",))


def _tool_label(r) -> str:
    tools = _tools_of(r)
    return tools[0] if len(tools) == 1 else "(cross-tool)"


def tool_counts(results: list) -> dict[str, tuple[int, int]]:
    """(killed, mutants) per tool; a mutant judged on several tools counts once for each."""
    counts: dict[str, list[int]] = {}
    for r in results:
        for tool in _tools_of(r):
            row = counts.setdefault(tool, [0, 0])
            row[0] += int(r.killed)
            row[1] += 1
    return {t: (k, n) for t, (k, n) in sorted(counts.items())}


def run_mutants(ns: argparse.Namespace) -> int:
    from knowspec.conformance.mutants.catalogue import CLIENT_MUTANTS, MUTANTS
    from knowspec.conformance.mutants.killrate import (
        ALL_MUTANTS, HOST_MUTANTS, host_kill_rate, is_host_command, kill_rate, quick_subset,
    )
    from knowspec.conformance.mutants.server_catalogue import SERVER_MUTANTS

    console = Console(stderr=True, soft_wrap=True)   # one line per mutant, whatever the width
    host = is_host_command(ns.server)
    known = HOST_MUTANTS if host else ALL_MUTANTS
    if ns.list:
        for name in known:
            m = MUTANTS.get(name) or CLIENT_MUTANTS.get(name) or SERVER_MUTANTS.get(name)
            tools = ",".join(getattr(m, "tools", ()) or ())
            console.print(f"{name:44} {m.rule if m else 'concurrent answers are swapped'}  [{tools}]", highlight=False)
        return 0
    hypothesis_cache_outside_cwd()
    unknown = [m for m in ns.mutant if m not in known]
    if unknown:
        console.print(f"[red]unknown mutant(s) for this mode: {', '.join(unknown)}")
        return 2
    names = list(ns.mutant or known)
    if ns.quick:
        names = quick_subset(names)
    family = ns.family or ("all" if host else "okf")
    examples = ns.max_examples if ns.max_examples is not None else (3 if host else 10)
    base = RunConfig(target="", family=family, seed=ns.seed, max_examples=examples, contract_path=ns.contract,
                     checks=tuple(ns.checks), tools=tuple(ns.tools), shared_session=True)
    ns.jobs = max(1, ns.jobs or os.cpu_count() or 1)
    start = time.monotonic()
    if host:
        results = host_kill_rate(base, ns.server, names, ns.jobs)
        baseline = results.pop()
    else:
        results = list(kill_rate(base, shlex.split(ns.server), names))
        baseline = results.pop(0)
        if baseline.unreachable:
            console.print("[red]the server is unreachable through the identity proxy")
            return 2
    elapsed = time.monotonic() - start
    for r in results:
        verdict = "[green]killed[/]  " if r.killed else "[red]SURVIVED[/]"
        console.print(f"{r.name:44} {_tool_label(r):22} {r.kind:9} {verdict} {r.seconds:6.1f}s "
                      f"{escape(', '.join(_checks_of(r.killed_by)[:4]))}", highlight=False)
    killed = sum(r.killed for r in results)
    per_tool = tool_counts(results)
    console.print(f"baseline failures (unmutated): {len(baseline.killed_by)} {escape(', '.join(baseline.killed_by[:5]))}")
    console.print("killed/mutants per tool: " + ", ".join(f"{t} {k}/{n}" for t, (k, n) in per_tool.items()),
                  highlight=False)
    console.print(f"[bold]kill rate {killed}/{len(results)} ({100 * killed / max(1, len(results)):.1f}%) "
                  f"in {elapsed:.0f}s wall, {ns.jobs if host else 1} job(s)")
    if ns.json:
        report_path(ns.json).write_text(json.dumps({
            "killed": killed, "total": len(results), "seconds": round(elapsed, 1), "mode": "host" if host else "proxy",
            "jobs": ns.jobs if host else 1, "quick": bool(ns.quick),
            "host_start_seconds": round(baseline.seconds, 1) if host else None,
            "mutant_seconds": round(sum(r.seconds for r in results), 1),
            "baseline_failures": list(baseline.killed_by),
            "per_tool": {t: {"killed": k, "total": n} for t, (k, n) in per_tool.items()},
            "per_kind": dict(sorted(collections.Counter(r.kind for r in results).items())),
            "mutants": [{"name": r.name, "tools": list(r.tools), "kind": r.kind, "killed": r.killed,
                         "checks": _checks_of(r.killed_by), "by": list(r.killed_by), "judged_with": r.judged_with,
                         "seconds": round(r.seconds, 1)} for r in results],
        }, indent=2) + "\n", encoding="utf-8")
    rate = killed / len(results) if results else 1.0
    return 1 if ns.kill_rate and (rate < ns.min_rate or (ns.min_rate >= 1.0 and killed < len(results))) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="knowspec conform mutants", description=__doc__)
    add_mutants_arguments(parser)
    ns = parser.parse_args(argv)
    return run_mutants(ns)
