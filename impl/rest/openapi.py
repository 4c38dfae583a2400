"""The OpenAPI 3.1 document of the REST surface, built from the endpoint table.

Codegen will write the same document to ``generated/openapi.json``; until then the server builds
it at start-up and serves it at ``GET /openapi.json``. Every error status of every operation
answers the error envelope (``components/schemas/ErrorEnvelope``); the session is an HTTP bearer
token.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from knowspec.impl.rest.endpoint_table import ENDPOINTS_TOML, load_schema, load_table

_REASONS = {
    200: "Success", 202: "Accepted, nothing changed", 400: "Bad request", 401: "No valid session",
    403: "Not allowed for this session", 404: "Not found", 405: "Method not allowed",
    409: "Not possible in this server state (no model pack)", 415: "Body is not JSON",
    500: "Server or storage failure", 503: "Deadline passed, call cancelled",
}


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
def cached_openapi(path: Path = ENDPOINTS_TOML) -> dict[str, Any]:
    return build_openapi(path)
