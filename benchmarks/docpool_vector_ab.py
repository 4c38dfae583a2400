"""Vector and hybrid doc_search through several stdio servers that differ only in their settings, call by call.

Run: .venv/bin/python benchmarks/docpool_vector_ab.py --server NAME[:VAR=VALUE,...] [--server ...]
[--modes vector,hybrid] [--calls 70] [--rounds 2] [--block 1]. Needs the latency pool
``benchmarks/docpool_vector.py`` built (``$KNOWSPEC_BENCH_CACHE/vector-run/latency``). Writes
benchmarks/results/docpool_vector_ab.json.

Every server serves the same 100k-chunk pool; each query is asked of every server in turn (the order
flips from one query to the next), so a load change on the shared host reaches every server alike:
the difference between two servers' p50s in one run is the figure to trust, not the p50s themselves.
Asked in turn, each server finds the caches holding the other's model and sketch bytes:
``--block N`` lets each answer N queries in a row instead (the order still flips from one block to
the next), its first call asked but not counted, so a change that acts through the caches shows as
it would in one server alone while a block still lasts well under the host's phases
(``host_phases.py``: seconds). E.g. ``--server one: --server two:KNOWSPEC_VECTOR_THREADS=2`` sets
the query embedding's threads against the default. Each figure carries the server's CPU per call,
and the run the load averages at its start and end. The server's query-vector cache is off
(``KNOWSPEC_QUERY_VECTORS=0``), as for docpool_vector's goal figures.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from common import percentiles, stdio_session, timed, write_results  # noqa: E402
from docpool_setup import CACHE, labelled_query_texts, machine_load  # noqa: E402
from docpool_vector import _server_pid, reuse_appdir, server_cpu_ms  # noqa: E402


def parse_server(text: str) -> tuple[str, dict[str, str]]:
    """``NAME:VAR=VALUE,VAR=VALUE`` -> (NAME, {VAR: VALUE})."""
    name, _, assignments = text.partition(":")
    env = dict(item.split("=", 1) for item in assignments.split(",") if item)
    return name, env


def schedule(servers: int, modes: list[str], calls: int, rounds: int,
             block: int = 1) -> Iterator[tuple[int, str, int, bool]]:
    """``(server, mode, query, counted)`` in the order asked: each round, ``block`` queries at a
    time, every mode in turn, every server answers them in a row (their order flipping from one
    block to the next and one round to the next); with ``block > 1`` each block's first call is
    asked but not counted (its caches held the other servers' bytes)."""
    order = list(range(servers))
    for r in range(rounds):
        for turn, first in enumerate(range(0, calls, block)):
            for mode in modes:
                for server in (order if (turn + r) % 2 == 0 else order[::-1]):
                    for query in range(first, min(first + block, calls)):
                        yield server, mode, query, block == 1 or query != first


async def compare(server_args: list[str], servers: list[tuple[str, dict[str, str]]], queries: list[str],
                  modes: list[str], calls: int, rounds: int, block: int = 1) -> dict:
    async with AsyncExitStack() as stack:
        sessions = []
        for name, env in servers:
            session = await stack.enter_async_context(stdio_session(*server_args, env=env))
            for query in queries[:3]:  # warm: vectors loaded, embedder made, full-text arrays read
                for mode in modes:
                    await timed(session, "doc_search", {"query": query, "mode": mode})
            sessions.append((name, session, _server_pid()))
        samples = {(name, mode): [] for name, _ in servers for mode in modes}
        cpu = {key: 0.0 for key in samples}
        for server, mode, i, counted in schedule(len(sessions), modes, calls, rounds, block):
            name, session, pid = sessions[server]
            before = server_cpu_ms(pid)
            ms, result = await timed(session, "doc_search", {"query": queries[i % len(queries)], "mode": mode})
            if result.is_error:
                raise SystemExit(f"{name} {mode}: {result.content}")
            if counted:
                cpu[(name, mode)] += server_cpu_ms(pid) - before
                samples[(name, mode)].append(ms)
    return {name: {mode: {**percentiles(samples[(name, mode)]),
                          "server_cpu_ms_per_call": round(cpu[(name, mode)] / len(samples[(name, mode)]), 2)}
                   for mode in modes}
            for name, _ in servers}


def main() -> None:
    # For the servers, which inherit them (here, not at import: a test importing this module keeps its own).
    os.environ["KNOWSPEC_QUERY_VECTORS"] = "0"  # every query embedded
    os.environ.setdefault("KNOWSPEC_FTS_ARRAYS", "sync")  # the full-text arrays read before any timed call
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", action="append", required=True, metavar="NAME[:VAR=VALUE,...]",
                        help="one server and the variables it gets on top of this process's (repeat)")
    parser.add_argument("--modes", default="vector,hybrid", help="doc_search modes, comma separated")
    parser.add_argument("--calls", type=int, default=70, help="queries per round (each asked of every server)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--block", type=int, default=1,
                        help="consecutive queries a server answers before the next takes over (first not counted)")
    ns = parser.parse_args()
    latency_dir = CACHE / "vector-run" / "latency"
    if not (latency_dir / "bench-docs.db").is_file():
        raise SystemExit(f"no latency pool in {latency_dir}: run benchmarks/docpool_vector.py first")
    servers = [parse_server(s) for s in ns.server]
    queries = labelled_query_texts()
    modes = [m for m in ns.modes.split(",") if m]
    load0 = machine_load()
    block = max(1, ns.block)
    if block > 1 and ns.calls < 2:
        raise SystemExit("--block above 1 needs --calls 2 or more: each block's first call is not counted")
    results = anyio.run(compare, reuse_appdir(latency_dir).server_args(), servers, queries, modes, ns.calls, ns.rounds,
                        block)
    load1 = machine_load()
    for name, per_mode in results.items():
        for mode, row in per_mode.items():
            print(f"{name:>12} {mode:<7} p50 {row['p50_ms']:7.2f} ms  p95 {row['p95_ms']:7.2f} ms  "
                  f"server CPU {row['server_cpu_ms_per_call']:6.2f} ms/call", flush=True)
    print(f"load 1m: start {load0['load_1m']}, end {load1['load_1m']}")
    write_results("docpool_vector_ab", {"servers": {name: env for name, env in servers}, "calls": ns.calls,
                                        "rounds": ns.rounds, "block": block, "results": results,
                                        "load_start": load0, "load_end": load1})


if __name__ == "__main__":
    main()
