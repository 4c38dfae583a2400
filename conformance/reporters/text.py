"""The console's closing summary as a plain-text file, for people reading a CI artifact.

The console writes to stderr (stdout stays free for a caller's own use), so the summary is
written here too when ``--text FILE`` asks: the run line, the table per check, each failure
with its input, stale baseline entries, skipped areas, contract drift and the exit line.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from rich.console import Console

from knowspec.conformance.events import RunFinished, RunStarted, TargetUnreachable
from knowspec.conformance.reporters import report_path
from knowspec.conformance.reporters.console import ConsoleReporter

WIDTH = 200  # wide enough that the table and most failure lines are not wrapped


class TextReporter:
    def __init__(self, path: Path) -> None:
        self.path = report_path(path)
        self.started: RunStarted | None = None
        self.unreachable: TargetUnreachable | None = None

    def handle(self, event: Any) -> None:
        if isinstance(event, RunStarted):
            self.started = event
        elif isinstance(event, TargetUnreachable):
            self.unreachable = event
        elif isinstance(event, RunFinished):
            self.path.write_text(render(self.started, self.unreachable, event), encoding="utf-8")


def render(started: RunStarted | None, unreachable: TargetUnreachable | None, finished: RunFinished) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=WIDTH, no_color=True, force_terminal=False, emoji=False,
                      highlight=False)
    summary = ConsoleReporter(console, plain=True)
    if started is not None:
        summary.header(started)
    if unreachable is not None:
        summary.handle(unreachable)
    summary.handle(finished)
    return buffer.getvalue()
