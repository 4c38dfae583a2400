"""Terminal output with rich: a progress bar while checks run, then a summary and failures."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from knowspec.conformance.events import CheckFinished, CheckStarted, RunFinished, RunStarted, TargetUnreachable
from knowspec.conformance.reporters.summary import STATUSES, counts_by

COLOURS = {"passed": "green", "info": "blue", "failed": "red", "error": "red", "skipped": "yellow",
           "accepted": "cyan"}


class ConsoleReporter:
    def __init__(self, console: Console | None = None, verbose: bool = False) -> None:
        self.console = console or Console(stderr=True)
        self.verbose = verbose
        self.progress: Progress | None = None
        self.task: Any = None

    def handle(self, event: Any) -> None:
        if isinstance(event, RunStarted):
            self.console.print(f"[bold]knowspec conform[/] {escape(event.target)} (era {event.era}, family"
                               f" {event.family}, seed {event.seed}, contract {escape(event.contract)})")
            self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), console=self.console, transient=True)
            self.progress.start()
            self.task = self.progress.add_task("starting", total=event.planned)
        elif isinstance(event, CheckStarted) and self.progress:
            self.progress.update(self.task, description=escape(f"{event.check_id} {event.tool}"))
        elif isinstance(event, CheckFinished):
            if self.progress:
                self.progress.advance(self.task)
            if event.status in ("failed", "error") or self.verbose:
                colour = COLOURS[event.status]
                msg = event.failure.message if event.failure else event.reason
                self.console.print(f"[{colour}]{event.status:8}[/] {escape(event.case_id)} {escape(msg[:160])}",
                                   markup=True, highlight=False)
        elif isinstance(event, TargetUnreachable):
            self._stop()
            self.console.print(f"[red bold]target unreachable or misconfigured:[/] {escape(event.message)}")
        elif isinstance(event, RunFinished):
            self._stop()
            self._summary(event)

    def _stop(self) -> None:
        if self.progress:
            self.progress.stop()
            self.progress = None

    def _summary(self, finished: RunFinished) -> None:
        if not finished.results:
            return
        table = Table(title="conformance by check")
        table.add_column("check")
        for s in STATUSES:
            table.add_column(s, justify="right", style=COLOURS[s])
        for name, row in counts_by(finished.results, "check_id").items():
            table.add_row(name, *(str(row[s]) if row[s] else "" for s in STATUSES))
        self.console.print(table)
        for r in finished.results:
            if r.status == "failed" and r.failure:
                self.console.rule(f"[red]{escape(r.case_id)}")
                self.console.print(r.failure.message[:1000], highlight=False, markup=False)
                self.console.print("input: " + json.dumps(r.failure.arguments, ensure_ascii=False)[:600],
                                   highlight=False, markup=False)
        for check_id, tool in finished.stale_baseline:
            self.console.print(f"baseline entry {escape(check_id)} {escape(tool)} now passes: remove it",
                               highlight=False)
        for area, why in finished.skipped_areas:
            self.console.print(f"[yellow bold]SKIPPED AREA:[/] {escape(area)} ({escape(why)})", highlight=False)
        counts = ", ".join(f"{k} {v}" for k, v in sorted(finished.counts().items()))
        colour = "green" if finished.exit_code == 0 else "red"
        protocol = f" (protocol {finished.protocol})" if finished.protocol else ""
        self.console.print(f"[{colour} bold]exit {finished.exit_code}[/]: {counts} in {finished.duration:.1f}s{protocol}")
