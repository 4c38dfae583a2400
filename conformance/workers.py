"""Runs planned cases over a few MCP sessions at once and streams their events in one thread.

Opening a stdio session spawns the server (seconds each), so a worker keeps its session for
every case it takes and opens a fresh one only after a case that may have poisoned it (an
error, or a call the target left unanswered: ``Connection.broken``); the runner's first
session (the one that read ``tools/list``) is handed to the first worker rather than closed. Each worker writes fixtures under its own
directory, so a writing tool never races another worker over the same bundle. Checks that judge
wall-clock timing (``EXCLUSIVE``) run last, alone, once the other workers' sessions are closed, so
that nothing else loads the machine; so does, once more, a case that ended in the suite's own
error while other workers ran. That last batch keeps the first worker's session (a healthy,
idle one) instead of starting yet another server.
"""

from __future__ import annotations

import contextlib
import queue
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from knowspec.conformance.checks import CheckSpec
from knowspec.conformance.checks.registry import BundleStore
from knowspec.conformance.contract import ToolContract
from knowspec.conformance.events import CheckFinished, CheckStarted, Event
from knowspec.conformance.failures import Failure
from knowspec.conformance.spawned import stop_all
from knowspec.conformance.target import Connection, Target, TargetError, connect

EXCLUSIVE = frozenset({"cancellation"})   # timing-judging checks: run alone, after the rest

Case = tuple[CheckSpec, "ToolContract | None"]
RunCase = Callable[[Connection, BundleStore, CheckSpec, "ToolContract | None"], CheckFinished]

STOP_JOIN_SECONDS = 5.0  # an interrupted run waits at most this long for its workers to stop
WORKER_FOLDER = re.compile(r"w\d+")  # each worker writes its fixture bundles into ROOT/w<index>


@dataclass
class SessionStats:
    """How many sessions the run opened, how long opening them took, and which cases ended in the
    suite's own error and were run again alone (for the report)."""

    opened: int = 0
    open_seconds: float = 0.0
    retried: list[tuple[str, str]] = field(default_factory=list)   # (case, its first error), run again alone
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, seconds: float) -> None:
        with self.lock:
            self.opened += 1
            self.open_seconds += seconds


class Worker:
    """One session (opened on first use) and one fixture directory."""

    def __init__(self, index: int, target: Target, root: Path, stats: SessionStats,
                 shared: Connection | None = None, opened: tuple[Connection, contextlib.ExitStack] | None = None) -> None:
        self.target, self.stats, self.shared = target, stats, shared
        self.store = BundleStore(root / f"w{index}")  # WORKER_FOLDER
        self.store.root.mkdir(parents=True, exist_ok=True)
        self._stack: contextlib.ExitStack | None = opened[1] if opened and shared is None else None
        self._conn: Connection | None = shared or (opened[0] if opened else None)

    def connection(self) -> Connection:
        if self._conn is None:
            start = time.monotonic()
            stack = contextlib.ExitStack()
            try:
                self._conn = stack.enter_context(connect(self.target))
            finally:
                self.stats.add(time.monotonic() - start)
            self._stack = stack
        return self._conn

    @property
    def current(self) -> Connection | None:
        """The open session, if any (none before the first case and after a reset)."""
        return self._conn

    def reset(self) -> None:
        """Drop the session (a fresh one is opened for the next case); a shared one is kept."""
        if self.shared is not None:
            return
        stack, self._stack, self._conn = self._stack, None, None
        if stack is not None:
            with contextlib.suppress(BaseException):
                stack.close()


def _unreachable(spec: CheckSpec, tool: ToolContract | None, exc: TargetError) -> CheckFinished:
    name = tool.name if tool else ""
    failure = Failure(spec.id, spec.rule, name, f"target unreachable: {exc}")
    return CheckFinished(spec.id, spec.rule, name, "error", 0.0, failure=failure, reason=str(exc))


def _poisoned(result: CheckFinished, conn: Connection | None) -> bool:
    """The suite's own error, or a call the target left unanswered: the next case gets a new session."""
    return result.status == "error" or (conn is not None and conn.broken is not None)


def _work(worker: Worker, jobs: "queue.Queue[tuple[int, Case] | None]", out: "queue.Queue", run_case: RunCase,
          expired: Callable[[], bool], keep: bool = False) -> None:
    """Take cases until the queue says stop; the session is closed at the end unless ``keep``."""
    try:
        while True:
            job = jobs.get()
            if job is None:
                return
            index, (spec, tool) = job
            out.put((None, CheckStarted(spec.id, tool.name if tool else "")))
            if expired():
                result = CheckFinished(spec.id, spec.rule, tool.name if tool else "", "skipped", 0.0,
                                       reason="time budget exhausted: raise --time-budget")
            else:
                try:
                    result = run_case(worker.connection(), worker.store, spec, tool)
                except TargetError as exc:
                    result = _unreachable(spec, tool, exc)
                if _poisoned(result, worker.current):
                    worker.reset()
            out.put((index, result))
    finally:
        if not keep:
            worker.reset()
        out.put(("done", None))


def run_cases(cases: list[Case], run_case: RunCase, target: Target, root: Path, workers: int,
              deadline: float | None, shared: Connection | None = None,
              opened: tuple[Connection, contextlib.ExitStack] | None = None) -> Iterator[Event | SessionStats]:
    """Yield each case's started/finished events as workers produce them; the finished results
    are yielded again, in plan order, by the caller reading ``CheckFinished`` events.

    ``opened``: a session the caller already opened (and the stack that closes it); the first
    worker uses it, and this function closes it in the end."""
    stats = SessionStats()
    stopping = threading.Event()   # an interrupted run: workers take no further case
    expired = (lambda: stopping.is_set() or (deadline is not None and time.monotonic() > deadline))
    parallel = [(i, c) for i, c in enumerate(cases) if c[0].id not in EXCLUSIVE]
    alone = [(i, c) for i, c in enumerate(cases) if c[0].id in EXCLUSIVE]
    count = 1 if shared is not None else max(1, min(workers, len(parallel)))
    retried: set[int] = set()
    first = Worker(0, target, root, stats, shared, opened)
    threads: list[threading.Thread] = []
    try:
        for batch, width in ((parallel, count), (alone, 1)):
            if not batch:
                continue
            jobs: queue.Queue = queue.Queue()
            out: queue.Queue = queue.Queue()
            for job in batch:
                jobs.put(job)
            threads = []
            for n in range(width):
                jobs.put(None)
                # the first worker (and its session) serves both batches; the others end with the first
                worker = first if n == 0 else Worker(n, target, root, stats, shared)
                thread = threading.Thread(target=_work, args=(worker, jobs, out, run_case, expired, worker is first),
                                          daemon=True, name=f"conform-worker-{n}")
                thread.start()
                threads.append(thread)
            running = width
            while running:
                try:
                    tag, item = out.get(timeout=0.5)
                except queue.Empty:
                    continue
                if tag == "done":
                    running -= 1
                elif (batch is parallel and width > 1 and isinstance(item, CheckFinished) and item.status == "error"
                      and not item.reason.startswith("cannot open") and tag not in retried):
                    # the suite's own error while others ran (not a verdict): once more, alone, at the end
                    retried.add(tag)
                    alone.append((tag, cases[tag]))
                    stats.retried.append((item.case_id, item.reason[:300]))
                else:
                    yield item
            for thread in threads:
                thread.join()
    except (KeyboardInterrupt, GeneratorExit):
        # Ctrl-C or SIGTERM (or a caller that stops reading): the workers' sessions never close
        # (their threads die with the process), so their stdio targets are stopped here, which
        # also ends any call in flight.
        stopping.set()
        stop_all()
        # Their calls end with their targets: the workers stop writing bundles before the caller
        # removes the folder they write in (a run interrupted under load had left it behind).
        # A session still starting when the run stopped notes its target only once the start
        # returns (a busy machine: a handshake past the interrupt), so what is noted meanwhile is
        # stopped too, and its worker's call with it.
        until = time.monotonic() + STOP_JOIN_SECONDS
        while any(thread.is_alive() for thread in threads) and time.monotonic() < until:
            for thread in threads:
                thread.join(timeout=min(0.1, max(0.0, until - time.monotonic())))
            stop_all()
        stop_all()
        raise
    finally:
        first.reset()
    yield stats
