"""Failures that share one root cause, grouped so that a report names the fault once.

A target that never sends ``structuredContent`` fails most checks of every tool: listed one by
one, sixty failures hide the single thing to fix. A failure's cause is, first, one of the
cross-cutting faults whose words the checks share (``failures.py``); then the error code a call
meant to succeed was answered with; else its message with the tool's name taken out. A cause
that at least ``MIN_SHARED`` failures share is reported as a group, largest first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from knowspec.conformance.events import CheckFinished
from knowspec.conformance.failures import (
    NO_ENVELOPE, NO_STRUCTURE, NO_SUCCESS_STRUCTURE, REFUSED, RPC_INSTEAD, TRANSPORT_FAILURE,
)

MIN_SHARED = 3


@dataclass(frozen=True)
class Cause:
    key: str      # stable, for machines: "no_structured_content", "refused:<code>", "message:<text>"
    summary: str  # what to fix, in one line


NO_STRUCTURED_CONTENT = Cause("no_structured_content", "successful results carry no structuredContent object "
                                                       "(the contract gives every success one)")
KNOWN: tuple[tuple[str, Cause], ...] = (
    (NO_STRUCTURE, NO_STRUCTURED_CONTENT),
    (NO_SUCCESS_STRUCTURE, NO_STRUCTURED_CONTENT),
    (NO_ENVELOPE, Cause("no_error_envelope", "error results (isError) carry no structuredContent envelope")),
    (RPC_INSTEAD, Cause("jsonrpc_errors", "tool failures come back as JSON-RPC errors instead of isError results")),
    (TRANSPORT_FAILURE, Cause("transport", "calls went unanswered: the target hung, crashed or closed the "
                                           "connection (each case's message has the last words it said)")),
)
REFUSAL = re.compile(re.escape(REFUSED) + r" \(([A-Za-z0-9_.-]+)")


@dataclass(frozen=True)
class SharedCause:
    cause: Cause
    cases: tuple[str, ...]   # case ids, in the run's order
    checks: tuple[str, ...]
    tools: tuple[str, ...]


def cause_of(message: str, tools: Iterable[str] = ()) -> Cause:
    """The cause a failure message names (see the module docstring for the order)."""
    for phrase, cause in KNOWN:
        if phrase in message:
            return cause
    refused = REFUSAL.search(message)
    if refused:
        code = refused.group(1)
        return Cause(f"refused:{code}", f"calls meant to succeed were answered with the error {code} (the "
                                        "target refuses the suite's valid fixtures; see one case's message)")
    text = message
    for tool in sorted((t for t in tools if t), key=len, reverse=True):  # a longer name first: no partial hit
        text = re.sub(rf"(?<![\w/]){re.escape(tool)}(?![\w/])", "<tool>", text)
    return Cause(f"message:{text}", text)


def shared_causes(results: Iterable[CheckFinished], min_shared: int = MIN_SHARED) -> list[SharedCause]:
    """The causes at least ``min_shared`` failed cases share, largest group first (ties: the run's order)."""
    failed = [r for r in results if r.status == "failed" and r.failure is not None]
    tools = {r.tool for r in failed}
    groups: dict[str, tuple[Cause, list[CheckFinished]]] = {}
    for r in failed:
        assert r.failure is not None
        cause = cause_of(r.failure.message, tools)
        groups.setdefault(cause.key, (cause, []))[1].append(r)
    shared = [SharedCause(cause, tuple(r.case_id for r in members),
                          tuple(dict.fromkeys(r.check_id for r in members)),
                          tuple(dict.fromkeys(r.tool for r in members if r.tool)))
              for cause, members in groups.values() if len(members) >= min_shared]
    return sorted(shared, key=lambda g: -len(g.cases))


def cause_by_case(groups: Iterable[SharedCause]) -> dict[str, str]:
    """case id -> the key of the shared cause it belongs to."""
    return {case: group.cause.key for group in groups for case in group.cases}
