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
import secrets
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
    judged_with: str = ""            # "expected checks" (the catalogue's, run first) or "every check on its tools"


def scope_of(name: str) -> tuple[tuple[str, ...], tuple[str, ...], str, bool]:
    """(tools, excluded checks, family, over REST) a host-mode run judges the mutant with; REST
    mutants (kind ``rest``) are judged with the REST checks and a pool imported by IMPORTDOC."""
    m = MUTANTS.get(name) or SERVER_MUTANTS.get(name)
    tools = tools_of(name)
    killers = set(m.killed_by) if m is not None else set()
    needs_inputs = m is not None and (m.kind in INPUT_KINDS or killers & set(INPUT_CHECKS))
    exclude = tuple(c for c in (() if needs_inputs else INPUT_CHECKS) + SERVER_CHECKS
                    if c not in killers and not (c == "cancellation" and m is not None and m.kind == "protocol"))
    family = "okf" if tools and set(tools) <= OKF_TOOLS else "all"
    return tools, exclude, family, kind_of(name) == "rest"


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
    rest_url: str = ""
    users: dict[str, tuple[str, str]] = field(default_factory=dict)
    imports: Path | None = None
    rest_database: str | None = None
    proc: subprocess.Popen | None = None
    baselines: dict[tuple, set[str]] = field(default_factory=dict)   # (check, tools, family, rest) → failing cases

    def start(self) -> None:
        self.control = self.root / "mutant"
        self.control.write_text("identity\n", encoding="utf-8")
        values = {"control": str(self.control)}
        self.users = {role: (f"mutant-{role}", secrets.token_hex(8)) for role in ("admin", "reader")
                      if "{" + role + "}" in self.server}
        values.update({role: f"{user}:{password}" for role, (user, password) in self.users.items()})
        if "{pool}" in self.server:
            from knowspec.conformance.fixtures.pools import write_fixture

            pool = write_fixture(self.root / "pool", self.base.seed)
            values["pool"] = str(pool.directory)
            self.base = replace(self.base, pool_fixture=pool.directory)
            self.imports = pool.directory / "imports"   # the host's IMPORTDOC folder (its appdir's imports)
            self.rest_database = f"{pool.database}rest"  # the host's copy of the pool that REST runs import into
            self.imports.mkdir(exist_ok=True)
        if "{port}" in self.server:
            values["port"] = str(free_port())
        command = self.server.format(**values)
        if "{port}" in self.server:
            self.proc = subprocess.Popen(shlex.split(command), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.target = f"http://127.0.0.1:{values['port']}/mcp"
            self.rest_url = f"http://127.0.0.1:{values['port']}"
            self._wait(int(values["port"]))
        else:
            self.target = "stdio:" + command

    def _wait(self, port: int, timeout: float = 300.0) -> None:   # a host may build a model pack first
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

    def failing(self, scope: tuple, checks: tuple[str, ...] = (), skip: tuple[str, ...] = ()) -> tuple[set[str], bool]:
        tools, exclude, family, rest = scope
        config = replace(self.base, target=self.target, tools=tools, family=family, checks=checks or self.base.checks,
                         exclude=tuple(self.base.exclude) + tuple(exclude) + tuple(skip))
        return failing_cases(self.signed_in(config, rest))

    def signed_in(self, config: RunConfig, rest: bool) -> RunConfig:
        """OKF runs sign in as the admin (anonymous callers never write); REST runs import the pool
        fixture through IMPORTDOC as the admin and read as the reader; doc runs stay anonymous ``*``."""
        if not self.rest_url or "admin" not in self.users:
            return config
        admin_user, admin_password = self.users["admin"]
        if rest:
            reader_user, reader_password = self.users.get("reader", (None, None))
            return replace(config, rest_url=self.rest_url, admin_user=admin_user, admin_password=admin_password,
                           reader_user=reader_user, reader_password=reader_password, pool_fixture=None,
                           pool_dir=self.imports, pool_database=self.rest_database, family="all")
        if config.family == "okf":
            return replace(config, rest_url=self.rest_url, admin_user=admin_user, admin_password=admin_password)
        return config

    def unmutated_failures(self, scope: tuple, checks: set[str]) -> set[str]:
        """Cases of ``checks`` that fail on the unmutated server (computed once per check and scope)."""
        tools, _, family, rest = scope
        key = (tools, family, rest)
        unknown = sorted(c for c in checks if (c, *key) not in self.baselines)
        if unknown:
            self.select("identity")
            failed, _ = self.failing((tools, (), family, rest), tuple(unknown))
            for c in unknown:
                self.baselines[(c, *key)] = {case for case in failed if check_of(case) == c}
        return set().union(*(self.baselines[(c, *key)] for c in checks))

    def judge(self, name: str) -> MutantResult:
        """First the checks the catalogue expects to notice the mutant; only if none does, every
        other check on its tools. A kill is a case failing under the mutant that passes unmutated."""
        scope = scope_of(name)
        tools = scope[0]
        start = time.monotonic()
        first = expected_killers(name, self.base.checks)
        stages = ((first, ()), ((), first)) if first else (((), ()),)
        new: tuple[str, ...] = ()
        unreachable = False
        for stage, (checks, skip) in enumerate(stages):
            self.select(name)
            failed, unreachable = self.failing(scope, checks, skip)
            self.select("identity")
            new = tuple(sorted(failed - self.unmutated_failures(scope, {check_of(c) for c in failed})))
            if new or unreachable:
                break
        judged = "expected checks" if first and stage == 0 else "every check on its tools"
        return MutantResult(name, bool(new) or unreachable, new, unreachable, tools, kind_of(name),
                            time.monotonic() - start, judged)


def check_of(case: str) -> str:
    """``check[tool]`` → ``check``."""
    return case.split("[", 1)[0]


def expected_killers(name: str, allowed: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The checks the catalogue names for the mutant (within ``allowed`` when the run restricts checks)."""
    from knowspec.conformance.checks import CHECKS

    m = MUTANTS.get(name) or SERVER_MUTANTS.get(name)
    killers = tuple(c for c in (m.killed_by if m is not None else ()) if c in CHECKS)
    return tuple(c for c in killers if c in allowed) if allowed else killers


def _host_worker(args: tuple[str, RunConfig, list[str], int]) -> list[MutantResult]:
    server, base, names, index = args
    root = Path(tempfile.mkdtemp(prefix=f"knowspec-mutants-{index}-"))
    worker = HostWorker(server, base, root)
    started = time.monotonic()
    worker.start()
    startup = time.monotonic() - started   # server start, pool fixture (and model pack) build
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
    results.append(MutantResult("identity", False, tuple(failing), seconds=startup))
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
    """Host mode over ``jobs`` worker processes; the last item is the identity baseline (its
    ``seconds``: the slowest worker's start-up: server, pool fixture, model pack)."""
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
    startups = [r.seconds for part in parts for r in part if r.name == "identity"]
    return [*results, MutantResult("identity", False, tuple(baseline), seconds=max(startups, default=0.0))]


QUICK_SERVER = ("apply_patch_no_compare_and_swap", "doc_search_acl_after_ranking", "query_fold_keeps_dotless_i",
                "write_concept_drops_body", "doc_entity_counts_hidden_topics", "rest_login_accepts_wrong_password",
                "rest_doc_calls_ignore_acl")


def quick_subset(names: list[str]) -> list[str]:
    """One response mutant per tool, plus the server and REST mutants a proxy cannot fake (CI)."""
    seen: set[tuple[str, ...]] = set()
    out = []
    for name in names:
        tools = tools_of(name)
        if name in MUTANTS and len(tools) == 1 and tools not in seen:
            seen.add(tools)
            out.append(name)
    return out + [n for n in QUICK_SERVER if n in names]
