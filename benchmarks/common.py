"""Shared helpers for the on-demand benchmarks: a real server over stdio, timing, results JSON."""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import mcp.types as types
from mcp import ClientSession, StdioServerParameters, stdio_client

RESULTS = Path(__file__).parent / "results"
CORPUS_ENV = "KNOWSPEC_CORPUS_DIR"  # the corpora folder holding databricks-okf (not part of the repository)


def databricks_path() -> Path:
    """``$KNOWSPEC_CORPUS_DIR/databricks-okf``; a placeholder path when the setting is unset."""
    return Path(os.environ.get(CORPUS_ENV) or "/KNOWSPEC_CORPUS_DIR-is-unset") / "databricks-okf"


def require_bundle(bundle: Path | None = None) -> Path:
    """The corpus bundle to measure: ``--bundle`` when given, else ``$KNOWSPEC_CORPUS_DIR/databricks-okf``.

    Exits with what to set when the folder is absent: the corpus is not part of the repository.
    """
    path = bundle if bundle is not None else databricks_path()
    if not path.is_dir():
        raise SystemExit(f"corpus bundle not found ({path}): pass --bundle DIR, or set {CORPUS_ENV} "
                         "to the corpora folder holding databricks-okf")
    return path.resolve()


def compile_bytecode() -> None:
    """Compile knowspec's modules whose bytecode is missing or stale, as installing the wheel does
    (quietly: a read-only install keeps what it has). A server started under
    ``PYTHONDONTWRITEBYTECODE`` otherwise compiles every edited module at each start: slower,
    and databricks-okf's server held ~4 MiB more after its first call (the compiler's garbage
    keeps arenas resident)."""
    import compileall
    import importlib.util

    for package in ("knowspec.impl", "knowspec.generated"):
        spec = importlib.util.find_spec(package)
        for folder in (spec.submodule_search_locations or []) if spec else []:
            compileall.compile_dir(folder, quiet=2)


@asynccontextmanager
async def stdio_session(*extra: str, env: dict[str, str] | None = None):
    """A stdio server session; ``env``: variables set for the server on top of this process's.

    Without an ``--appdir`` in ``extra`` the server gets a fresh empty one: by default it would
    serve the pools of ``./.knowspec`` (or ``$KNOWSPEC_APPDIR``), and warming those up loads the
    storages and numpy, so an OKF benchmark's memory and times would depend on the folder it is
    run from (databricks-okf's idle server: 67.5 MiB beside the demo's pools, 53 MiB alone)."""
    with tempfile.TemporaryDirectory(prefix="knowspec-bench-app-") as empty:
        appdir = [] if "--appdir" in extra else ["--appdir", empty]
        params = StdioServerParameters(command=sys.executable,
                                       args=["-m", "knowspec.impl.cli", "serve", "--stdio", *appdir, *extra],
                                       env={**os.environ, **(env or {})})
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def call(session: ClientSession, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    request = types.CallToolRequest(params=types.CallToolRequestParams(name=name, arguments=arguments))
    return await session.send_request(request, types.CallToolResult)


async def timed(session: ClientSession, name: str, arguments: dict[str, Any]) -> tuple[float, types.CallToolResult]:
    start = time.perf_counter()
    result = await call(session, name, arguments)
    return (time.perf_counter() - start) * 1000, result


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)
    return {
        "n": len(ordered),
        "p50_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(ordered[max(0, int(len(ordered) * 0.95) - 1)], 3),
        "max_ms": round(ordered[-1], 3),
    }


YARDSTICK_STEPS = 200_000


def yardstick_ms(repeats: int = 5) -> float:
    """The host's speed at this moment: the p50 wall time of a fixed pure-Python loop (no I/O, no
    memory beyond the caches), which no change to knowspec can move. On the project's shared
    2-core virtual machine it went from 7 to 12 ms and back within seconds, and a vector call's
    embedding and ranking in step with it (``host_phases.py``): wall times of two runs compare
    only beside their yardsticks."""
    samples = []
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        total = 0
        for i in range(YARDSTICK_STEPS):
            total += i & 7
        samples.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(samples), 3)


def server_peak_rss_mib() -> float | None:
    """VmHWM of the newest child python process serving stdio (Linux only)."""
    return server_memory_mib("VmHWM")


class PeakResident:
    """This process's resident size sampled every few milliseconds while a block runs: ``growth_mib``
    is the most it rose above where the block started (``ru_maxrss`` only ever grows over a run,
    so it cannot tell the second of two steps from the first). Linux only (0 elsewhere)."""

    def __init__(self, every_s: float = 0.005) -> None:
        self.every_s, self.start, self.peak = every_s, 0, 0

    @contextmanager
    def watching(self):
        from knowspec.impl.server.native_memory import resident_bytes

        self.start = self.peak = resident_bytes()
        done = threading.Event()

        def sample() -> None:
            while not done.wait(self.every_s):
                self.peak = max(self.peak, resident_bytes())

        watcher = threading.Thread(target=sample, daemon=True)
        watcher.start()
        try:
            yield self
        finally:
            done.set()
            watcher.join()
            self.peak = max(self.peak, resident_bytes())

    @property
    def growth_mib(self) -> float:
        return round((self.peak - self.start) / 2**20, 1)


def server_memory_mib(field: str = "VmRSS", pid: int | None = None) -> float | None:
    """A /proc status field (VmRSS now, VmHWM peak) of the child process serving stdio (or of
    ``pid``, when several serve), in MiB."""
    me = os.getpid()
    best = None
    for status in Path("/proc").glob("[0-9]*/status" if pid is None else f"{pid}/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        if (pid is not None or fields.get("PPid", "").strip() == str(me)) and field in fields:
            best = int(fields[field].split()[0]) / 1024
    return best


def server_temp_files_mib() -> float | None:
    """The bytes of the nameless (deleted) files the child processes hold open, in MiB: what a
    server keeps in the page cache instead of its own memory (the search index's folded bodies,
    ``impl/okf/search/folded_bodies.py``); None where /proc cannot tell."""
    total, seen = 0, False
    for pid in child_pids():
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        seen = True
        for fd in fds:
            try:
                if os.readlink(fd).endswith(" (deleted)"):
                    total += fd.stat().st_size
            except OSError:
                continue
    return round(total / 2**20, 1) if seen else None


def child_pids() -> set[int]:
    """The processes this one started that are still running (a stdio server is one)."""
    me, found = str(os.getpid()), set()
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
        except OSError:
            continue
        if fields.get("PPid", "").strip() == me:
            found.add(int(status.parent.name))
    return found


def server_cpu_seconds() -> float | None:
    """User + system CPU seconds so far of the child process serving stdio (Linux only): on a
    shared machine, a figure the other processes' load inflates far less than wall time."""
    me = os.getpid()
    ticks = os.sysconf("SC_CLK_TCK")
    best = None
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == str(me):  # the field after the state is the parent's id
            best = (int(fields[11]) + int(fields[12])) / ticks
    return best


def server_thread_cpu_ns() -> int | None:
    """CPU nanoseconds the stdio server's threads have run so far (Linux ``schedstat``, per
    thread): exact where ``server_cpu_seconds`` counts clock ticks of 10 ms, so one call's CPU can
    be told apart. A thread that has ended no longer counts: read it around calls whose threads
    stay (a server's worker pool), not across a server's life."""
    pids = child_pids()
    if not pids:
        return None
    total = 0
    for stat in Path(f"/proc/{max(pids)}/task").glob("*/schedstat"):
        try:
            total += int(stat.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total


def goal(name: str, floor: float, figure: float, bound: float, unit: str) -> dict[str, Any]:
    """One goal's line: the floor and the figure measured in the same run, their ratio and the
    bound on it; printed at once and returned for the results file."""
    ratio = figure / floor if floor else float("inf")
    row = {"goal": name, "floor": round(floor, 3), "figure": round(figure, 3), "unit": unit,
           "ratio": round(ratio, 2), "bound": bound, "holds": ratio <= bound}
    print(f"{name}: floor {floor:.3f} {unit}, figure {figure:.3f} {unit}, ratio {ratio:.2f} "
          f"(bound {bound}) {'PASS' if row['holds'] else 'FAIL'}", flush=True)
    return row


def upper_bound(name: str, figure: float, bound: float, unit: str, load: dict[str, Any] | None = None) -> dict[str, Any]:
    """One goal's line for an absolute bound (a p50 in ms, say): the figure, the bound, whether it
    holds and, when given, the load averages it was measured under; printed and returned."""
    row: dict[str, Any] = {"goal": name, "figure": round(figure, 3), "unit": unit, "bound": bound,
                           "holds": figure <= bound}
    note = ""
    if load is not None:
        row["load"] = load
        note = " (load " + ", ".join(f"{k} {v:.2f}" for k, v in load.items()) + ")"
    print(f"{name}: {figure:.3f} {unit} (bound {bound} {unit}) {'PASS' if row['holds'] else 'FAIL'}{note}", flush=True)
    return row


# The distributions a server's time and memory depend on, recorded with every result: a fresh
# install once took goal 6's figure from 100.0 to 105.4 MiB with no change of the project's code
# (jsonschema-rs and pydantic-core's code pages), and results without versions cannot show that.
MEASURED_LIBRARIES = ("mcp", "mcp-types", "pydantic", "pydantic-core", "jsonschema-rs", "jsonschema", "starlette",
                      "uvicorn", "anyio", "pyyaml", "ruamel.yaml", "pyromark", "lz4", "numpy", "onnxruntime",
                      "tokenizers", "psycopg", "firebird-driver", "firebird-embedded", "usearch")


def library_versions(names: tuple[str, ...] = MEASURED_LIBRARIES) -> dict[str, str | None]:
    """The installed version of each distribution in ``names`` (None when it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    return {name: installed(name) for name in names}


def write_results(name: str, data: dict[str, Any]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    data = {"benchmark": name, "python": platform.python_version(), "machine": platform.machine(),
            "cpus": os.cpu_count(), "libraries": library_versions(), **data}
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=2) + "\n")
    print(json.dumps(data, indent=2))
    return path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(base: str, proc: Any, exited: Any = lambda: "", timeout: float = 120.0) -> None:
    """Return once the HTTP server at ``base`` answers ``GET /healthz`` with 200; RuntimeError if
    ``proc`` exits first (with ``exited()``, e.g. its log's tail) or ``timeout`` passes."""
    import httpx2 as httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server {base} exited ({proc.returncode}) {exited()}".rstrip())
        try:
            if httpx.get(f"{base}/healthz", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.terminate()
    raise RuntimeError(f"server {base} did not answer /healthz in {timeout:.0f} s")
