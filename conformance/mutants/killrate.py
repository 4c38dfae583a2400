"""Kill rate: run the suite against each mutant and count the mutants some check noticed.

A mutant is *killed* when a case fails under it that passed unmutated (``identity``), so failures
the server already has never count as kills. Two ways to reach a mutant:

- **host mode** (the server command holds ``{control}``): one server process per worker runs a
  mutant host that reads the active mutant's name from the control file; the runner switches
  mutants by rewriting that file. ``{port}`` makes it an HTTP target started once (else a stdio
  command spawned per run); ``{pool}`` is replaced by a pool fixture the runner writes
  (``fixtures/pools.py``). Response mutants and server-side mutants (``server_catalogue.py``) run.
- **proxy mode** (no ``{control}``): each mutant is a stdio proxy in front of a fresh server
  (``proxy.py``): response mutants, client mutants and the answer-pairing mutant.

Each mutant is judged only on the tools it names (every check on those tools), against the
identity baseline of the same tools; workers run in parallel, each with its own server.
"""

from __future__ import annotations

import multiprocessing
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterator

from knowspec.conformance.config import RunConfig
from knowspec.conformance.mutants.catalogue import CLIENT_MUTANTS, MUTANTS
from knowspec.conformance.mutants.proxy import PAIRING
from knowspec.conformance.mutants.server_catalogue import SERVER_MUTANTS
from knowspec.conformance.runner import run_to_end

ALL_MUTANTS = (*MUTANTS, *CLIENT_MUTANTS, PAIRING)
HOST_MUTANTS = (*MUTANTS, *SERVER_MUTANTS)
# Input-generation checks judge how a server takes arguments; they are slow (schema-driven
# generation) and blind to result edits, so host mode runs them only for mutants on that ground.
INPUT_CHECKS = ("input_valid_accepted", "input_invalid_rejected", "boundary_limits")
INPUT_KINDS = ("errors", "protocol", "schemas", "limits")
# Server-scoped checks that run whatever the tools: the cancellation timings (protocol mutants
# only) and the REST-import checks, which restate the per-tool pool oracles on an imported pool.
SERVER_CHECKS = ("cancellation", "docpool_import_answers", "docpool_import_acl")
OKF_TOOLS = frozenset({"list_concepts", "search_sections", "search_concepts", "read_concept", "get_neighbors",
                       "validate_bundle", "get_semantic_graph", "write_concept", "preview_concept_patch",
                       "apply_concept_patch", "preview_v02_migration", "apply_v02_migration",
                       "preview_temporal_upgrade", "apply_temporal_upgrade"})


@dataclass(frozen=True)
class MutantResult:
    name: str
    killed: bool
    killed_by: tuple[str, ...]       # case ids that failed only under the mutant
    unreachable: bool = False
    tools: tuple[str, ...] = ()
    kind: str = ""
    seconds: float = 0.0


def scope_of(name: str) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """(tools, excluded checks, family) a host-mode run judges the mutant with."""
    m = MUTANTS.get(name) or SERVER_MUTANTS.get(name)
    tools = tools_of(name)
    killers = set(m.killed_by) if m is not None else set()
    needs_inputs = m is not None and (m.kind in INPUT_KINDS or killers & set(INPUT_CHECKS))
    exclude = tuple(c for c in (() if needs_inputs else INPUT_CHECKS) + SERVER_CHECKS
                    if c not in killers and not (c == "cancellation" and m is not None and m.kind == "protocol"))
    family = "okf" if tools and set(tools) <= OKF_TOOLS else "all"
    return tools, exclude, family


def tools_of(name: str) -> tuple[str, ...]:
    m = MUTANTS.get(name) or SERVER_MUTANTS.get(name)
    return tuple(m.tools) if m is not None else ()


def kind_of(name: str) -> str:
    m = MUTANTS.get(name) or SERVER_MUTANTS.get(name)
    return m.kind if m is not None else ("protocol" if name in CLIENT_MUTANTS or name == PAIRING else "")


def proxy_target(mutant: str, server_argv: list[str]) -> str:
    proxy = [sys.executable, "-m", "knowspec.conformance.mutants.proxy", "--mutant", mutant, "--"]
    return "stdio:" + shlex.join(proxy + server_argv)


def failing_cases(config: RunConfig) -> tuple[set[str], bool]:
    finished = run_to_end(config)
    unreachable = not finished.results and finished.exit_code == 2
    return {r.case_id for r in finished.results if r.status in ("failed", "error")}, unreachable


def kill_rate(base: RunConfig, server_argv: list[str], names: list[str] | None = None) -> Iterator[MutantResult]:
    """Proxy mode: the first item is the identity baseline (never 'killed')."""
    baseline, unreachable = failing_cases(replace(base, target=proxy_target("identity", server_argv)))
    yield MutantResult("identity", False, tuple(sorted(baseline)), unreachable)
    for name in names or ALL_MUTANTS:
        start = time.monotonic()
        failed, unreachable = failing_cases(replace(base, target=proxy_target(name, server_argv)))
        new = tuple(sorted(failed - baseline))
        yield MutantResult(name, bool(new) or unreachable, new, unreachable, tools_of(name), kind_of(name),
                           time.monotonic() - start)


# ---- host mode --------------------------------------------------------------------------------

def is_host_command(server: str) -> bool:
    return "{control}" in server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class HostWorker:
    """One server process (or stdio command) with its control file, pool fixture and baselines."""

    server: str
    base: RunConfig
    root: Path
    target: str = ""
    proc: subprocess.Popen | None = None
    baselines: dict[tuple, set[str]] = field(default_factory=dict)

    def start(self) -> None:
        self.control = self.root / "mutant"
        self.control.write_text("identity\n", encoding="utf-8")
        values = {"control": str(self.control)}
        if "{pool}" in self.server:
            from knowspec.conformance.fixtures.pools import write_fixture

            pool = write_fixture(self.root / "pool", self.base.seed)
            values["pool"] = str(pool.directory)
            self.base = replace(self.base, pool_fixture=pool.directory)
        if "{port}" in self.server:
            values["port"] = str(free_port())
        command = self.server.format(**values)
        if "{port}" in self.server:
            self.proc = subprocess.Popen(shlex.split(command), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.target = f"http://127.0.0.1:{values['port']}/mcp"
            self._wait(int(values["port"]))
        else:
            self.target = "stdio:" + command

    def _wait(self, port: int, timeout: float = 60.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"the mutant host exited with {self.proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("the mutant host did not open its port")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def select(self, name: str) -> None:
        tmp = self.control.with_suffix(".tmp")
        tmp.write_text(name + "\n", encoding="utf-8")
        os.replace(tmp, self.control)

    def failing(self, scope: tuple) -> tuple[set[str], bool]:
        tools, exclude, family = scope
        return failing_cases(replace(self.base, target=self.target, tools=tools, family=family,
                                     exclude=tuple(self.base.exclude) + tuple(exclude)))

    def baseline(self, scope: tuple) -> set[str]:
        if scope not in self.baselines:
            self.select("identity")
            self.baselines[scope], _ = self.failing(scope)
        return self.baselines[scope]

    def judge(self, name: str) -> MutantResult:
        scope = scope_of(name)
        tools = scope[0]
        baseline = self.baseline(scope)
        start = time.monotonic()
        self.select(name)
        failed, unreachable = self.failing(scope)
        self.select("identity")
        new = tuple(sorted(failed - baseline))
        return MutantResult(name, bool(new) or unreachable, new, unreachable, tools, kind_of(name),
                            time.monotonic() - start)


def _host_worker(args: tuple[str, RunConfig, list[str], int]) -> list[MutantResult]:
    server, base, names, index = args
    root = Path(tempfile.mkdtemp(prefix=f"knowspec-mutants-{index}-"))
    worker = HostWorker(server, base, root)
    worker.start()
    results = []
    try:
        for name in names:
            result = worker.judge(name)
            results.append(result)
            verdict = "killed" if result.killed else "SURVIVED"
            print(f"[{index}] {name:44} {verdict:8} {result.seconds:5.1f}s {', '.join(result.killed_by[:3])}",
                  file=sys.stderr, flush=True)
    finally:
        worker.stop()
    failing = sorted({case for cases in worker.baselines.values() for case in cases})
    results.append(MutantResult("identity", False, tuple(failing)))
    return results


def partition(names: list[str], jobs: int) -> list[list[str]]:
    """Mutants of one tool set go to one worker (its baseline is computed once), sizes balanced."""
    groups: dict[tuple, list[str]] = {}
    for name in names:
        groups.setdefault(scope_of(name), []).append(name)
    buckets: list[list[str]] = [[] for _ in range(max(1, jobs))]
    for group in sorted(groups.values(), key=len, reverse=True):
        min(buckets, key=len).extend(group)
    return [b for b in buckets if b]


def host_kill_rate(base: RunConfig, server: str, names: list[str], jobs: int = 2) -> list[MutantResult]:
    """Host mode over ``jobs`` worker processes; the last item is the identity baseline."""
    buckets = partition(names, jobs)
    work = [(server, base, bucket, i) for i, bucket in enumerate(buckets)]
    if len(work) == 1:
        parts = [_host_worker(work[0])]
    else:
        with multiprocessing.get_context("spawn").Pool(len(work)) as pool:
            parts = pool.map(_host_worker, work)
    results = [r for part in parts for r in part if r.name != "identity"]
    baseline = sorted({c for part in parts for r in part if r.name == "identity" for c in r.killed_by})
    order = {n: i for i, n in enumerate(names)}
    results.sort(key=lambda r: order.get(r.name, 0))
    return [*results, MutantResult("identity", False, tuple(baseline))]


QUICK_SERVER = ("apply_patch_no_compare_and_swap", "doc_search_acl_after_ranking", "query_fold_keeps_dotless_i",
                "write_concept_drops_body", "doc_entity_counts_hidden_topics")


def quick_subset(names: list[str]) -> list[str]:
    """One response mutant per tool, plus the server mutants a proxy cannot fake (CI)."""
    seen: set[tuple[str, ...]] = set()
    out = []
    for name in names:
        tools = tools_of(name)
        if name in MUTANTS and len(tools) == 1 and tools not in seen:
            seen.add(tools)
            out.append(name)
    return out + [n for n in QUICK_SERVER if n in names]
