"""The REST OpenAPI 3.1 document, built from spec/rest/endpoints.toml.

Every schema is embedded with its ``$defs`` hoisted into ``components/schemas`` under names
scoped by operation and role (``doc_search.request.Link``), so two endpoints whose definitions
share a name can never shadow each other.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

from knowspec.codegen.model import SpecModel

STATUS_TEXT = {
    200: "OK", 409: "Not possible in this server state (e.g. no model pack)", 202: "Accepted but not done: result false with a message, target untouched",
    400: "Bad request: arguments missing or not matching the schema", 401: "No valid session",
    403: "The session's roles do not allow this", 404: "Not found (an item the caller may not see answers the same)",
    405: "Method not allowed", 415: "Body is not JSON", 422: "Arguments do not match the schema",
    500: "The server failed", 503: "A dependency (pool, model) is unavailable",
}


def _strip(schema: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k not in ("$schema", "$id")}


def _embed(schema: dict[str, Any], scope: str, components: dict[str, Any]) -> dict[str, Any]:
    schema = _strip(schema)
    defs = schema.pop("$defs", {})
    names = {name: f"{scope}.{name}" for name in defs}

    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            out = {}
            for key, value in node.items():
                if key == "$ref" and isinstance(value, str) and value.startswith("#/$defs/"):
                    out[key] = f"#/components/schemas/{names[value.split('/')[-1]]}"
                else:
                    out[key] = rewrite(value)
            return out
        if isinstance(node, list):
            return [rewrite(v) for v in node]
        return node

    for name, value in defs.items():
        components[names[name]] = rewrite(value)
    return rewrite(schema)


def openapi_document(spec: SpecModel) -> dict[str, Any]:
    components: dict[str, Any] = {}
    components["ErrorEnvelope"] = _embed(spec.error_schema, "ErrorEnvelope", components)
    paths: dict[str, Any] = {}
    for ep in spec.endpoints:
        op: dict[str, Any] = {"operationId": ep.operation_id, "summary": ep.summary}
        if ep.tag:
            op["tags"] = [ep.tag]
        op["security"] = [] if ep.auth == "none" else [{"session": []}]
        if ep.request is not None:
            # A session endpoint whose arguments are all optional also takes no body at all.
            required = ep.auth != "session" or not Draft202012Validator(ep.request).is_valid({})
            op["requestBody"] = {"required": required, "content": {"application/json": {
                "schema": _embed(ep.request, f"{ep.operation_id}.request", components)}}}
        responses: dict[str, Any] = {}
        ok: dict[str, Any] = {"description": STATUS_TEXT[200]}
        if ep.response is not None:
            ok["content"] = {"application/json": {"schema": _embed(ep.response, f"{ep.operation_id}.response", components)}}
        responses["200"] = ok
        if ep.accepted is not None:
            responses["202"] = {"description": STATUS_TEXT[202], "content": {"application/json": {
                "schema": _embed(ep.accepted, f"{ep.operation_id}.accepted", components)}}}
        for status in sorted(set(ep.errors) | ({401} if ep.auth != "none" else set()) | ({403} if ep.auth == "sysadmin" else set())):
            responses[str(status)] = {"description": STATUS_TEXT.get(status, "Error"), "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/ErrorEnvelope"}}}}
        op["responses"] = responses
        paths.setdefault(ep.path, {})[ep.method.lower()] = op
    info = {"title": spec.api.get("title", "knowspec REST"), "version": str(spec.api.get("version", "0.1.0"))}
    if spec.api.get("description"):
        info["description"] = spec.api["description"]
    return {
        "openapi": "3.1.0",
        "info": info,
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"session": {"type": "http", "scheme": "bearer"}},
        },
    }


def rest_endpoint_table(spec: SpecModel) -> dict[str, Any]:
    """The endpoint table the REST routes are built from at run time (schemas self-contained)."""
    return {
        "api": spec.api,
        "endpoints": [
            {
                "method": ep.method, "path": ep.path, "operation_id": ep.operation_id, "summary": ep.summary,
                "tag": ep.tag, "auth": ep.auth, "tool": ep.tool, "omit": list(ep.omit),
                "request": ep.request, "response": ep.response, "accepted": ep.accepted, "errors": list(ep.errors),
            }
            for ep in spec.endpoints
        ],
    }
