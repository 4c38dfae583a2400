"""HTTP throughput with 1, 8 and 32 concurrent clients, for `serve --http` with 1 and N workers.

Issue #18 goal 3 ("Every core used"): with 8 clients, calls/s must reach at least 1.6x the
single-client figure for ``search_concepts`` and ``doc_search`` (full text) on the databricks
corpus. The floor is the single-client figure of the same server in the same run, the client counts
taking turns over ``--rounds`` stretches; the load generator shares the machine with the server, so
the ratios of one run are the figures to trust.

Each client is its own MCP streamable-HTTP session (``initialize`` then ``tools/call`` over one
keep-alive connection, bearer token from ``POST /ClientREST/Login``), kept light on purpose (raw
JSON-RPC over ``light_http``'s asyncio client) so the load generator takes as little CPU as it can.
Every answer is parsed and must be a success. The server's CPU (all its processes) is read from
/proc per phase, and the generator's own CPU per call is reported beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx2 as httpx

sys.path.insert(0, str(Path(__file__).parent))

from common import free_port, percentiles, require_bundle, wait_healthy, write_results  # noqa: E402
from docpool_setup import CACHE, DATABRICKS, cached_pool, load_queries, machine_load, make_appdir  # noqa: E402
from light_http import KeepAliveConnection  # noqa: E402

GOAL_RATIO = 1.6       # 8 clients vs 1 client, calls/s
GOAL_CLIENTS = 8
PROTOCOL = "2025-06-18"
ACCEPT = "application/json, text/event-stream"
SEARCH_WORDS = ["delta", "spark", "unity catalog", "table", "streaming", "cluster", "sql warehouse", "notebook",
                "mlflow", "permissions", "job", "pipeline", "schema", "volume", "token", "python", "api",
                "lakehouse", "autoloader", "photon"]
USER, PASSWORD = "bench", "bench-password"


def sse_message(body: bytes) -> dict:
    """The JSON-RPC message of a one-event SSE answer (or a plain JSON body)."""
    text = body.decode("utf-8")
    if text.lstrip().startswith("{"):
        return json.loads(text)
    data = [line[5:].lstrip() for line in text.splitlines() if line.startswith("data:")]
    return json.loads("".join(data))


class Client:
    """One MCP session over one keep-alive connection (raw JSON-RPC: see light_http for why)."""

    def __init__(self, base: str, token: str) -> None:
        host, port = base.removeprefix("http://").rsplit(":", 1)
        self.connection = KeepAliveConnection(host, int(port), {
            "authorization": f"Bearer {token}", "accept": ACCEPT, "content-type": "application/json"})
        self.ids = itertools.count(1)

    async def post(self, message: dict) -> tuple[dict[str, str], bytes]:
        _, headers, body = await self.connection.post("/mcp", json.dumps(message).encode())
        return headers, body

    async def open(self) -> None:
        await self.connection.open()
        headers, _ = await self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        self.connection.headers["mcp-protocol-version"] = PROTOCOL
        if "mcp-session-id" in headers:
            self.connection.headers["mcp-session-id"] = headers["mcp-session-id"]
        await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def call(self, name: str, arguments: dict) -> None:
        _, body = await self.post({"jsonrpc": "2.0", "id": next(self.ids), "method": "tools/call",
                                   "params": {"name": name, "arguments": arguments}})
        message = sse_message(body)
        if "result" not in message or message["result"].get("isError"):
            raise RuntimeError(f"{name} failed: {str(message)[:300]}")

    async def close(self) -> None:
        await self.connection.close()


def process_cpu_seconds(pid: int) -> tuple[float, dict[int, float]]:
    """utime+stime of ``pid`` and every process below it, and the same per child of ``pid``
    (with ``--workers N`` each child is a worker: how the load split between them)."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    times: dict[int, float] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        me = int(stat.parent.name)
        children.setdefault(int(fields[1]), []).append(me)
        times[me] = (int(fields[11]) + int(fields[12])) / tick

    def tree(root: int) -> float:
        total, todo = 0.0, [root]
        while todo:
            current = todo.pop()
            total += times.get(current, 0.0)
            todo.extend(children.get(current, []))
        return total

    return tree(pid), {child: tree(child) for child in children.get(pid, [])}


@dataclass
class Stretch:
    """One timed stretch of calls by a number of clients: what it did and what it cost."""

    samples_ms: list[float]
    wall_s: float
    server_cpu_s: float
    generator_cpu_s: float
    cpu_s_per_child: dict[int, float]


async def stretch(base: str, token: str, clients: int, seconds: float, calls: list[tuple[str, dict]],
                  server_pid: int) -> Stretch:
    """``clients`` fresh sessions calling in a loop for ``seconds``."""
    sessions = [Client(base, token) for _ in range(clients)]
    await asyncio.gather(*(s.open() for s in sessions))
    samples: list[float] = []
    deadline = time.perf_counter() + seconds

    async def loop(index: int, session: Client) -> None:
        for n in itertools.count(index * 7):
            if time.perf_counter() >= deadline:
                return
            name, arguments = calls[n % len(calls)]
            start = time.perf_counter()
            await session.call(name, arguments)
            samples.append((time.perf_counter() - start) * 1000)

    (cpu_before, per_child_before), wall_before = process_cpu_seconds(server_pid), time.perf_counter()
    generator_before = time.process_time()
    await asyncio.gather(*(loop(i, s) for i, s in enumerate(sessions)))
    wall = time.perf_counter() - wall_before
    generator_cpu = time.process_time() - generator_before
    cpu_after, per_child_after = process_cpu_seconds(server_pid)
    await asyncio.gather(*(s.close() for s in sessions))
    return Stretch(samples, wall, cpu_after - cpu_before, generator_cpu,
                   {c: t - per_child_before.get(c, 0.0) for c, t in per_child_after.items()})


def phase_row(clients: int, stretches: list[Stretch]) -> dict:
    """One client count's figures over all its stretches (calls/s = all calls over all their time)."""
    samples = [ms for s in stretches for ms in s.samples_ms]
    calls, wall = len(samples), sum(s.wall_s for s in stretches)
    cpu, generator_cpu = sum(s.server_cpu_s for s in stretches), sum(s.generator_cpu_s for s in stretches)
    per_child: dict[int, float] = {}
    for s in stretches:
        for child, seconds in s.cpu_s_per_child.items():
            per_child[child] = per_child.get(child, 0.0) + seconds
    per_worker = sorted((round(t, 2) for t in per_child.values()), reverse=True)
    return {"clients": clients, "calls": calls, "calls_per_s": round(calls / wall, 1),
            "calls_per_s_per_round": [round(len(s.samples_ms) / s.wall_s, 1) for s in stretches],
            **{k: v for k, v in percentiles(samples).items() if k != "n"},
            "server_cores": round(cpu / wall, 2),
            "cpu_s_per_worker": per_worker if len(per_worker) > 1 else None,
            "server_cpu_ms_per_call": round(cpu * 1000 / calls, 2) if calls else None,
            "generator_cpu_ms_per_call": round(generator_cpu * 1000 / calls, 2) if calls else None}


def login(base: str) -> str:
    answer = httpx.post(f"{base}/ClientREST/Login", json={"user": USER, "password": PASSWORD}, timeout=60)
    answer.raise_for_status()
    return answer.json()["token"]


def start_server(argv: list[str], port: int, log: Path) -> subprocess.Popen:
    with log.open("wb") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
    wait_healthy(f"http://127.0.0.1:{port}", proc, lambda: log.read_text()[-1500:])
    return proc


def serve_help() -> str:
    return subprocess.run([sys.executable, "-m", "knowspec.impl.cli", "serve", "--help"], capture_output=True,
                          text=True).stdout


def supports_workers() -> bool:
    return "--workers" in serve_help()


def uncapped_caller() -> list[str]:
    """One user drives every client here: lift the per-caller caps (spec/security.md) where the
    server has them, so the figure is the server's throughput, not its fairness rule."""
    return ["--requests-per-caller", "100000", "--calls-per-caller", "100000"] \
        if "--calls-per-caller" in serve_help() else []


def measure_server(workers: int, server_args: list[str], bundle: Path, tools: dict[str, list[tuple[str, dict]]],
                   client_counts: list[int], seconds: float, rounds: int, logdir: Path) -> dict:
    port = free_port()
    argv = [sys.executable, "-m", "knowspec.impl.cli", "serve", "--http", f"127.0.0.1:{port}",
            "--bundle-root", str(bundle), *server_args, *uncapped_caller()] + (["--workers", str(workers)]
                                                                              if workers > 1 else [])
    proc = start_server(argv, port, logdir / f"server-{workers}.log")
    base = f"http://127.0.0.1:{port}"
    try:
        token = login(base)

        async def run_all() -> dict:
            out: dict = {}
            for _ in range(3):  # fresh connections each round: every worker builds its indexes before it is timed
                warm = [Client(base, token) for _ in range(max(2, workers * 4))]
                await asyncio.gather(*(c.open() for c in warm))
                for calls in tools.values():
                    await asyncio.gather(*(c.call(*calls[0]) for c in warm))
                await asyncio.gather(*(c.close() for c in warm))
            for tool, calls in tools.items():
                # The client counts take turns, round after round, so a drift of the machine's speed
                # during the run weighs on every count alike instead of on the one timed last.
                stretches: dict[int, list[Stretch]] = {n: [] for n in client_counts}
                for _ in range(rounds):
                    for n in client_counts:
                        stretches[n].append(await stretch(base, token, n, seconds / rounds, calls, proc.pid))
                rows = [phase_row(n, stretches[n]) for n in client_counts]
                single = rows[0]["calls_per_s"]
                for row in rows:
                    row["ratio_vs_1_client"] = round(row["calls_per_s"] / single, 2) if single else None
                    print(f"workers={workers} {tool} clients={row['clients']}: {row['calls_per_s']} calls/s "
                          f"p95 {row['p95_ms']} ms x{row['ratio_vs_1_client']} cores {row['server_cores']} "
                          f"per worker {row['cpu_s_per_worker']} generator {row['generator_cpu_ms_per_call']} ms/call",
                          file=sys.stderr, flush=True)
                out[tool] = rows
            return out

        return asyncio.run(run_all())
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, default=None,
                        help="OKF bundle (default: $KNOWSPEC_CORPUS_DIR/databricks-okf)")
    parser.add_argument("--clients", default="1,8,32", help="client counts, the first is the floor")
    parser.add_argument("--workers", default="1,2", help="server worker counts to measure in this run")
    parser.add_argument("--seconds", type=float, default=6.0, help="timed seconds per client count and tool")
    parser.add_argument("--rounds", type=int, default=3,
                        help="the seconds are split into this many turns, the client counts alternating")
    parser.add_argument("--out", default="http_throughput", help="results name (benchmarks/results/NAME.json)")
    ns = parser.parse_args()
    load_start = machine_load()
    bundle = require_bundle(ns.bundle)
    source, _ = cached_pool("databricks", DATABRICKS, "databricks")
    app = make_appdir(CACHE / "http-run", {"databricks": source})
    from knowspec.impl.docpool import auth

    auth.create_user(app.settings.catalog_path, USER, PASSWORD, ["READER"])
    labelled = [q["query"] for q in load_queries("databricks")["queries"]]
    tools = {
        "search_concepts": [("search_concepts", {"bundle_path": str(bundle), "query": q}) for q in SEARCH_WORDS],
        "doc_search_fts": [("doc_search", {"query": q, "collection": "databricks", "mode": "fts"})
                           for q in labelled + SEARCH_WORDS],
    }
    client_counts = [int(x) for x in ns.clients.split(",")]
    has_workers = supports_workers()
    runs: dict = {}
    with tempfile.TemporaryDirectory(prefix="ks-http-bench-") as logdir:
        for workers in (int(x) for x in ns.workers.split(",")):
            if workers > 1 and not has_workers:
                runs[f"workers_{workers}"] = "unsupported: this build has no serve --workers"
                continue
            runs[f"workers_{workers}"] = measure_server(workers, app.server_args(), bundle, tools, client_counts,
                                                        ns.seconds, ns.rounds, Path(logdir))
    verdicts = {}
    for name, rows in runs.items():
        if isinstance(rows, str):
            continue
        for tool, tool_rows in rows.items():
            at_goal = next((r for r in tool_rows if r["clients"] == GOAL_CLIENTS), None)
            if at_goal is not None:
                verdicts[f"{name}.{tool}"] = {"floor_calls_per_s_1_client": tool_rows[0]["calls_per_s"],
                                              "calls_per_s_8_clients": at_goal["calls_per_s"],
                                              "ratio": at_goal["ratio_vs_1_client"], "bound": GOAL_RATIO,
                                              "ratio_per_round": [
                                                  round(many / one, 2) if one else None for many, one in
                                                  zip(at_goal["calls_per_s_per_round"],
                                                      tool_rows[0]["calls_per_s_per_round"])],
                                              "pass": bool(at_goal["ratio_vs_1_client"] and
                                                           at_goal["ratio_vs_1_client"] >= GOAL_RATIO)}
    write_results(ns.out, {"corpus": DATABRICKS.name, "cpus": os.cpu_count(), "seconds_per_phase": ns.seconds,
                           "rounds": ns.rounds,
                           "runs": runs, "goal": verdicts,
                           "machine_load_start": load_start, "machine_load_end": machine_load()})


if __name__ == "__main__":
    main()
