"""Terminal output with rich: a progress bar while checks run, then a summary and failures.

When stderr is not a terminal (CI, a pipe), plain progress lines stand in for the bar: one when
the run starts, then every 5 s or 10 % of the cases, with rate and ETA. ``impl/progress.py``
prints the same kind of line for the server's commands; conformance may not import impl.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)
from rich.table import Table

from knowspec.conformance.causes import SharedCause, cause_by_case, shared_causes
from knowspec.conformance.events import CheckFinished, CheckStarted, RunFinished, RunStarted, TargetUnreachable
from knowspec.conformance.reporters.summary import STATUSES, counts_by

COLOURS = {"passed": "green", "info": "blue", "failed": "red", "error": "red", "skipped": "yellow",
           "accepted": "cyan"}


def _duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds}s" if seconds < 60 else f"{seconds // 60}m{seconds % 60:02d}s"


class PlainTicker:
    """``conform: 40/338 cases (11%), 2.1/s, ETA 2m21s, last inputs[doc_search]`` now and then."""

    def __init__(self, console: Console, planned: int, *, interval: float = 5.0, step: float = 0.10,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.console, self.planned, self.interval, self.step, self.clock = console, planned, interval, step, clock
        self.started = self.last_line = clock()
        self.done = self.last_done = 0

    def advance(self, case_id: str) -> None:
        self.done += 1
        now = self.clock()
        quiet_for = now - self.last_line
        stepped = self.done - self.last_done >= self.step * self.planned and quiet_for >= 1.0
        if quiet_for >= self.interval or stepped or self.done == self.planned:
            self.last_line, self.last_done = now, self.done
            elapsed = now - self.started
            rate = self.done / elapsed if elapsed >= 1.0 else 0.0
            parts = [f"conform: {self.done}/{self.planned} cases ({100 * self.done // max(self.planned, 1)}%)"]
            if rate:
                parts.append(f"{rate:.1f}/s")
                if self.done < self.planned:
                    parts.append(f"ETA {_duration((self.planned - self.done) / rate)}")
            parts.append(f"last {case_id}")
            self.console.print(", ".join(parts), markup=False, highlight=False, soft_wrap=True)


class ConsoleReporter:
    def __init__(self, console: Console | None = None, verbose: bool = False, *, plain: bool = False) -> None:
        self.console = console or Console(stderr=True)
        self.verbose = verbose
        self.plain = plain  # ASCII tables, for a file read anywhere
        self.progress: Progress | None = None
        self.ticker: PlainTicker | None = None
        self.task: Any = None

    def handle(self, event: Any) -> None:
        if isinstance(event, RunStarted):
            self.header(event)
            if not self.console.is_terminal:
                self.console.print(f"conform: {event.planned} cases planned; connecting and preparing fixtures",
                                   markup=False, highlight=False, soft_wrap=True)
                self.ticker = PlainTicker(self.console, event.planned)
                return
            self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TaskProgressColumn(), TimeElapsedColumn(), TextColumn("ETA"),
                                     TimeRemainingColumn(), console=self.console, transient=True)
            self.progress.start()
            self.task = self.progress.add_task("connecting, preparing fixtures", total=event.planned)
        elif isinstance(event, CheckStarted) and self.progress:
            self.progress.update(self.task, description=escape(f"{event.check_id} {event.tool}"))
        elif isinstance(event, CheckFinished):
            if self.progress:
                self.progress.advance(self.task)
            if self.ticker:
                self.ticker.advance(event.case_id)
            if event.status in ("failed", "error") or self.verbose:
                colour = COLOURS[event.status]
                msg = event.failure.message if event.failure else event.reason
                self.console.print(f"[{colour}]{event.status:8}[/] {escape(event.case_id)} {escape(msg[:160])}",
                                   markup=True, highlight=False)
        elif isinstance(event, TargetUnreachable):
            self._stop()
            self.console.print(f"[red bold]target unreachable or misconfigured:[/] {escape(event.message)}",
                               soft_wrap=True)
        elif isinstance(event, RunFinished):
            self._stop()
            self._summary(event)

    def header(self, started: RunStarted) -> None:
        self.console.print(f"[bold]knowspec conform[/] {escape(started.target)} (era {started.era}, family"
                           f" {started.family}, seed {started.seed}, contract {escape(started.contract)})",
                           soft_wrap=True)

    def _stop(self) -> None:
        if self.progress:
            self.progress.stop()
            self.progress = None

    def _summary(self, finished: RunFinished) -> None:
        if finished.interrupted:
            self.console.print(f"[red bold]{escape(finished.interrupted)}[/]", soft_wrap=True)
        if not finished.results:
            return
        table = Table(title="conformance by check", box=box.ASCII if self.plain else box.HEAVY_HEAD)
        table.add_column("check")
        for s in STATUSES:
            table.add_column(s, justify="right", style=COLOURS[s])
        for name, row in counts_by(finished.results, "check_id").items():
            table.add_row(name, *(str(row[s]) if row[s] else "" for s in STATUSES))
        self.console.print(table)
        groups = shared_causes(finished.results)
        for line in shared_cause_lines(groups):
            self.console.print(line, highlight=False, markup=False, soft_wrap=True)
        shown_for: set[str] = set()   # of a shared cause, one failure is shown in full: the rest are the same fault
        grouped = cause_by_case(groups)
        for r in finished.results:
            if r.status == "failed" and r.failure:
                cause = grouped.get(r.case_id)
                if cause in shown_for:
                    continue
                if cause is not None:
                    shown_for.add(cause)
                label = r.case_id + (" (one of a shared cause's failures, above)" if cause else "")
                self.console.rule(f"[red]{escape(label)}", characters="-" if self.plain else "─")
                self.console.print(r.failure.message[:1000], highlight=False, markup=False, soft_wrap=self.plain)
                self.console.print("input: " + json.dumps(r.failure.arguments, ensure_ascii=False)[:600],
                                   highlight=False, markup=False, soft_wrap=self.plain)  # a file's: copied whole
        for check_id, tool in finished.stale_baseline:
            self.console.print(f"baseline entry {escape(check_id)} {escape(tool)} now passes: remove it",
                               highlight=False)
        for area, why in finished.skipped_areas:
            self.console.print(f"[yellow bold]SKIPPED AREA:[/] {escape(area)} ({escape(why)})", highlight=False)
        for line in drift_lines(finished.drift):
            self.console.print(line, highlight=False, markup=False, soft_wrap=True)
        counts = ", ".join(f"{k} {v}" for k, v in sorted(finished.counts().items()))
        if finished.strict_failed:
            counts += f"; --strict: {len(finished.strict_failed)} area(s) not judged"
        colour = "green" if finished.exit_code == 0 else "red"
        protocol = f" (protocol {finished.protocol})" if finished.protocol else ""
        self.console.print(f"[{colour} bold]exit {finished.exit_code}[/]: {counts} in {finished.duration:.1f}s{protocol}")


SHOWN_CASES = 12


def shared_cause_lines(groups: list[SharedCause]) -> list[str]:
    """A line per shared cause, largest first, with the cases it failed: fix these first."""
    lines = []
    for g in groups:
        cases = ", ".join(g.cases[:SHOWN_CASES]) + (f" and {len(g.cases) - SHOWN_CASES} more"
                                                    if len(g.cases) > SHOWN_CASES else "")
        lines.append(f"SHARED CAUSE of {len(g.cases)} failures ({len(g.checks)} check(s), {len(g.tools)} tool(s)): "
                     f"{g.cause.summary}: {cases}")
    return lines


def drift_lines(drift: dict) -> list[str]:
    """The contract drift section as plain lines (conformance/drift.py); none without a drift."""
    if not drift:
        return []
    breaking = drift["breaking"]
    seen = sum(1 for c in breaking if c["observed"])
    lines = [f"CONTRACT DRIFT: {drift['judged']} -> this suite's {drift['suite']}: {len(breaking)} breaking "
             f"change(s), {seen} observed by this run; {drift['compatible']} compatible change(s) not listed"]
    for c in breaking:
        where = f" {c['where']}" if c["where"] else ""
        values = f": {_short(c['old'])} -> {_short(c['new'])}" if c["old"] is not None or c["new"] is not None else ""
        head = f"  {'observed' if c['observed'] else 'not observed':<12} {c['kind']} {c['subject']}{where}{values} ({c['class']})"
        lines.append(head + (": " + ", ".join(c["cases"]) if c["observed"] else f": {c['why']}"))
    unexplained = drift["unexplained"]
    lines.append("  failures no drift change explains: " + (", ".join(unexplained) if unexplained else "none"))
    return lines


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
