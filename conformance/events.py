"""The runner's event stream: started/finished pairs that every reporter consumes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from knowspec.conformance.failures import Failure


@dataclass(frozen=True)
class RunStarted:
    target: str
    era: str
    family: str
    seed: int
    contract: str
    planned: int
    started_at: float = field(default_factory=time.time)


@dataclass(frozen=True)
class CheckStarted:
    check_id: str
    tool: str


@dataclass(frozen=True)
class CheckFinished:
    """One (check, tool) case. ``status``: passed | info | failed | skipped | error | accepted.

    ``info``: passed, with harmless differences worth knowing in ``reason`` (e.g. other wording).
    """

    check_id: str
    rule: str
    tool: str
    status: str
    duration: float
    calls: int = 0
    failure: Failure | None = None
    reason: str = ""
    successes: int = 0        # calls that got a successful (non-isError) result
    call_seconds: float = 0.0  # of ``duration``, time spent waiting for the target's answers
    fixture_seconds: float = 0.0  # of ``duration``, writing fixture bundles and generating the shared examples
    error_codes: tuple[str, ...] = ()  # the codes of the tool's isError answers, sorted

    @property
    def case_id(self) -> str:
        return f"{self.check_id}[{self.tool}]" if self.tool else self.check_id


@dataclass(frozen=True)
class TargetUnreachable:
    message: str


@dataclass(frozen=True)
class RunFinished:
    results: tuple[CheckFinished, ...]
    duration: float
    exit_code: int
    stale_baseline: tuple[tuple[str, str], ...] = ()   # accepted (check, tool) pairs that now pass
    skipped_areas: tuple[tuple[str, str], ...] = ()    # (contract area, why it was not judged)
    timings: dict = field(default_factory=dict)        # where the time went (see runner.timings)
    protocol: str = ""                                 # the MCP protocol version the target agreed
    drift: dict = field(default_factory=dict)          # --contract older than the suite's (see drift.py)
    unreachable: str = ""                              # why no check ran (the target, contract or baseline)
    interrupted: str = ""                              # why the run stopped before its last case (a signal)
    strict_failed: tuple[tuple[str, str], ...] = ()    # the skipped areas that failed a --strict run

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.results:
            out[r.status] = out.get(r.status, 0) + 1
        return out


Event = RunStarted | CheckStarted | CheckFinished | TargetUnreachable | RunFinished

