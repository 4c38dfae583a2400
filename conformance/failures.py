"""What a failed or skipped check carries to the reports."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

# Words several checks put in their failure messages for one cross-cutting fault of a target;
# causes.py groups a run's failures by them, so a report names such a fault once.
NO_STRUCTURE = "it succeeded without a structuredContent object (the contract gives every success one)"
NO_SUCCESS_STRUCTURE = "successful result has no structuredContent object"
NO_ENVELOPE = "isError result has no structuredContent envelope"
TRANSPORT_FAILURE = "transport failure"
RPC_INSTEAD = "instead of a tool result"
REFUSED = "it failed"  # a call meant to succeed got an error: "it failed (<code>: <message>)"


class CheckFailed(AssertionError):
    """A contract rule was broken; carries the (smallest) input and the response it got."""

    def __init__(self, message: str, *, arguments: Any = None, response: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.arguments = arguments
        self.response = response


class CheckSkipped(Exception):
    """The check does not apply to this target or tool; the reason goes into the report."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CaseAborted(BaseException):
    """Ends a case at once with ``status`` ("failed" or "skipped"): the target left a call
    unanswered, or the run's time budget ran out during a call.

    A ``BaseException`` on purpose: hypothesis shrinks on ``Exception``, and shrinking would
    repeat the unanswered call (a full deadline each time) on a session that is already gone.
    """

    def __init__(self, status: str, message: str, *, arguments: Any = None, response: Any = None) -> None:
        super().__init__(message)
        self.status, self.message = status, message
        self.arguments, self.response = arguments, response


@dataclass(frozen=True)
class Failure:
    check_id: str
    rule: str
    tool: str
    message: str
    arguments: Any = None
    response: Any = None

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check_id, "rule": self.rule, "tool": self.tool, "message": self.message,
                "arguments": _jsonable(self.arguments), "response": _jsonable(self.response)}


MAX_EVIDENCE_CHARS = 16_000   # per arguments/response in a report: enough to replay, never megabytes
MAX_STRING, MAX_ITEMS = 400, 20


def _jsonable(value: Any) -> Any:
    try:
        size = len(json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError):
        return repr(value)[:MAX_EVIDENCE_CHARS]
    return value if size <= MAX_EVIDENCE_CHARS else capped(value)


def capped(value: Any, depth: int = 0) -> Any:
    """``value`` with long strings, long arrays and deep nesting cut, each cut saying what it left out."""
    if isinstance(value, str):
        return value if len(value) <= MAX_STRING else value[:MAX_STRING] + f"…(+{len(value) - MAX_STRING} chars)"
    if depth > 12:
        return "…(deeper levels left out)"
    if isinstance(value, list):
        kept = [capped(v, depth + 1) for v in value[:MAX_ITEMS]]
        return kept + ([f"…(+{len(value) - MAX_ITEMS} items)"] if len(value) > MAX_ITEMS else [])
    if isinstance(value, dict):
        items = list(value.items())
        kept = {str(k): capped(v, depth + 1) for k, v in items[:MAX_ITEMS * 5]}
        if len(items) > MAX_ITEMS * 5:
            kept["…"] = f"+{len(items) - MAX_ITEMS * 5} keys"
        return kept
    return value
