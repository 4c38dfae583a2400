"""Fuzz the real server with generated calls over stdio and HTTP; count what must never happen.

`knowspec bench fuzz-calls --calls 100000` (or `python benchmarks/fuzz_calls.py ...`) starts one
server over stdio and one over HTTP on a scratch copy of the OKF sample bundle and the demo
pools, then sends generated lines: valid calls, calls with mutated arguments (wrong types,
unknown fields, over-long and hostile strings, NUL and lone surrogates, deep nesting, huge mixed
arrays, hostile bundle paths such as /proc) and, over stdio, lines that are not one message
(malformed JSON, batches, non-UTF-8). Over HTTP half the client threads hold a 2025-06-18
session and half speak the 2026-07-28 protocol (no handshake; the envelope rides in every
request), so both answer paths are judged. It reports, per transport and overall:

- ``unanswered``: request lines with no reply (an id answered twice counts as ``duplicates``);
- ``output_schema_failures``: successes whose structuredContent breaks the tool's outputSchema,
  and errors whose envelope breaks the error schema or uses an unknown code;
- ``generic_codes``: handler exceptions the server turned into the generic operation_rejected
  (counted from the server's "failed unexpectedly" log lines, and from bare generic envelopes);
- server RSS after warm-up and at the end.

Results go to benchmarks/results/fuzz-calls.json. Exit 1 when any counter that must be zero
is not, or RSS grew past ``--max-rss-growth-mib``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import jsonschema_rs

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import free_port, wait_healthy, write_results  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SERVER = [sys.executable, "-m", "knowspec.impl.cli"]
INIT = {"jsonrpc": "2.0", "id": "init", "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
MODERN = "2026-07-28"  # no handshake: every request carries its protocol envelope in params._meta
MODERN_META = {"io.modelcontextprotocol/protocolVersion": MODERN,
               "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "1"},
               "io.modelcontextprotocol/clientCapabilities": {}}
UNEXPECTED = b"failed unexpectedly"
FUZZ_USER, FUZZ_PASSWORD = "fuzz", "fuzz-password"


# ---------------------------------------------------------------- generation

HOSTILE_STRINGS = ["", " ", "\x00", "a\x00b", "\ud800", "x\udfffy", "../../etc/passwd", "/etc/passwd", "C:\\x",
                   "file:///etc", "%2e%2e/", "\u202e", "😀" * 50, "\n\r\t", "{}", "[", "*", "'", '"', "\\",
                   "index", "a/b/../c", "a//b", "-1", "NaN", "x" * 5000]
HOSTILE_PATHS = ["/proc", "/proc/1", "/proc/self", "/sys/kernel", "/dev", "/", "/tmp/a\x00b", "relative/kb",
                 "/nonexistent/kb", " /tmp", "/tmp/", "/tmp/../etc", "/tmp\ud800", "/" + "é" * 300, "/etc/passwd"]


def _deep(depth: int) -> Any:
    value: Any = 0
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


class Generator:
    """Arguments for one tool call: mostly valid-shaped, often mutated."""

    def __init__(self, contract: dict[str, Any], fill: dict[str, Any], rng: random.Random):
        self.tools = contract["tools"]
        self.fill = fill
        self.rng = rng

    def _value(self, prop: dict[str, Any]) -> Any:
        rng = self.rng
        if "enum" in prop:
            return rng.choice(prop["enum"])
        if "const" in prop:
            return prop["const"]
        for key in ("anyOf", "oneOf"):
            if key in prop:
                return self._value(rng.choice(prop[key]))
        kind = prop.get("type")
        if isinstance(kind, list):
            kind = rng.choice(kind)
        if kind == "integer":
            lo, hi = prop.get("minimum", 0), prop.get("maximum", 1000)
            return rng.randint(lo, hi)
        if kind == "number":
            return rng.uniform(prop.get("minimum", 0), prop.get("maximum", 1000))
        if kind == "boolean":
            return rng.random() < 0.5
        if kind == "null":
            return None
        if kind == "array":
            return [self._value(prop.get("items", {})) for _ in range(rng.randint(prop.get("minItems", 0), 3))]
        if kind == "object":
            return {}
        return rng.choice(["revenue", "orders", "fatura", "stok", "metric", "a", "tables/orders", "x y"])

    def valid(self, tool: dict[str, Any]) -> dict[str, Any]:
        props = tool["input_schema"].get("properties", {})
        required = tool["input_schema"].get("required", [])
        args = {}
        for name, prop in props.items():
            if name in required or self.rng.random() < 0.4:
                args[name] = self.fill.get(name, self._value(prop)) if self.rng.random() < 0.7 else self._value(prop)
        return args

    def mutated(self, tool: dict[str, Any]) -> dict[str, Any]:
        rng = self.rng
        args = self.valid(tool)
        props = list(tool["input_schema"].get("properties", {})) or ["x"]
        name = rng.choice(props)
        kind = rng.randrange(10)
        if kind == 0:
            args.pop(name, None)
        elif kind == 1:
            args["unknown_field_" + str(rng.randrange(9))] = rng.choice([1, "x", None, []])
        elif kind == 2:
            args[name] = rng.choice([None, True, 1, -1, 2**70, 1.5, "5", [], {}, [1, "1"], {"a": 1}])
        elif kind == 3:
            args[name] = rng.choice(HOSTILE_STRINGS)
        elif kind == 4:
            args[name] = "q" * rng.choice([511, 512, 513, 4096, 4097, 70000])
        elif kind == 5:
            args[name] = _deep(rng.choice([10, 63, 64, 65, 100, 198, 199, 300]))
        elif kind == 6:
            args[name] = [i if i % 2 else str(i) for i in range(rng.choice([50, 2000, 12000]))]
        elif kind == 7:
            args["bundle_path"] = rng.choice(HOSTILE_PATHS)
        elif kind == 8:
            args[name] = rng.choice([0, -1, 101, 10**9, 0.5])
        else:
            args = rng.choice([{}, {"bundle_path": self.fill["bundle_path"]}])
        return args

    def call(self, request_id: int, http: bool) -> tuple[str, str, bool]:
        """(tool name or "", one JSON line, whether the reply carries ``request_id``)."""
        rng = self.rng
        tool = rng.choice(self.tools)
        roll = rng.random()
        if not http and roll < 0.04:
            line, carries_id = rng.choice(_bad_lines(request_id))
            return "", line, carries_id
        args = self.valid(tool) if roll < 0.45 else self.mutated(tool)
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": tool["name"], "arguments": args}}
        return tool["name"], json.dumps(message, ensure_ascii=True), True


def _bad_lines(request_id: int) -> list[tuple[str, bool]]:
    """Lines that are not one well-formed call, and whether their reply can carry the id."""
    return [
        ("{not json", False),
        (f'[{{"jsonrpc":"2.0","id":{request_id},"method":"ping"}}]', False),
        ("42", False),
        ('{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}', False),
        (f'{{"jsonrpc":"2.0","id":{request_id}}}', True),
        ('{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"list_concepts","arguments":{"bundle_path":%s}}}'
         % (request_id, "[" * 3000 + "]" * 3000), False),
        ('{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"search_concepts","arguments":{"bundle_path":"/tmp","query":"\\udc00"}}}'
         % request_id, True),
        ('{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"search_concepts","arguments":[]}}' % request_id, True),
    ]


# ---------------------------------------------------------------- judging

class Judge:
    def __init__(self, contract: dict[str, Any]):
        self.success = {t["name"]: jsonschema_rs.Draft202012Validator(t["success_schema"]) for t in contract["tools"]}
        self.error = jsonschema_rs.Draft202012Validator(contract["error_schema"])
        self.codes = set(contract["error_codes"])
        self.counts: dict[str, int] = {"answered": 0, "output_schema_failures": 0, "generic_envelopes": 0,
                                       "jsonrpc_errors": 0, "is_error": 0, "success": 0}
        self.examples: list[str] = []

    def _example(self, text: str) -> None:
        if len(self.examples) < 20:
            self.examples.append(text[:400])

    def judge(self, tool: str, answer: dict[str, Any]) -> None:
        self.counts["answered"] += 1
        if "error" in answer:
            self.counts["jsonrpc_errors"] += 1
            return
        result = answer.get("result") or {}
        payload = result.get("structuredContent")
        if not tool:
            return
        if result.get("isError"):
            self.counts["is_error"] += 1
            if not isinstance(payload, dict) or not self.error.is_valid(payload) or payload.get("code") not in self.codes:
                self.counts["output_schema_failures"] += 1
                self._example(f"bad error envelope from {tool}: {json.dumps(payload)}")
            elif (payload["code"] == "operation_rejected" and not payload["diagnostics"]
                  and payload["message"] == "tool operation was rejected"):
                self.counts["generic_envelopes"] += 1
                self._example(f"generic envelope from {tool}")
        else:
            self.counts["success"] += 1
            if not isinstance(payload, dict) or not self.success[tool].is_valid(payload):
                self.counts["output_schema_failures"] += 1
                self._example(f"output breaks {tool}'s schema: {json.dumps(payload)[:300]}")


# ---------------------------------------------------------------- transports

def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _answers(stream) -> Iterator[dict[str, Any]]:
    for raw in stream:
        try:
            yield json.loads(raw)
        except ValueError:
            yield {"unparseable": raw[:200].decode("utf-8", "replace")}


def run_stdio(gen: Generator, judge: Judge, calls: int, server_args: list[str], window: int) -> dict[str, Any]:
    """Pipelined over one stdio session; ``window`` calls in flight."""
    stderr = tempfile.TemporaryFile()
    proc = subprocess.Popen([*SERVER, "serve", "--stdio", *server_args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=stderr)
    sent: dict[Any, str] = {}
    answered: dict[Any, int] = {}
    nulls = {"expected": 0, "got": 0}
    slots = threading.Semaphore(window)
    unparseable = [0]

    def read() -> None:
        for answer in _answers(proc.stdout):
            if "unparseable" in answer:
                unparseable[0] += 1
                continue
            rid = answer.get("id")
            if rid is None:
                nulls["got"] += 1
                slots.release()
                continue
            answered[rid] = answered.get(rid, 0) + 1
            if rid in sent:
                judge.judge(sent[rid], answer)
                slots.release()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    proc.stdin.write((json.dumps(INIT) + "\n" + json.dumps(INITIALIZED) + "\n").encode())
    proc.stdin.flush()
    warm_rss = None
    started = time.perf_counter()
    for i in range(calls):
        if i == min(1000, calls // 10):
            warm_rss = rss_mib(proc.pid)
        tool, line, carries_id = gen.call(i, http=False)
        slots.acquire()
        if carries_id:
            sent[i] = tool
        else:
            nulls["expected"] += 1
        try:
            proc.stdin.write(line.encode("utf-8", "surrogatepass") + b"\n")
            proc.stdin.flush()
        except BrokenPipeError:
            break
    end_rss = rss_mib(proc.pid) if proc.poll() is None else None
    proc.stdin.close()  # end of input: every call in flight must still be answered
    proc.wait(600)
    reader.join(60)
    elapsed = time.perf_counter() - started
    stderr.seek(0)
    log = stderr.read()
    return {
        "calls": calls, "seconds": round(elapsed, 1), "calls_per_second": round(calls / elapsed, 1),
        "unanswered": sum(1 for rid in sent if rid not in answered) + max(0, nulls["expected"] - nulls["got"]),
        "duplicates": sum(1 for n in answered.values() if n > 1), "unparseable_replies": unparseable[0],
        "handler_exceptions_logged": log.count(UNEXPECTED), "exit_code": proc.returncode,
        "rss_mib_after_warmup": warm_rss, "rss_mib_end": end_rss,
    }


def _login(port: int) -> str:
    """A session token for the fuzz WRITER made by ``_scratch``."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", "/ClientREST/Login", body=json.dumps({"user": FUZZ_USER, "password": FUZZ_PASSWORD}),
                 headers={"Content-Type": "application/json"})
    token = json.loads(conn.getresponse().read())["token"]
    conn.close()
    return token


def _sse_or_json(content_type: str, body: bytes) -> list[dict[str, Any]]:
    if content_type.startswith("application/json"):
        value = json.loads(body)
        return value if isinstance(value, list) else [value]
    out = []
    for line in body.decode("utf-8").splitlines():
        if line.startswith("data:") and line[5:].strip():
            out.append(json.loads(line[5:]))
    return out


class _Poster:
    """One keep-alive connection to /mcp."""

    def __init__(self, port: int):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)

    def post(self, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        for attempt in (0, 1):
            try:
                self.conn.request("POST", "/mcp", body=body, headers=headers)
                response = self.conn.getresponse()
                return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
                if attempt:
                    raise
        raise AssertionError("unreachable")


def _modern_request(line: str) -> tuple[bytes, dict[str, str]]:
    """A generated line as a 2026-07-28 request: the envelope added to any params object, and the
    routing headers the body names (a line that is not a JSON object goes as it is)."""
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call"}
    try:
        message = json.loads(line)
    except ValueError:
        return line.encode("utf-8", "surrogatepass"), headers
    if not isinstance(message, dict):
        return line.encode("utf-8", "surrogatepass"), headers
    params = message.get("params")
    if isinstance(params, dict):
        meta = params.get("_meta")
        params["_meta"] = {**MODERN_META, **(meta if isinstance(meta, dict) else {})}
        name = params.get("name")
        if isinstance(name, str) and name.isascii() and name.isprintable():
            headers["Mcp-Name"] = name
    method = message.get("method")
    if isinstance(method, str) and method.isascii() and method.isprintable():
        headers["Mcp-Method"] = method
    return json.dumps(message).encode(), headers


def run_http(gen: Generator, judge: Judge, calls: int, server_args: list[str], workers: int) -> dict[str, Any]:
    """Half the client threads hold a 2025-06-18 session, the other half speak 2026-07-28."""
    port = free_port()
    stderr = tempfile.TemporaryFile()
    proc = subprocess.Popen([*SERVER, "serve", "--http", f"127.0.0.1:{port}", *server_args],
                            stdout=subprocess.DEVNULL, stderr=stderr)
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    wait_healthy(f"http://127.0.0.1:{port}", proc)
    headers["Authorization"] = f"Bearer {_login(port)}"  # /mcp needs a session (spec/security.md)
    counters: dict[str, Any] = {"unanswered": 0, "http_errors": 0, "null_id_errors": 0,
                                "calls_by_era": {"2025-06-18": 0, MODERN: 0}}
    lock = threading.Lock()
    next_id = iter(range(calls))
    warm = {"rss": None}
    started = time.perf_counter()

    def worker(modern: bool) -> None:
        client = _Poster(port)
        session: dict[str, str] = {}
        if not modern:
            _, init_headers, _ = client.post(json.dumps(INIT).encode(), headers)
            session = {"Mcp-Session-Id": init_headers["mcp-session-id"]} if "mcp-session-id" in init_headers else {}
            client.post(json.dumps(INITIALIZED).encode(), {**headers, **session})
        era = MODERN if modern else "2025-06-18"
        if True:
            while True:
                with lock:
                    i = next(next_id, None)
                    if i is None:
                        return
                    tool, line, _ = gen.call(i, http=True)
                    counters["calls_by_era"][era] += 1
                    if i == min(1000, calls // 10):
                        warm["rss"] = rss_mib(proc.pid)
                status = 0
                try:
                    if modern:
                        body_bytes, envelope = _modern_request(line)
                        status, reply_headers, body = client.post(body_bytes, {**headers, **envelope})
                    else:
                        status, reply_headers, body = client.post(line.encode("utf-8"), {**headers, **session})
                    replies = _sse_or_json(reply_headers.get("content-type", ""), body)
                    answers = [a for a in replies if a.get("id") == i]
                    if not answers and len(replies) == 1 and replies[0].get("id") is None and "error" in replies[0]:
                        # The HTTP transport could not read the body as a message: one reply, id null.
                        with lock:
                            counters["null_id_errors"] += 1
                            codes = counters.setdefault("null_id_error_codes", {})
                            code = str(replies[0]["error"].get("code"))
                            codes[code] = codes.get(code, 0) + 1
                        answers = replies
                except (http.client.HTTPException, OSError, ValueError):
                    answers = []
                with lock:
                    if not answers:
                        counters["unanswered"] += 1
                        judge._example(f"http {status} without an answer: {line[:200]}")
                        if status >= 400:
                            counters["http_errors"] += 1
                    else:
                        judge.judge(tool, answers[0])

    threads = [threading.Thread(target=worker, args=(k % 2 == 1,)) for k in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    end_rss = rss_mib(proc.pid)
    proc.terminate()
    proc.wait(30)
    stderr.seek(0)
    return {"calls": calls, "seconds": round(elapsed, 1), "calls_per_second": round(calls / elapsed, 1),
            **counters, "handler_exceptions_logged": stderr.read().count(UNEXPECTED),
            "rss_mib_after_warmup": warm["rss"], "rss_mib_end": end_rss}


# ---------------------------------------------------------------- main

def _scratch(tmp: Path) -> tuple[list[str], dict[str, Any]]:
    from knowspec.impl.config import Settings
    from knowspec.impl.demo import EXAMPLES, prepare
    from knowspec.impl.docpool import auth

    bundle = tmp / "bundle"
    shutil.copytree(EXAMPLES / "okf-sample", bundle)
    settings = Settings(appdir=tmp / "appdir")
    prepare(settings)
    auth.create_user(settings.catalog_path, FUZZ_USER, FUZZ_PASSWORD, ["WRITER"])
    # Over HTTP, OKF tools serve only under --bundle-root; stdio ignores it.
    args = ["--appdir", str(settings.appdir), "--database", str(settings.default_database), "--bundle-root", str(tmp)]
    fill = {"bundle_path": str(bundle), "concept_id": "tables/orders", "database": settings.default_database,
            "query": "revenue"}
    return args, fill


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000, help="total generated calls (both transports)")
    parser.add_argument("--http-share", type=float, default=0.3, help="share of calls sent over HTTP")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--window", type=int, default=8, help="stdio calls in flight")
    parser.add_argument("--http-workers", type=int, default=4)
    parser.add_argument("--max-rss-growth-mib", type=float, default=200.0)
    args = parser.parse_args(argv)

    contract = json.loads((REPO / "generated" / "contract.json").read_text())
    with tempfile.TemporaryDirectory(prefix="knowspec-fuzz-") as tmp:
        server_args, fill = _scratch(Path(tmp))
        http_calls = int(args.calls * args.http_share)
        judge = Judge(contract)
        stdio = run_stdio(Generator(contract, fill, random.Random(args.seed)), judge, args.calls - http_calls,
                          server_args, args.window)
        http = run_http(Generator(contract, fill, random.Random(args.seed + 1)), judge, http_calls,
                        server_args, args.http_workers) if http_calls else {}
    growth = [t["rss_mib_end"] - t["rss_mib_after_warmup"] for t in (stdio, http)
              if t and t.get("rss_mib_end") is not None and t.get("rss_mib_after_warmup") is not None]
    totals = {
        "unanswered": stdio["unanswered"] + http.get("unanswered", 0),
        "output_schema_failures": judge.counts["output_schema_failures"],
        "generic_codes": judge.counts["generic_envelopes"] + stdio["handler_exceptions_logged"]
        + http.get("handler_exceptions_logged", 0),
        "max_rss_growth_mib": round(max(growth), 1) if growth else None,
    }
    ok = (totals["unanswered"] == 0 and totals["output_schema_failures"] == 0 and totals["generic_codes"] == 0
          and stdio["duplicates"] == 0 and (totals["max_rss_growth_mib"] or 0) <= args.max_rss_growth_mib)
    write_results("fuzz-calls", {"command": " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]),
                                 "seed": args.seed, "ok": ok, "totals": totals, "stdio": stdio, "http": http,
                                 "answers": judge.counts, "examples": judge.examples})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
