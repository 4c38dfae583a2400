"""Help*/Doc* endpoints: the MCP call pipeline, called as the session's user.

A REST call differs from an MCP call only in who is calling: the ``Caller`` is the session's
user, roles and database with ``unrestricted=False``, so the tools filter by the ACL, and the
``database`` argument of doc_* tools is the session's database, never the body's. The body is
first checked against the advertised REST schema (the tool's input schema minus session-owned
properties); then ``ToolRuntime.call`` runs exactly what an MCP ``tools/call`` runs (argument
walk, schema validation, generated input model, handler in a worker thread with the deadline,
output validation), and an ``isError`` result becomes the envelope with its HTTP status.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse

from knowspec.impl.rest.endpoint_table import Endpoint
from knowspec.impl.rest.error_responses import STATUS_BY_CODE
from knowspec.impl.rest.session_endpoints import require_session
from knowspec.impl.rest.sessions import Session, SessionStore
from knowspec.impl.rest.validation import integral_floats_to_int, parse_json_body, validate_body
from knowspec.impl.server.pipeline import ToolRuntime


def tool_arguments(endpoint: Endpoint, body: dict, session: Session) -> dict:
    """The MCP arguments for a REST body: session-owned properties filled from the session."""
    arguments = integral_floats_to_int(dict(body))
    properties = (endpoint.tool_input or {}).get("properties", {})
    if "database" in endpoint.omit and "database" in properties and session.database:
        arguments["database"] = session.database
    return arguments


async def call_tool(
    request: Request, endpoint: Endpoint, sessions: SessionStore, runtime: ToolRuntime
) -> JSONResponse:
    session = await require_session(request, sessions)
    body = parse_json_body(await request.body(), request.headers.get("content-type"))
    assert endpoint.request is not None and endpoint.tool is not None
    validate_body(endpoint.request, body)
    result = await runtime.call(
        endpoint.tool, tool_arguments(endpoint, body, session), session.caller()
    )
    content = result.structured_content or {}
    if result.is_error:
        return JSONResponse(content, status_code=STATUS_BY_CODE.get(str(content.get("code")), 400))
    return JSONResponse(content)
