"""What a failed or skipped check carries to the reports."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


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


@dataclass(frozen=True)
class Failure:
    check_id: str
    rule: str
    tool: str
    message: str
    arguments: Any = None
    response: Any = None

    @property
    def dedup_key(self) -> tuple[str, str, str]:
        return (self.check_id, self.tool, self.message.split(":")[0])

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check_id, "rule": self.rule, "tool": self.tool, "message": self.message,
                "arguments": _jsonable(self.arguments), "response": _jsonable(self.response)}


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)
