"""The raw-argument walk that runs before schema validation (read.md §3.0 step 2).

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


def walk_arguments(arguments: Any) -> None:
    """Raise ``invalid_request`` or ``resource_limit`` for arguments no tool may receive."""
    count = 0
    size = 0
    seen: set[int] = set()
    stack: list[tuple[Any, int]] = [(arguments, 1)]
    while stack:
        value, depth = stack.pop()
        count += 1
        if count > MAX_VALUES or depth > MAX_DEPTH:
            raise ToolError("resource_limit", LIMIT_MESSAGE)
        if isinstance(value, dict):
            if id(value) in seen:
                raise ToolError("invalid_request", "MCP arguments contain a reference cycle")
            seen.add(id(value))
            size += 2
            for key, item in value.items():
                if not isinstance(key, str):
                    raise ToolError("invalid_request", "MCP argument maps must use string keys")
                if not _valid_utf8(key):
                    raise ToolError("invalid_request", "MCP argument key contains invalid UTF-8")
                size += len(key) + 4
                stack.append((item, depth + 1))
        elif isinstance(value, list):
            if id(value) in seen:
                raise ToolError("invalid_request", "MCP arguments contain a reference cycle")
            seen.add(id(value))
            size += 2
            stack.extend((item, depth + 1) for item in value)
        elif isinstance(value, str):
            if not _valid_utf8(value):
                raise ToolError("invalid_request", "MCP arguments contain invalid UTF-8")
            size += len(value) + 2
        elif isinstance(value, bool) or value is None:
            size += 5
        elif isinstance(value, (int, float)):
            if isinstance(value, float) and not math.isfinite(value):
                raise ToolError("invalid_request", "MCP arguments contain values unsupported by JSON")
            size += 24
        else:
            raise ToolError("invalid_request", "MCP arguments contain values unsupported by JSON")
        if size > MAX_ESTIMATED_BYTES:
            raise ToolError("resource_limit", LIMIT_MESSAGE)
