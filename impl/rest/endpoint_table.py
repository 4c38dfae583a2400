"""The REST endpoint table, ``spec/rest/endpoints.toml``, loaded with its schemas resolved.

Request and response schemas are the spec's own JSON Schemas (tool input/output schemas reused
by path), made self-contained by inlining every ``$ref``; properties the REST surface takes from
the session (``omit``) are removed from the advertised request schema. Routes and the OpenAPI
document are both built from what ``load_table`` answers.
"""

from __future__ import annotations

import copy
import json
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

SPEC_DIR = Path(__file__).resolve().parents[2] / "spec"
ENDPOINTS_TOML = SPEC_DIR / "rest" / "endpoints.toml"

_DROP_KEYS = ("$schema", "$id", "$defs", "definitions")


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
    tool_input: dict[str, Any] | None = None  # the full input schema (before omit)


def _load_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _pointer(doc: Any, fragment: str) -> Any:
    node = doc
    for part in [p for p in fragment.lstrip("/").split("/") if p]:
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def inline_refs(schema: Any, base: Path, root: Any | None = None, stack: tuple = ()) -> Any:
    """``schema`` with every relative ``$ref`` replaced by its target (recursion refused)."""
    root = schema if root is None else root
    if isinstance(schema, list):
        return [inline_refs(item, base, root, stack) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        ref = schema["$ref"]
        file_part, _, fragment = ref.partition("#")
        target_base, target_root = base, root
        if file_part:
            target_base = (base.parent / file_part).resolve()
            target_root = _load_json(target_base)
        key = (str(target_base), fragment)
        if key in stack:
            raise ValueError(f"recursive $ref {ref} in {base}")
        target = _pointer(target_root, fragment) if fragment else target_root
        resolved = inline_refs(copy.deepcopy(target), target_base, target_root, stack + (key,))
        siblings = {k: v for k, v in schema.items() if k != "$ref"}
        if siblings:
            resolved = {"allOf": [resolved, inline_refs(siblings, base, root, stack)]}
        return _strip(resolved)
    return {k: inline_refs(v, base, root, stack) for k, v in schema.items()}


def _strip(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: v for k, v in schema.items() if k not in _DROP_KEYS}
    return schema


def load_schema(ref: str) -> dict[str, Any]:
    """A spec schema file (path relative to ``spec/``) made self-contained."""
    path = (SPEC_DIR / ref).resolve()
    return _strip(inline_refs(_load_json(path), path))


def _without(schema: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    if not names:
        return schema
    schema = copy.deepcopy(schema)
    for name in names:
        schema.get("properties", {}).pop(name, None)
        if name in schema.get("required", []):
            schema["required"] = [r for r in schema["required"] if r != name]
    return schema


def _schema(row: dict[str, Any], key: str) -> dict[str, Any] | None:
    if f"{key}_schema" in row:
        return row[f"{key}_schema"]
    if key in row:
        return load_schema(row[key])
    return None


def load_table(path: Path = ENDPOINTS_TOML) -> tuple[dict[str, Any], list[Endpoint]]:
    """The ``[api]`` header and the endpoints, schemas resolved."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    endpoints = []
    for row in data["endpoint"]:
        omit = tuple(row.get("omit", ()))
        request = _schema(row, "request")
        endpoints.append(
            Endpoint(
                method=row["method"].upper(),
                path=row["path"],
                operation_id=row["operation_id"],
                summary=row["summary"],
                tag=row.get("tag", ""),
                auth=row.get("auth", "session"),
                tool=row.get("tool"),
                request=_without(request, omit) if request is not None else None,
                response=_schema(row, "response"),
                accepted=_schema(row, "accepted"),
                errors=tuple(row.get("errors", ())),
                omit=omit,
                tool_input=request,
            )
        )
    return data["api"], endpoints


@lru_cache(maxsize=4)
def cached_table(path: Path = ENDPOINTS_TOML) -> tuple[dict[str, Any], list[Endpoint]]:
    """``load_table`` once per process (the spec does not change while serving)."""
    return load_table(path)
