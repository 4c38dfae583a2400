"""The raw-argument walk that runs before schema validation (spec/okf/contract/read.md §3.0 step 2).

JSON decoding already happened in the transport, so what is left to refuse is what JSON
cannot faithfully carry (lone surrogates, NaN) and what is too big to validate safely.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from knowspec.impl.errors import ToolError

MAX_DEPTH = 64
MAX_VALUES = 100_000
MAX_ESTIMATED_BYTES = 64 * 1024 * 1024
LIMIT_MESSAGE = "MCP bundle resource limit exceeded"


@dataclass(frozen=True)
class Wording:
    """The refusals' messages: the MCP tools' are upstream's exact words (gaps.md §3.2); a REST
    caller sent a request body, not MCP arguments."""

    cycle: str
    key_type: str
    text: str
    key_text: str
    unsupported: str
    limit: str


MCP_WORDING = Wording(
    cycle="MCP arguments contain a reference cycle",
    key_type="MCP argument maps must use string keys",
    text="MCP arguments contain invalid UTF-8",
    key_text="MCP argument key contains invalid UTF-8",
    unsupported="MCP arguments contain values unsupported by JSON",
    limit=LIMIT_MESSAGE,
)
REST_WORDING = Wording(
    cycle="request body contains a reference cycle",
    key_type="request body maps must use string keys",
    text="request body contains invalid UTF-8",
    key_text="request body key contains invalid UTF-8",
    unsupported="request body contains values unsupported by JSON",
    limit="request body exceeds the resource limits",
)


def _valid_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def walk_arguments(arguments: Any, budget: dict[str, int] | None = None, wording: Wording = MCP_WORDING) -> int:
    """Raise ``invalid_request`` or ``resource_limit`` for arguments no tool may receive.

    Recursion is bounded by ``MAX_DEPTH``; a cycle is a container that contains itself (a
    container shared by two branches is fine). Returns the estimated size in bytes; a caller's
    ``budget`` ({"values": 0, "bytes": 0}) also shows how far a refused walk got.
    """
    budget = {"values": 0, "bytes": 0} if budget is None else budget
    _walk(arguments, 1, set(), budget, wording)
    return budget["bytes"]


def _charge(budget: dict[str, int], size: int, wording: Wording) -> None:
    budget["values"] += 1
    budget["bytes"] += size
    if budget["values"] > MAX_VALUES or budget["bytes"] > MAX_ESTIMATED_BYTES:
        raise ToolError("resource_limit", wording.limit)


def _walk(value: Any, depth: int, ancestors: set[int], budget: dict[str, int], wording: Wording) -> None:
    if depth > MAX_DEPTH:
        raise ToolError("resource_limit", wording.limit)
    if isinstance(value, (dict, list)):
        if id(value) in ancestors:
            raise ToolError("invalid_request", wording.cycle)
        _charge(budget, 2, wording)
        ancestors.add(id(value))
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise ToolError("invalid_request", wording.key_type)
                if not _valid_utf8(key):
                    raise ToolError("invalid_request", wording.key_text)
                budget["bytes"] += len(key) + 4
                _walk(item, depth + 1, ancestors, budget, wording)
        else:
            for item in value:
                _walk(item, depth + 1, ancestors, budget, wording)
        ancestors.discard(id(value))
    elif isinstance(value, str):
        if not _valid_utf8(value):
            raise ToolError("invalid_request", wording.text)
        _charge(budget, len(value) + 2, wording)
    elif isinstance(value, bool) or value is None:
        _charge(budget, 5, wording)
    elif isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise ToolError("invalid_request", wording.unsupported)
        _charge(budget, 24, wording)
    else:
        raise ToolError("invalid_request", wording.unsupported)
