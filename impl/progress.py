"""Progress a person can follow: phases with counts, rate and ETA, on a terminal or in a log.

A long command reports ``(phase, done, total)`` to a :class:`PhaseProgress`. On a terminal it
draws one rich bar per phase; when stderr is a pipe or a file (CI, ``| tee``) it prints a plain
line when a phase starts, every ``interval`` seconds or ``step`` of the total (but not more
often than every ``min_gap`` seconds), and when a phase ends::

    pool build: vectors 1200/5000 (24%), 310/s, ETA 12s
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, TextIO

if TYPE_CHECKING:
    from rich.progress import TaskID

Report = Callable[[str, int, int], None]  # (phase, done, total); total 0 = unknown


def _duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _rate(per_second: float) -> str:
    return f"{per_second:.0f}/s" if per_second >= 10 else f"{per_second:.1f}/s"


def progress_line(command: str, phase: str, done: int, total: int, elapsed: float) -> str:
    """One plain progress line: counts, percentage, rate and ETA (or the time taken, when done)."""
    parts = [f"{command}: {phase} {done}/{total}" if total else f"{command}: {phase} {done}"]
    if total:
        parts[0] += f" ({100 * done // total}%)"
    rate = done / elapsed if elapsed >= 1.0 and done else 0.0  # a rate over less than a second is noise
    if rate:
        parts.append(_rate(rate))
    if total and done >= total:
        parts.append(f"done in {_duration(elapsed)}")
    elif total and rate:
        parts.append(f"ETA {_duration((total - done) / rate)}")
    return ", ".join(parts)


@dataclass
class _Phase:
    started: float
    last_line: float
    last_done: int = 0
    total: int = 0
    finished: bool = False


class PlainProgress:
    """Periodic plain lines for a pipe or a log file."""

    def __init__(self, command: str, stream: TextIO, *, interval: float = 5.0, step: float = 0.10,
                 min_gap: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.command, self.stream, self.clock = command, stream, clock
        self.interval, self.step, self.min_gap = interval, step, min_gap
        self.phases: dict[str, _Phase] = {}

    def __call__(self, phase: str, done: int, total: int) -> None:
        now = self.clock()
        state = self.phases.get(phase)
        if state is None:
            state = self.phases[phase] = _Phase(started=now, last_line=now, total=total)
            self._line(phase, state, done, total, now)
            return
        if state.finished:
            return
        quiet_for = now - state.last_line
        stepped = total and (done - state.last_done) >= self.step * total and quiet_for >= self.min_gap
        if quiet_for >= self.interval or stepped or (total and done >= total):
            self._line(phase, state, done, total, now)

    def _line(self, phase: str, state: _Phase, done: int, total: int, now: float) -> None:
        state.last_line, state.last_done, state.total = now, done, total
        state.finished = bool(total) and done >= total
        print(progress_line(self.command, phase, done, total, now - state.started), file=self.stream, flush=True)

    def close(self) -> None:
        pass


class RichProgress:
    """One rich bar per phase, kept on screen when it ends so the phases read as a list."""

    def __init__(self, command: str, stream: TextIO) -> None:
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TaskProgressColumn,
                                   TextColumn, TimeElapsedColumn, TimeRemainingColumn)
        from rich.text import Text

        class RateColumn(ProgressColumn):
            def render(self, task) -> Text:
                return Text(_rate(task.speed) if task.speed else "", style="progress.data.speed")

        self.command = command
        self.bars = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TaskProgressColumn(),
                             RateColumn(), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                             console=Console(file=stream), transient=False)
        self.tasks: dict[str, TaskID] = {}
        self.bars.start()

    def __call__(self, phase: str, done: int, total: int) -> None:
        task = self.tasks.get(phase)
        if task is None:
            task = self.tasks[phase] = self.bars.add_task(f"{self.command}: {phase}", total=total or None)
        self.bars.update(task, completed=done, total=total or None)

    def close(self) -> None:
        self.bars.stop()


class PhaseProgress:
    """``with PhaseProgress("pool build") as report: report("topics", n, total)``.

    Picks the rich display on a terminal, plain lines otherwise (``plain`` forces either).
    """

    def __init__(self, command: str, stream: TextIO | None = None, *, plain: bool | None = None,
                 interval: float = 5.0) -> None:
        stream = stream or sys.stderr
        if plain is None:
            plain = not (hasattr(stream, "isatty") and stream.isatty())
        self.display: PlainProgress | RichProgress = (PlainProgress(command, stream, interval=interval) if plain
                                                      else RichProgress(command, stream))

    def __call__(self, phase: str, done: int, total: int) -> None:
        self.display(phase, done, total)

    def __enter__(self) -> "PhaseProgress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.display.close()
