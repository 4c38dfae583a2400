"""Plans (check, tool) cases, runs them against the target and yields events; prints nothing.

Each check gets its own MCP session (a crash or a poisoned session stays inside one check);
tool-scoped checks run once per contract tool. Exit codes are decided here: 0 all passed or
accepted, 1 contract failures, 2 target unreachable or misconfigured, 130 interrupted (Ctrl-C,
SIGTERM). Before the first check, the document-pool fixture is imported when the run has REST
admin credentials (the checks see the outcome as ``config.pool``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import resource
import shutil
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Iterator

from knowspec.conformance.areas import skipped_areas, strict_failing
from knowspec.conformance.checks import CHECKS, CheckContext, CheckSpec
from knowspec.conformance.checks.docpool_import import prepare_pool, release_pool
from knowspec.conformance.checks.registry import BundleStore
from knowspec.conformance.config import RunConfig
from knowspec.conformance.contract import Contract, ContractError, ToolContract, load_contract
from knowspec.conformance.drift import contract_drift
from knowspec.conformance.events import (
    CheckFinished, Event, RunFinished, RunStarted, TargetUnreachable,
)
from knowspec.conformance.failures import CaseAborted, CheckFailed, CheckSkipped, Failure
from knowspec.conformance.reporters.baseline import BaselineError, load_baseline, stale_entries
from knowspec.conformance.spawned import stop_all
from knowspec.conformance.target import NO_ANSWER_IN_TIME, Connection, Target, TargetError, connect, rest_login
from knowspec.conformance.workers import WORKER_FOLDER, SessionStats, run_cases

EXIT_OK, EXIT_FAILURES, EXIT_UNREACHABLE = 0, 1, 2
EXIT_INTERRUPTED = 130   # Ctrl-C or SIGTERM: the reports hold the cases finished so far


def selected_checks(config: RunConfig) -> list[CheckSpec]:
    unknown = [c for c in (*config.checks, *config.exclude) if c not in CHECKS]
    if unknown:
        raise ContractError(f"unknown check id(s): {', '.join(unknown)} (known: {', '.join(CHECKS)})")
    return [spec for cid, spec in CHECKS.items()
            if (not config.checks or cid in config.checks) and cid not in config.exclude]


def plan(checks: list[CheckSpec], contract: Contract) -> list[tuple[CheckSpec, ToolContract | None]]:
    cases: list[tuple[CheckSpec, ToolContract | None]] = []
    for spec in checks:
        if spec.scope == "server":
            if spec.planned is None or spec.planned(contract):
                cases.append((spec, None))
        else:
            cases += [(spec, tool) for tool in contract.tools if spec.covers(tool)]
    return cases


def _first_check_failure(exc: BaseException) -> CheckFailed | None:
    """Hypothesis may wrap the failure (flaky or multiple bugs) in an exception group."""
    if isinstance(exc, CheckFailed):
        return exc
    for inner in getattr(exc, "exceptions", ()) or ():
        found = _first_check_failure(inner)
        if found:
            return found
    cause = exc.__cause__ or exc.__context__
    return _first_check_failure(cause) if isinstance(cause, BaseException) and cause is not exc else None


def run_case(ctx: CheckContext, spec: CheckSpec) -> CheckFinished:
    tool = ctx.tool.name if ctx.tool else ""
    start, written = time.monotonic(), ctx.bundles.seconds

    def done(status: str, failure: Failure | None = None, reason: str = "") -> CheckFinished:
        return CheckFinished(spec.id, spec.rule, tool, status, time.monotonic() - start, ctx.calls, failure, reason,
                             ctx.successes, ctx.call_seconds, ctx.fixture_seconds + ctx.bundles.seconds - written,
                             tuple(sorted(ctx.error_codes)))

    try:
        if ctx.contract.number < spec.since:
            return done("skipped", reason=f"its rule is first stated in contract revision {spec.since}; "
                                          f"the judged contract ({ctx.contract.source}) does not state it")
        if spec.applies is not None:
            reason = spec.applies(ctx)
            if reason:
                return done("skipped", reason=reason)
        spec.func(ctx)
    except CheckSkipped as exc:
        return done("skipped", reason=exc.reason)
    except CaseAborted as exc:
        if exc.status == "skipped":
            return done("skipped", reason=exc.message)
        return done("failed", Failure(spec.id, spec.rule, tool, exc.message, exc.arguments, exc.response))
    except BaseException as exc:  # noqa: BLE001 - a check never crashes the run
        if isinstance(exc, KeyboardInterrupt):
            raise
        failed = _first_check_failure(exc)
        if failed is not None:
            return done("failed", Failure(spec.id, spec.rule, tool, failed.message, failed.arguments,
                                          failed.response))
        message = f"{type(exc).__name__}: {str(exc)[:500]}"
        inner = next(iter(getattr(exc, "exceptions", None) or ()), None)
        if inner is not None:   # e.g. hypothesis' FlakyFailure: say what failed the first time
            message += f" [first: {type(inner).__name__}: {str(inner)[:400]}]"
        return done("error", Failure(spec.id, spec.rule, tool, message), reason=message)
    if ctx.notes:
        return done("info", reason="; ".join(ctx.notes)[:2000])
    return done("passed")


HUNG_TOOL_CASES = 3      # cases of one tool left unanswered before its other cases are not run
SILENT_TARGET_CASES = 6  # cases in a row, of any tools, left unanswered before no other case is run


class HungTools:
    """Tools whose calls the target left unanswered past the call deadline in ``HUNG_TOOL_CASES``
    cases: each further case would wait out the deadline again (a hung handler took a run to 160
    s, 30 s a case), so the rest are skipped, saying why. A target that left ``SILENT_TARGET_CASES``
    cases in a row unanswered, whatever their tools, answers nothing any more: every case left is
    skipped (a server silent after tools/list had held a run ~20 minutes at the default deadline,
    three cases of each of 25 tools). Shared by the run's workers."""

    def __init__(self) -> None:
        self._unanswered: Counter[str] = Counter()
        self._in_a_row = 0
        self._lock = threading.Lock()

    def note(self, result: CheckFinished) -> None:
        unanswered = result.failure is not None and NO_ANSWER_IN_TIME in result.failure.message
        with self._lock:
            if unanswered:
                self._in_a_row += 1
                if result.tool:
                    self._unanswered[result.tool] += 1
            elif result.calls:  # the target answered this case's calls
                self._in_a_row = 0

    def skipped(self, spec: CheckSpec, tool: ToolContract | None) -> CheckFinished | None:
        """The case as skipped, when the target or its tool has hung too often; else None (run it)."""
        name = tool.name if tool else ""
        with self._lock:
            silent = self._in_a_row >= SILENT_TARGET_CASES
            hung = tool is not None and self._unanswered[tool.name] >= HUNG_TOOL_CASES
        if silent:
            return CheckFinished(spec.id, spec.rule, name, "skipped", 0.0, reason=(
                f"not run: the target left the last {SILENT_TARGET_CASES} cases, of any tool, with {NO_ANSWER_IN_TIME}"))
        if hung:
            return CheckFinished(spec.id, spec.rule, name, "skipped", 0.0,
                                 reason=f"not run: {HUNG_TOOL_CASES} earlier cases of {name} got {NO_ANSWER_IN_TIME}")
        return None


def mcp_credentials(config: RunConfig) -> RunConfig:
    """An HTTP run with REST admin credentials and no token signs in as the admin for MCP too."""
    if config.bearer_token or not config.target or config.target.startswith("stdio:") \
            or not (config.rest_url and config.admin_user and config.admin_password):
        return config
    try:
        token, user, roles = rest_login(config.rest_url, config.admin_user, config.admin_password,
                                        config.call_timeout)
    except TargetError as exc:  # anonymous MCP: a refused session names it, and the import check reports it
        return dataclasses.replace(config, login_refused=str(exc))
    principals = frozenset(name.lower() for name in (user, *roles, "*") if name)
    return dataclasses.replace(config, bearer_token=token, mcp_principals=principals)


def run(config: RunConfig) -> Iterator[Event]:
    """The whole run as an event stream; the last event is always ``RunFinished``."""
    t0, cpu0 = time.monotonic(), _cpu()
    results: list[CheckFinished] = []
    interrupted = ""
    sessions = SessionStats()
    phases: dict[str, float] = {}
    unlisted: tuple[str, ...] = ()   # judged contract tools the target's tools/list lacks
    try:
        contract = load_contract(config.contract_path).for_family(config.family).only(config.tools)
        baseline = load_baseline(config.baseline)
        checks = selected_checks(config)
        config = mcp_credentials(config)
        target = Target(config.target, config.era, config.call_timeout, bearer_token=config.bearer_token)
        target.validate()
    except (ContractError, BaselineError, TargetError) as exc:
        yield TargetUnreachable(str(exc))
        yield RunFinished((), time.monotonic() - t0, EXIT_UNREACHABLE, unreachable=str(exc))
        return
    cases = plan(checks, contract)
    if not cases:  # a run that judged nothing must not pass
        message = (f"the selection plans no case: {len(checks)} check(s) over {len(contract.tools)} contract tool(s) "
                   "leave nothing to judge (a check is planned only for tools whose contract gives it something, "
                   "e.g. boundary_limits needs [tool.limits]); widen --check, --tool or --family")
        yield TargetUnreachable(message)
        yield RunFinished((), time.monotonic() - t0, EXIT_UNREACHABLE, unreachable=message)
        return
    phases["contract_and_plan"] = time.monotonic() - t0
    yield RunStarted(config.target, config.era, config.family, config.seed, contract.source, len(cases))
    own_dir = config.bundle_dir is None
    bundle_root = Path(tempfile.mkdtemp(prefix="knowspec-conform-")) if own_dir else Path(config.bundle_dir)
    bundle_root.mkdir(parents=True, exist_ok=True)
    kept = set() if own_dir else {p.name for p in bundle_root.iterdir()}  # a user's folder: only ours go
    deadline = t0 + config.time_budget if config.time_budget else None
    # The first session reads tools/list, then serves the first worker (or every case with
    # --shared-session): over stdio each session is a server process started anew.
    probe_stack = contextlib.ExitStack()
    try:
        try:
            start = time.monotonic()
            probe = probe_stack.enter_context(connect(target))
            advertised = {t["name"]: t for t in probe.list_tools()}
            unlisted = tuple(t.name for t in contract.tools if t.name not in advertised)
            if config.advertised_only and contract.tools and len(unlisted) == len(contract.tools):
                raise TargetError(f"the target advertises none of the {len(unlisted)} contract tool(s) judged "
                                  f"(family {config.family}), so --advertised-only has nothing to judge")
            protocol = probe.protocol
            phases["handshake"] = time.monotonic() - start
        except Exception as exc:  # noqa: BLE001 - a broken target gets a verdict (exit 2), never a traceback
            message = (str(exc) if isinstance(exc, TargetError)
                       else f"the target broke the session: {type(exc).__name__}: {str(exc)[:300]}")
            if config.login_refused:
                message += f" (the run connected without a token: {config.login_refused})"
            yield TargetUnreachable(message)
            yield RunFinished((), time.monotonic() - t0, EXIT_UNREACHABLE, unreachable=message)
            return
        except KeyboardInterrupt:
            stop_all()
            yield RunFinished((), time.monotonic() - t0, EXIT_INTERRUPTED,
                              interrupted="interrupted (Ctrl-C or SIGTERM) before the first case")
            return
        # The document-pool fixture goes in before any check reads the pool (or the run says why not).
        start = time.monotonic()
        config = dataclasses.replace(config, pool=prepare_pool(config, target, contract, [c.id for c in checks],
                                                               bundle_root))
        phases["pool_fixture"] = time.monotonic() - start
        shared = probe if config.shared_session else None

        hung = HungTools()

        def one_case(conn: Connection, store: BundleStore, spec: CheckSpec,
                     tool: ToolContract | None) -> CheckFinished:
            result = hung.skipped(spec, tool) or run_case(
                CheckContext(conn, contract, config, advertised, store, tool, deadline), spec)
            hung.note(result)
            return result

        start = time.monotonic()
        stream = run_cases(cases, one_case, target, bundle_root.absolute(), config.workers, deadline,
                           shared, None if shared else (probe, probe_stack))
        try:
            for item in stream:
                if isinstance(item, SessionStats):
                    sessions = item
                    continue
                if isinstance(item, CheckFinished):
                    results.append(item)
                yield item
        except KeyboardInterrupt:
            interrupted = (f"interrupted (Ctrl-C or SIGTERM) after {len(results)} of {len(cases)} cases; "
                           "the stdio targets it started were stopped")
        finally:
            stream.close()
            phases["cases"] = time.monotonic() - start
            release_pool(config)
    finally:
        probe_stack.close()
        if own_dir:
            shutil.rmtree(bundle_root, ignore_errors=True)
        else:
            for made in bundle_root.iterdir():
                if made.name not in kept and WORKER_FOLDER.fullmatch(made.name):
                    shutil.rmtree(made, ignore_errors=True)
    order = {(spec.id, tool.name if tool else ""): i for i, (spec, tool) in enumerate(cases)}
    results.sort(key=lambda r: order.get((r.check_id, r.tool), len(order)))
    results = [_apply_baseline(r, baseline) for r in results]
    finished_cases = {(r.check_id, r.tool) for r in results}
    not_run = tuple(key for key in ((spec.id, tool.name if tool else "") for spec, tool in cases)
                    if key not in finished_cases) if interrupted else ()
    areas = tuple(skipped_areas(results, unlisted, declared=config.advertised_only, not_run=not_run))
    strict_failed = strict_failing(areas, stdio=target.is_stdio) if config.strict else ()
    failed = any(r.status in ("failed", "error") for r in results) or bool(strict_failed)
    duration = time.monotonic() - t0
    exit_code = EXIT_INTERRUPTED if interrupted else EXIT_FAILURES if failed else EXIT_OK
    yield RunFinished(tuple(results), duration, exit_code,
                      tuple(stale_entries(baseline, tuple(results))), areas,
                      timings(results, sessions, duration, config.workers, phases,
                              tuple(b - a for a, b in zip(cpu0, _cpu()))), protocol,
                      drift_against_suite(contract, config, results), interrupted=interrupted,
                      strict_failed=strict_failed)


def drift_against_suite(judged: Contract, config: RunConfig, results: list[CheckFinished]) -> dict:
    """The report's contract drift when ``--contract`` named a revision older than the suite's own:
    ``git:REV``, or a contract file that carries its ``contract-revision`` (another file, such as a
    toy contract, is no revision of this one)."""
    path = config.contract_path
    if path is None or not (str(path).startswith("git:") or "contract-revision" in judged.revision):
        return {}
    try:
        shipped = load_contract(None).for_family(config.family)
    except ContractError:
        return {}
    if config.tools:
        shipped = Contract(tuple(t for t in shipped.tools if t.name in config.tools), shipped.error_codes,
                           shipped.error_schema, shipped.revision, shipped.source)
    return contract_drift(judged, shipped, results)


def _cpu() -> tuple[float, float]:
    """CPU seconds (user + system) of the suite's process and of its reaped children (stdio servers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def timings(results: list[CheckFinished], sessions: SessionStats, duration: float, workers: int,
            phases: dict[str, float] | None = None, cpu: tuple[float, float] | None = None) -> dict:
    """Where the run's time went: wall seconds per phase (contract, first session's handshake, pool
    fixture, cases); per check and per tool the case seconds, of which waiting for the target and
    building fixtures (the rest is the suite's own judging and input generation); session start-ups;
    CPU seconds of the suite and of the stdio servers it started (on a shared machine, wall time
    says little: CPU time is what the run costs)."""
    by_check: dict[str, list[float]] = {}
    by_tool: dict[str, list[float]] = {}
    for r in results:
        for table, key in ((by_check, r.check_id), (by_tool, r.tool)):
            if key:
                row = table.setdefault(key, [0.0, 0.0, 0.0])
                row[0] += r.duration
                row[1] += r.call_seconds
                row[2] += r.fixture_seconds

    def top(table: dict[str, list[float]]) -> dict[str, dict[str, float]]:
        rows = sorted(table.items(), key=lambda kv: -kv[1][0])
        return {k: {"seconds": round(v[0], 3), "waiting_for_target": round(v[1], 3),
                    "building_fixtures": round(v[2], 3)} for k, v in rows}

    out = {"wall_seconds": round(duration, 3), "workers": workers,
           "phases": {k: round(v, 3) for k, v in (phases or {}).items()},
           "case_seconds": round(sum(r.duration for r in results), 3),
           "waiting_for_target": round(sum(r.call_seconds for r in results), 3),
           "building_fixtures": round(sum(r.fixture_seconds for r in results), 3),
           "sessions_opened": sessions.opened, "session_open_seconds": round(sessions.open_seconds, 3),
           "retried_alone": [{"case": case, "first_error": why} for case, why in sessions.retried],
           "by_check": top(by_check), "by_tool": top(by_tool)}
    if cpu is not None:
        out["cpu_seconds"] = {"suite": round(cpu[0], 3), "stdio_servers": round(cpu[1], 3)}
    return out


def _apply_baseline(result: CheckFinished, baseline: set[tuple[str, str]]) -> CheckFinished:
    if result.status in ("failed", "error") and (result.check_id, result.tool) in baseline:
        return dataclasses.replace(result, status="accepted")
    return result


def run_to_end(config: RunConfig, consumers: list = ()) -> RunFinished:
    """Drive the event stream through ``consumers`` (objects with ``handle(event)``)."""
    last: RunFinished | None = None
    events = run(config)
    pending: KeyboardInterrupt | None = None
    while True:
        try:   # an interrupt that hit a consumer goes back into the run, which then finishes early
            event = events.throw(pending) if pending is not None else next(events)
        except StopIteration:
            break
        pending = None
        try:
            for consumer in consumers:
                consumer.handle(event)
        except KeyboardInterrupt as exc:
            if isinstance(event, RunFinished):
                raise
            pending = exc
        if isinstance(event, RunFinished):
            last = event
    assert last is not None
    return last


__all__ = ["run", "run_to_end", "plan", "selected_checks", "EXIT_OK", "EXIT_FAILURES", "EXIT_UNREACHABLE",
           "EXIT_INTERRUPTED"]
