"""The REST endpoint table, as codegen wrote it to ``generated/rest_endpoints.json``.

``spec/rest/endpoints.toml`` is the source; codegen resolves every schema (tool input and output
schemas reused by path, ``omit`` properties removed from request bodies) so the server never reads
``spec/`` at run time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any


@dataclass(frozen=True)
class Endpoint:
    """One row of the endpoint table."""

    method: str
    path: str
    operation_id: str
    summary: str
    tag: str
    auth: str                       # none | session | sysadmin
    tool: str | None
    request: dict[str, Any] | None  # self-contained schema (omit applied), None = no body
    response: dict[str, Any] | None
    accepted: dict[str, Any] | None
    errors: tuple[int, ...]
    omit: tuple[str, ...] = field(default=())

    @property
    def tool_input(self) -> dict[str, Any] | None:
        """The tool's full input schema (before ``omit``)."""
        if self.tool is None:
            return None
        from knowspec.generated.registry import BY_NAME

        return BY_NAME[self.tool].input_schema


def load_table() -> tuple[dict[str, Any], list[Endpoint]]:
    """The ``[api]`` header and the endpoints."""
    data = json.loads((resources.files("knowspec.generated") / "rest_endpoints.json").read_text(encoding="utf-8"))
    endpoints = [
        Endpoint(
            method=row["method"], path=row["path"], operation_id=row["operation_id"], summary=row["summary"],
            tag=row["tag"], auth=row["auth"], tool=row["tool"], request=row["request"], response=row["response"],
            accepted=row["accepted"], errors=tuple(row["errors"]), omit=tuple(row["omit"]),
        )
        for row in data["endpoints"]
    ]
    return data["api"], endpoints


@lru_cache(maxsize=1)
def cached_table() -> tuple[dict[str, Any], list[Endpoint]]:
    """``load_table`` once per process (generated files do not change while serving)."""
    return load_table()
