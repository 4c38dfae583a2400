"""The raw-argument walk that runs before schema validation (spec/okf/contract/read.md §3.0 step 2).

JSON decoding already happened in the transport, so what is left to refuse is what JSON
cannot faithfully carry (lone surrogates, NaN) and what is too big to validate safely.
"""

from __future__ import annotations

import math
from typing import Any

from knowspec.impl.errors import ToolError

MAX_DEPTH = 64
MAX_VALUES = 100_000
MAX_ESTIMATED_BYTES = 64 * 1024 * 1024
LIMIT_MESSAGE = "MCP bundle resource limit exceeded"


def _valid_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def walk_arguments(arguments: Any, budget: dict[str, int] | None = None) -> int:
    """Raise ``invalid_request`` or ``resource_limit`` for arguments no tool may receive.

    Recursion is bounded by ``MAX_DEPTH``; a cycle is a container that contains itself (a
    container shared by two branches is fine). Returns the estimated size in bytes; a caller's
    ``budget`` ({"values": 0, "bytes": 0}) also shows how far a refused walk got.
    """
    budget = {"values": 0, "bytes": 0} if budget is None else budget
    _walk(arguments, 1, set(), budget)
    return budget["bytes"]


def _charge(budget: dict[str, int], size: int) -> None:
    budget["values"] += 1
    budget["bytes"] += size
    if budget["values"] > MAX_VALUES or budget["bytes"] > MAX_ESTIMATED_BYTES:
        raise ToolError("resource_limit", LIMIT_MESSAGE)


def _walk(value: Any, depth: int, ancestors: set[int], budget: dict[str, int]) -> None:
    if depth > MAX_DEPTH:
        raise ToolError("resource_limit", LIMIT_MESSAGE)
    if isinstance(value, (dict, list)):
        if id(value) in ancestors:
            raise ToolError("invalid_request", "MCP arguments contain a reference cycle")
        _charge(budget, 2)
        ancestors.add(id(value))
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise ToolError("invalid_request", "MCP argument maps must use string keys")
                if not _valid_utf8(key):
                    raise ToolError("invalid_request", "MCP argument key contains invalid UTF-8")
                budget["bytes"] += len(key) + 4
                _walk(item, depth + 1, ancestors, budget)
        else:
            for item in value:
                _walk(item, depth + 1, ancestors, budget)
        ancestors.discard(id(value))
    elif isinstance(value, str):
        if not _valid_utf8(value):
            raise ToolError("invalid_request", "MCP arguments contain invalid UTF-8")
        _charge(budget, len(value) + 2)
    elif isinstance(value, bool) or value is None:
        _charge(budget, 5)
    elif isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise ToolError("invalid_request", "MCP arguments contain values unsupported by JSON")
        _charge(budget, 24)
    else:
        raise ToolError("invalid_request", "MCP arguments contain values unsupported by JSON")
