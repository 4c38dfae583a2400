"""Big answers cheap (issue #18 goal 4): a warm list_concepts against a plain json.dumps of its result.

Run: .venv/bin/knowspec bench big-answers [--bundle DIR] [--calls N] [--tool get_semantic_graph]
(default bundle: $KNOWSPEC_CORPUS_DIR/databricks-okf). Writes benchmarks/results/big_answers.json
(with ``--tool``: big_answers.<tool>.json, the same measure of another big answer; the goal's
bound is list_concepts').

One run measures, against the same server build:
- the floor: ``json.dumps`` (compact, non-ASCII kept) of the answer's ``structuredContent`` dict,
  timed in THIS (the benchmark's) process on the dict it received, once after each warm call
  (median reported);
- the figure: a warm ``list_concepts`` call, median of ``--calls``, timed by a raw client from the
  request's first byte sent to the answer's last byte read (no client-side JSON parsing or model
  validation in the timing), over stdio, over HTTP on a 2025-era session and over HTTP on the
  2026-07-28 (modern) protocol;
- their ratio against the goal's bound (3), and ``os.getloadavg()`` at start and end.
The machine may be shared: the ratios, floor and figure measured in the same run, are the numbers
to compare between runs.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from common import free_port, require_bundle, wait_healthy, write_results  # noqa: E402

BOUND = 3.0
GOAL_TOOL = "list_concepts"  # the goal bounds this answer alone; others are measured the same way
SERVER = [sys.executable, "-m", "knowspec.impl.cli", "serve"]
MODERN = "2026-07-28"
LEGACY = "2025-06-18"
CLIENT = {"name": "big-answers", "version": "1"}


def floor_seconds(structured: dict[str, Any]) -> float:
    """One plain ``json.dumps`` of the answer's structured content."""
    start = time.perf_counter()
    json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
    return time.perf_counter() - start


def _call(tool: str, request_id: int, bundle: Path, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": {"bundle_path": str(bundle)}}
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


# ---- stdio ------------------------------------------------------------------------------------

class StdioClient:
    """A bare JSON-lines client: one request written, one answer line read."""

    def __init__(self, appdir: str):
        self.proc = subprocess.Popen([*SERVER, "--stdio", "--appdir", appdir], stdin=subprocess.PIPE, bufsize=1 << 20,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env={**os.environ})
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": CLIENT}})
        self.proc.stdout.readline()
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def timed(self, message: dict[str, Any]) -> tuple[float, bytes]:
        start = time.perf_counter()
        self.send(message)
        line = self.proc.stdout.readline()
        return time.perf_counter() - start, line

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(30)


# ---- HTTP -------------------------------------------------------------------------------------

def _body_json(content_type: str, body: bytes) -> bytes:
    """The JSON-RPC message in a response body (plain JSON or one SSE ``message`` event)."""
    if content_type.startswith("text/event-stream"):
        return body.split(b"data: ", 1)[1].split(b"\r\n", 1)[0]
    return body


class HttpClient:
    """A bare client on one keep-alive connection, on a 2025-era session or the modern protocol."""

    HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

    def __init__(self, port: int, era: str, tool: str):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        self.era = era
        self.headers = dict(self.HEADERS)
        if era == "modern":
            self.headers.update({"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": tool})
            return
        status, headers, _ = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": CLIENT}})
        self.headers["Mcp-Session-Id"] = headers["mcp-session-id"]
        self.headers["MCP-Protocol-Version"] = LEGACY
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def meta(self) -> dict[str, Any] | None:
        if self.era != "modern":
            return None
        return {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientInfo": CLIENT,
                "io.modelcontextprotocol/clientCapabilities": {}}

    def post(self, message: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        self.conn.request("POST", "/mcp", body=json.dumps(message), headers=self.headers)
        response = self.conn.getresponse()
        body = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, body

    def timed(self, message: dict[str, Any]) -> tuple[float, bytes]:
        start = time.perf_counter()
        _, headers, body = self.post(message)
        elapsed = time.perf_counter() - start
        return elapsed, _body_json(headers.get("content-type", ""), body)


# ---- one leg: cold call, warm calls, floor ----------------------------------------------------

def leg(client: Any, tool: str, bundle: Path, calls: int, meta: dict[str, Any] | None) -> dict[str, Any]:
    bounded = tool == GOAL_TOOL
    cold, line = client.timed(_call(tool, 1, bundle, meta))
    message = json.loads(line)
    result = message.get("result") or {}
    structured = result.get("structuredContent")
    if result.get("isError") or not isinstance(structured, dict):
        raise SystemExit(f"{tool} failed: {line[:400]!r}")
    warm, floors = [], []
    for i in range(calls):  # alternated, so that both see the same load on a shared machine
        warm.append(client.timed(_call(tool, 2 + i, bundle, meta))[0])
        floors.append(floor_seconds(structured))
    floor = statistics.median(floors)
    figure = statistics.median(warm)
    return {
        "concepts": len(structured.get("concepts", [])) if bounded else None,
        "answer_bytes": len(line),
        "cold_s": round(cold, 3),
        "warm_s": [round(t, 4) for t in warm],
        "floors_s": [round(t, 4) for t in floors],
        "floor_s": round(floor, 6),
        "figure_s": round(figure, 6),
        "ratio": round(figure / floor, 2),
        "bound": BOUND if bounded else None,
        "passes": figure / floor <= BOUND if bounded else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bundle", type=Path, default=None,
                        help="OKF bundle (default: $KNOWSPEC_CORPUS_DIR/databricks-okf)")
    parser.add_argument("--calls", type=int, default=7, help="warm calls per transport (median reported)")
    parser.add_argument("--tool", choices=(GOAL_TOOL, "get_semantic_graph"), default=GOAL_TOOL,
                        help="the big answer measured (default list_concepts, the goal's)")
    args = parser.parse_args(argv)
    tool = args.tool
    bundle = require_bundle(args.bundle)
    out: dict[str, Any] = {"bundle": bundle.name, "floor_measured_in": "benchmark process, on the received dict, median, alternated with the calls",
                           "figure": f"warm {tool}, request sent to last answer byte read, median",
                           "load_start": os.getloadavg()}
    with tempfile.TemporaryDirectory() as appdir:
        client = StdioClient(appdir)
        try:
            out["stdio"] = leg(client, tool, bundle, args.calls, None)
        finally:
            client.close()
        port = free_port()
        proc = subprocess.Popen([*SERVER, "--http", f"127.0.0.1:{port}", "--appdir", appdir, "--allow-anonymous",
                                 "--bundle-root", str(bundle)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env={**os.environ})
        try:
            wait_healthy(f"http://127.0.0.1:{port}", proc)
            for era in ("legacy", "modern"):
                client = HttpClient(port, era, tool)
                out[f"http_{era}"] = leg(client, tool, bundle, args.calls, client.meta())
        finally:
            proc.terminate()
            proc.wait(30)
    out["load_end"] = os.getloadavg()
    legs = [out[k] for k in ("stdio", "http_legacy", "http_modern")]
    out["passes"] = all(r["passes"] for r in legs) if tool == GOAL_TOOL else None
    for key, r in zip(("stdio", "http_legacy", "http_modern"), legs):
        verdict = f"bound {BOUND}: {'pass' if r['passes'] else 'FAIL'}" if r["bound"] else "no bound"
        print(f"{key:12} floor {r['floor_s'] * 1000:7.1f} ms  warm {r['figure_s'] * 1000:7.1f} ms  "
              f"ratio {r['ratio']:5.2f} ({verdict})")
    print(f"load average: start {out['load_start']}, end {out['load_end']}")
    write_results("big_answers" if tool == GOAL_TOOL else f"big_answers.{tool}", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
