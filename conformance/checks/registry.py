"""The checks registry: a check is a small function registered by ``@check`` under a stable id.

The id is the report key, the baseline key and the ``--check`` switch. A check receives a
:class:`CheckContext`, calls the target through it, and raises ``CheckFailed`` or
``CheckSkipped``; it never prints. ``scope="tool"`` checks run once per contract tool,
``scope="server"`` checks once per run.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from knowspec.conformance.areas import STALE_CHECK
from knowspec.conformance.config import RunConfig
from knowspec.conformance.contract import Contract, ToolContract
from knowspec.conformance.failures import TRANSPORT_FAILURE, CaseAborted, CheckSkipped
from knowspec.conformance.fixtures.model import Bundle
from knowspec.conformance.generate import validator
from knowspec.conformance.target import CallOutcome, Connection

Applies = Callable[["CheckContext"], str | None]
BUDGET_GRACE = 10.0   # seconds a case may go on calling past the run's time budget before it is cut
Relevant = Callable[[ToolContract], bool]
Planned = Callable[[Contract], bool]


@dataclass(frozen=True)
class CheckSpec:
    id: str
    rule: str
    scope: str
    func: Callable[["CheckContext"], None]
    applies: Applies | None = None
    doc: str = ""
    relevant: Relevant | None = None
    since: int = 0          # the first contract revision that states the check's rule
    planned: Planned | None = None  # a server-scoped check: whether the judged contract holds what it calls

    def covers(self, tool: ToolContract | None) -> bool:
        """Whether the contract gives this check something to judge on ``tool`` (a plan question:
        a check that cannot apply to a tool, e.g. truncation of a tool without a limit, is no case)."""
        return tool is None or self.relevant is None or self.relevant(tool)


CHECKS: dict[str, CheckSpec] = {}


def holds_family(family: str) -> Planned:
    """``planned`` for a server-scoped check that calls tools of ``family``."""
    return lambda contract: any(t.family == family for t in contract.tools)


def holds_tools(*names: str) -> Planned:
    """``planned`` for a server-scoped check that calls these tools."""
    return lambda contract: set(names) <= {t.name for t in contract.tools}


def tools_named(*names: str) -> Relevant:
    """``relevant`` for a check that judges only these tools (an oracle of one tool, or of a pair)."""
    return lambda tool: tool.name in names


def check(id: str, rule: str, scope: str = "tool", applies: Applies | None = None,
          relevant: Relevant | None = None, since: int = 0, planned: Planned | None = None) -> Callable:
    """Register ``func`` under ``id``; ``applies(ctx)`` returns a skip reason or ``None`` (what the
    target or the run lacks); ``relevant(tool)`` says from the contract alone whether the check
    has anything to judge on that tool (no: the pair is not planned at all), and ``planned(contract)``
    the same for a server-scoped check (a run narrowed by --family or --tool to tools it does not
    call plans no such case, rather than skipping it as an unjudged area); ``since`` is the
    first contract revision stating the rule (an older contract, ``--contract git:REV``, skips it)."""

    def register(func: Callable[["CheckContext"], None]) -> Callable[["CheckContext"], None]:
        if id in CHECKS:
            raise ValueError(f"check id {id!r} registered twice")
        CHECKS[id] = CheckSpec(id, rule, scope, func, applies, (func.__doc__ or "").strip(), relevant, since,
                               planned)
        return func

    return register


class BundleStore:
    """Writes fixture bundles under the bundle dir, each under a fresh name, once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.seconds = 0.0        # spent writing bundles (the report's fixture time)
        self._written: dict[str, Path] = {}
        self._counter = itertools.count()

    def path_of(self, bundle: Bundle, fresh: bool = False) -> Path:
        if not fresh and bundle.name in self._written:
            return self._written[bundle.name]
        start = time.monotonic()
        name = f"{bundle.name}-{next(self._counter)}"
        path = Bundle(name, bundle.concepts, bundle.okf_version, bundle.extra_files).write(self.root)
        if not fresh:
            self._written[bundle.name] = path
        self.seconds += time.monotonic() - start
        return path


@dataclass
class CheckContext:
    conn: Connection
    contract: Contract
    config: RunConfig
    advertised: dict[str, dict[str, Any]]
    bundles: BundleStore
    tool: ToolContract | None = None
    deadline: float | None = None
    calls: int = 0
    successes: int = 0
    error_codes: set[str] = field(default_factory=set)  # the judged tool's own isError answers
    call_seconds: float = 0.0     # waiting for the target (the rest of a case is the suite's own work)
    fixture_seconds: float = 0.0  # generating the run's shared valid examples (bundle writes: ``bundles.seconds``)
    notes: list[str] = field(default_factory=list)
    _fill: dict[str, Any] = field(default_factory=dict)

    # ---- calling ---------------------------------------------------------------------------
    def call(self, arguments: Any, name: str | None = None) -> CallOutcome:
        """One call; a call the target leaves unanswered ends the case (``CaseAborted``)."""
        return self.call_many([(name or self.require_tool().name, arguments)])[0]

    def call_many(self, calls: list[tuple[str, Any]]) -> list[CallOutcome]:
        """The calls in flight together on this session, outcomes in call order (one call: alone)."""
        self.calls += len(calls)
        timeout, capped = self.call_deadline()
        start = time.monotonic()
        if len(calls) == 1:
            outcomes = [self.conn.call(calls[0][0], calls[0][1], timeout)]
        else:
            outcomes = self.conn.call_many(calls, timeout)
        self.call_seconds += time.monotonic() - start
        for (name, arguments), outcome in zip(calls, outcomes):
            if outcome.timed_out and capped:
                raise CaseAborted("skipped", f"time budget exhausted during a call to {name}: raise --time-budget")
            if outcome.transport_error is not None:
                raise CaseAborted("failed", f"{TRANSPORT_FAILURE}: {outcome.transport_error}", arguments=arguments,
                                  response=outcome.summary())
            if outcome.is_result and (self.tool is None or name == self.tool.name):
                if not outcome.is_error:
                    self.successes += 1
                else:
                    code = outcome.structured.get("code") if isinstance(outcome.structured, dict) else None
                    self.error_codes.add(code if isinstance(code, str) else "(no envelope)")
        return outcomes

    def fitted(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """``arguments`` of a call meant to be valid, when they fit the judged contract. Ones that
        do not (a field renamed, a value past a revised limit: the expectations built on them no
        longer hold either) show a check written for another revision, so the case is skipped,
        saying so, and nothing is blamed on the target."""
        try:
            tool = self.contract.tool(name)
        except KeyError:  # a run narrowed to other tools: nothing of this one to hold it to
            return arguments
        problems = [f"/{'/'.join(map(str, e.absolute_path))}: {e.message}"
                    for e in validator(tool.input_schema).iter_errors(arguments)]
        if problems:
            raise CheckSkipped(f"{STALE_CHECK} ({self.contract.source}): its call to {name} fails the input "
                               f"schema ({problems[0][:160]}); update the check for this revision")
        return arguments

    def call_deadline(self) -> tuple[float, bool]:
        """A call's deadline: ``--call-timeout``, cut short where the run's time budget (plus
        ``BUDGET_GRACE``) ends first; and whether it was cut. A case never runs far past the budget."""
        timeout = self.config.call_timeout
        if self.deadline is None:
            return timeout, False
        left = self.deadline + BUDGET_GRACE - time.monotonic()
        if left >= timeout:
            return timeout, False
        if left <= 0:
            raise CaseAborted("skipped", "time budget exhausted: raise --time-budget")
        return left, True

    def note(self, text: str) -> None:
        """A harmless difference worth reporting: a passing case with notes is reported as ``info``."""
        self.notes.append(text)

    def require_tool(self) -> ToolContract:
        if self.tool is None:
            raise RuntimeError("tool-scoped helper used in a server-scoped check")
        return self.tool

    def is_advertised(self, name: str) -> bool:
        return name in self.advertised

    # ---- property runs ---------------------------------------------------------------------
    def run_property(self, strategy: st.SearchStrategy[Any], test: Callable[[Any], None],
                     max_examples: int | None = None, shrink: bool = True, honour_deadline: bool = True) -> None:
        """Run ``test`` over ``strategy`` inside hypothesis so failures shrink; seeded per run."""
        budget = max_examples if max_examples is not None else self.config.max_examples

        @seed(self.config.seed)
        @settings(max_examples=max(1, budget), deadline=None, database=None, derandomize=False,
                  suppress_health_check=list(HealthCheck), phases=(Phase.generate, Phase.shrink) if shrink else (Phase.generate,),
                  print_blob=False, report_multiple_bugs=False)
        @given(strategy)
        def prop(value: Any) -> None:
            if honour_deadline and self.deadline is not None and time.monotonic() > self.deadline:
                return
            test(value)

        prop()

    # ---- fixtures ----------------------------------------------------------------------------
    def fill(self) -> dict[str, Any]:
        """Values that make a required argument meaningful on the fixture bundles."""
        if not self._fill:
            from knowspec.conformance.fixtures.strategies import neighbors_bundle

            self._fill = {"bundle_path": str(self.bundles.path_of(neighbors_bundle())), "concept_id": "a"}
        return dict(self._fill)


def skip(reason: str) -> None:
    raise CheckSkipped(reason)
