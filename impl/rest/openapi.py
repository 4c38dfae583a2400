"""The OpenAPI 3.1 document of the REST surface, built from ``spec/rest/endpoints.toml``.

Codegen will write the same document to ``generated/openapi.json``; until then the server builds
it at start-up. Request and response schemas are the spec's own JSON Schemas (tool input/output
schemas reused by path), made self-contained by inlining every ``$ref`` so that the document
needs no external files. Properties the REST surface takes from the session (``omit``) are removed
from the advertised request schema.
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
_REASONS = {
    200: "Success", 202: "Accepted, nothing changed", 400: "Bad request", 401: "No valid session",
    403: "Not allowed for this session", 404: "Not found", 405: "Method not allowed",
    409: "Not possible in this server state (no model pack)", 415: "Body is not JSON",
    500: "Server or storage failure", 503: "Deadline passed, call cancelled",
}


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


def _json_content(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def build_openapi(path: Path = ENDPOINTS_TOML) -> dict[str, Any]:
    """The OpenAPI 3.1 document for the endpoint table."""
    api, endpoints = load_table(path)
    error_ref = {"$ref": "#/components/schemas/ErrorEnvelope"}
    paths: dict[str, Any] = {}
    for ep in endpoints:
        responses: dict[str, Any] = {
            "200": {"description": _REASONS[200], "content": _json_content(ep.response or {})}
        }
        if ep.accepted is not None:
            responses["202"] = {"description": _REASONS[202], "content": _json_content(ep.accepted)}
        for status in ep.errors:
            responses[str(status)] = {
                "description": _REASONS.get(status, "Error"), "content": _json_content(error_ref)
            }
        operation: dict[str, Any] = {
            "operationId": ep.operation_id,
            "summary": ep.summary,
            "tags": [ep.tag] if ep.tag else [],
            "responses": responses,
            "security": [] if ep.auth == "none" else [{"session": []}],
        }
        if ep.auth == "sysadmin":
            operation["description"] = "Requires a session whose user holds the SYSADMIN role."
        if ep.request is not None:
            operation["requestBody"] = {
                "required": ep.auth != "session" or bool(ep.request.get("required")),
                "content": _json_content(ep.request),
            }
        paths.setdefault(ep.path, {})[ep.method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": api["title"], "version": api["version"], "description": api["description"]},
        "paths": paths,
        "components": {
            "schemas": {"ErrorEnvelope": load_schema(api["error_schema"])},
            "securitySchemes": {
                "session": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "token answered by POST /ClientREST/Login",
                }
            },
        },
    }


@lru_cache(maxsize=4)
def cached_table(path: Path = ENDPOINTS_TOML) -> tuple[dict[str, Any], list[Endpoint]]:
    """``load_table`` once per process (the spec does not change while serving)."""
    return load_table(path)


@lru_cache(maxsize=4)
def cached_openapi(path: Path = ENDPOINTS_TOML) -> dict[str, Any]:
    return build_openapi(path)
