"""Where one vector doc_search call's wall time goes through the stdio server, stamp by stamp.

Run: .venv/bin/python benchmarks/vector_call_timeline.py [--calls 60] [--mode vector]
[--server-env NAME=VALUE ...]. Needs the latency pool ``benchmarks/docpool_vector.py`` built
(``$KNOWSPEC_BENCH_CACHE/vector-run/latency``). Writes benchmarks/results/vector_call_timeline.json.

The server runs with probes (this file, ``--probe-server``) that stamp each call with
``time.perf_counter_ns`` (CLOCK_MONOTONIC on Linux: one clock for both processes) at: the
request's bytes read from the pipe, its message handed to the SDK, the SDK's dispatch into the
pipeline, the worker thread's start, the handler's start and end (with the query embedding and
the ranking inside it), the answer parked (encoded), the worker's result back on the event loop,
the SDK's placeholder reaching the transport's writer, and its bytes written. The client stamps
the request's send and the answer's return. Each segment's p50 is printed in wall order, with
the client's and the server's CPU per call (the client shares the 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

STAMPS_ENV = "KNOWSPEC_TIMELINE_STAMPS"

# Segments, in wall order: (name, from stamp, to stamp).
SEGMENTS = (
    ("client send -> server read", "client_send", "read"),
    ("read -> SDK dispatch (decode, SDK session)", "read", "dispatch"),
    ("dispatch -> worker thread starts (hop)", "dispatch", "thread_start"),
    ("thread start -> handler start (walk, input validation)", "thread_start", "handler_start"),
    ("handler: query embedding", "embed_start", "embed_end"),
    ("handler: ranking", "rank_start", "rank_end"),
    ("handler: rest", None, None),
    ("handler end -> output validated", "handler_end", "success_start"),
    ("envelope (text content, result model)", "success_start", "success_end"),
    ("heap trimmer's check", "trim_start", "trim_end"),
    ("answer encoded and parked", "park_start", "parked"),
    ("parked -> back on the loop (hop back)", "parked", "loop_back"),
    ("loop -> writer has the placeholder (SDK response)", "loop_back", "writer"),
    ("writer -> bytes written (splice, write)", "writer", "written"),
    ("written -> client has the result (client read, parse, validate)", "written", "client_done"),
)


# -- the server side ---------------------------------------------------------------------------

def install_probes(out: Path) -> None:
    """Wrap the transport, SDK seam, pipeline and handler parts with stamps; one JSON line per call."""
    from knowspec.impl.docpool.vectors import embedder as embedding, scoring
    from knowspec.impl.server import native_memory, parked_answers, pipeline, stdio_transport

    sink = out.open("a", buffering=1)
    stamps: dict[str, int] = {}
    now = time.perf_counter_ns

    def stamp(name: str) -> None:
        stamps.setdefault(name, now())

    loop_reads = stdio_transport._loop_reads

    def probed_reads(fd):
        read = loop_reads(fd)

        async def wrapped():
            data = await read()
            if b'"tools/call"' in data:
                stamps.clear()
                stamps["read"] = now()
                stamps["cpu_read"] = time.process_time_ns()
            return data
        return wrapped
    stdio_transport._loop_reads = probed_reads

    call = pipeline.ToolRuntime.call

    async def probed_call(self, *a, **k):
        stamp("dispatch")
        try:
            return await call(self, *a, **k)
        finally:
            stamp("loop_back")
    pipeline.ToolRuntime.call = probed_call

    call_sync = pipeline.ToolRuntime._call_sync

    def probed_call_sync(self, *a, **k):
        stamp("thread_start")
        return call_sync(self, *a, **k)
    pipeline.ToolRuntime._call_sync = probed_call_sync

    run = pipeline.ToolRuntime._run

    def probed_run(self, entry, arguments, ctx, walked):
        handler = self.handlers.get(entry.name)

        def timed_handler(args, c):
            stamp("handler_start")
            try:
                return handler(args, c)
            finally:
                stamp("handler_end")
        saved = self.handlers[entry.name]
        self.handlers[entry.name] = timed_handler
        try:
            return run(self, entry, arguments, ctx, walked)
        finally:
            self.handlers[entry.name] = saved
    pipeline.ToolRuntime._run = probed_run

    def around(module, attr: str, start: str, end: str) -> None:
        fn = getattr(module, attr)

        def wrapped(*a, **k):
            stamp(start)
            try:
                return fn(*a, **k)
            finally:
                stamp(end)
        setattr(module, attr, wrapped)
    around(embedding, "query_vector", "embed_start", "embed_end")
    around(scoring, "vector_rank", "rank_start", "rank_end")
    around(parked_answers.ParkedAnswers, "park", "park_start", "parked")
    around(pipeline.ToolRuntime, "_success", "success_start", "success_end")
    around(native_memory.HeapTrimmer, "after_call", "trim_start", "trim_end")

    is_placeholder = stdio_transport.is_placeholder

    def probed_is_placeholder(message):
        stamp("writer")
        return is_placeholder(message)
    stdio_transport.is_placeholder = probed_is_placeholder

    loop_writes = stdio_transport._loop_writes

    def probed_writes(fd):
        write = loop_writes(fd)

        async def wrapped(pieces):
            await write(pieces)
            if "writer" in stamps and "written" not in stamps:
                stamps["written"] = now()
                stamps["cpu_written"] = time.process_time_ns()
                sink.write(json.dumps(stamps) + "\n")
        return wrapped
    stdio_transport._loop_writes = probed_writes


def probe_server(argv: list[str]) -> int:
    if os.environ.get("KNOWSPEC_TIMELINE_SWITCH_INTERVAL"):
        sys.setswitchinterval(float(os.environ["KNOWSPEC_TIMELINE_SWITCH_INTERVAL"]))
    install_probes(Path(os.environ[STAMPS_ENV]))
    from knowspec.impl.cli import main as cli_main

    return cli_main(argv)


# -- the client side ---------------------------------------------------------------------------

async def timeline(server_args: list[str], env: dict[str, str], queries: list[str], mode: str, calls: int) -> dict:
    from contextlib import AsyncExitStack

    from mcp import ClientSession, StdioServerParameters, stdio_client

    from common import call

    params = StdioServerParameters(command=sys.executable, args=[__file__, "--probe-server", "serve", "--stdio", *server_args],
                                   env={**os.environ, **env})
    rows: list[dict[str, float]] = []
    client_cpu: list[float] = []
    async with AsyncExitStack() as stack:
        read, write = await stack.enter_async_context(stdio_client(params))
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        for query in queries[:3]:  # warm: vectors loaded, embedder made
            await call(session, "doc_search", {"query": query, "mode": mode})
        stamps_file = Path(env[STAMPS_ENV])
        stamps_file.write_text("")
        sent: list[tuple[int, int]] = []
        for i in range(calls):
            c0 = time.process_time_ns()
            t0 = time.perf_counter_ns()
            result = await call(session, "doc_search", {"query": queries[i % len(queries)], "mode": mode})
            t1 = time.perf_counter_ns()
            client_cpu.append((time.process_time_ns() - c0) / 1e6)
            assert not result.is_error, result.content
            sent.append((t0, t1))
        # The last warm-up call's row may land after the truncation (the server appends it once
        # its answer is written, which the client may see first): keep the timed calls' rows only.
        server_rows = [row for row in map(json.loads, stamps_file.read_text().splitlines())
                       if row["read"] >= sent[0][0]]
    for (t0, t1), stamps in zip(sent, server_rows):
        stamps = {**stamps, "client_send": t0, "client_done": t1}
        row = {"total": (t1 - t0) / 1e6, "server_cpu": (stamps["cpu_written"] - stamps["cpu_read"]) / 1e6}
        for name, start, end in SEGMENTS:
            if start is not None:  # a part the call did not run (fts: no embedding) took nothing
                row[name] = (stamps[end] - stamps[start]) / 1e6 if start in stamps and end in stamps else 0.0
        row["handler: rest"] = ((stamps["handler_end"] - stamps["handler_start"]) / 1e6
                                - row["handler: query embedding"] - row["handler: ranking"])
        rows.append(row)
    p50 = {k: round(statistics.median(r[k] for r in rows), 3) for k in rows[0]}
    p50["client_cpu_per_call"] = round(statistics.median(client_cpu), 3)
    p50["sum_of_segment_p50s"] = round(sum(p50[name] for name, _, _ in SEGMENTS), 3)
    return {"calls": len(rows), "p50_ms": p50}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--probe-server":
        sys.exit(probe_server(sys.argv[2:]))
    os.environ["KNOWSPEC_QUERY_VECTORS"] = "0"  # every query embedded, as for the goal's figures: the server inherits it
    import anyio

    sys.path.insert(0, str(Path(__file__).parent))
    from common import write_results
    from docpool_setup import CACHE, labelled_query_texts, machine_load

    from docpool_vector import reuse_appdir

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--mode", default="vector", choices=("vector", "hybrid", "fts"))
    parser.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE",
                        help="a variable for the server (e.g. KNOWSPEC_TIMELINE_SWITCH_INTERVAL=0.0005)")
    parser.add_argument("--out", default="vector_call_timeline", help="results name")
    ns = parser.parse_args()
    latency_dir = CACHE / "vector-run" / "latency"
    if not (latency_dir / "bench-docs.db").is_file():
        raise SystemExit(f"no latency pool in {latency_dir}: run benchmarks/docpool_vector.py first")
    os.environ.setdefault("KNOWSPEC_FTS_ARRAYS", "sync")
    queries = labelled_query_texts()
    env = dict(item.split("=", 1) for item in ns.server_env)
    env[STAMPS_ENV] = str(CACHE / "timeline-stamps.jsonl")
    load0 = machine_load()
    result = anyio.run(timeline, reuse_appdir(latency_dir).server_args(), env, queries, ns.mode, ns.calls)
    load1 = machine_load()
    for name, value in result["p50_ms"].items():
        print(f"{value:9.3f} ms  {name}")
    write_results(ns.out, {"mode": ns.mode, "server_env": {k: v for k, v in env.items() if k != STAMPS_ENV},
                           **result, "load_start": load0, "load_end": load1})


if __name__ == "__main__":
    main()
