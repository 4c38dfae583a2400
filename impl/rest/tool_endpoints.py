"""Help*/Doc* endpoints: the MCP call pipeline, called as the session's user.

A REST call differs from an MCP call only in who is calling: the ``Caller`` is the session's
user, roles and database with ``unrestricted=False``, so the tools filter by the ACL, and the
``database`` argument of doc_* tools is the session's database, never the body's. The body is
first checked against the advertised REST schema (the tool's input schema minus session-owned
properties); then ``ToolRuntime.call`` runs exactly what an MCP ``tools/call`` runs (argument
walk, schema validation, generated input model, handler in a worker thread with the deadline,
output validation), and an ``isError`` result becomes the envelope with its HTTP status.

As over MCP, nothing of the call runs on the event loop: the body is decoded and checked in a
worker thread under the call deadline, and the answer is encoded in the call's worker thread.
"""

from __future__ import annotations

import anyio
import mcp.types as types
from starlette.requests import Request
from starlette.responses import Response

from knowspec.impl.errors import ToolError
from knowspec.impl.rest.endpoint_table import Endpoint
from knowspec.impl.rest.error_responses import STATUS_BY_CODE, tool_error_response
from knowspec.impl.rest.session_endpoints import require_session
from knowspec.impl.rest.sessions import Session, SessionStore
from knowspec.impl.rest.validation import integral_floats_to_int, parse_json_body, validate_body
from knowspec.impl.server.parked_answers import encoded
from knowspec.impl.server.pipeline import Admission, AdmissionRefused, ToolRuntime
from knowspec.impl.server.session_quota import user_key


def tool_arguments(endpoint: Endpoint, body: dict, session: Session) -> dict:
    """The MCP arguments for a REST body: session-owned properties filled from the session."""
    arguments = integral_floats_to_int(dict(body))
    properties = (endpoint.tool_input or {}).get("properties", {})
    if "database" in endpoint.omit and "database" in properties and session.database:
        arguments["database"] = session.database
    return arguments


def checked_arguments(endpoint: Endpoint, raw: bytes, content_type: str | None, session: Session) -> dict:
    """The call's arguments from a raw REST body: decoded, checked against the REST schema, filled."""
    assert endpoint.request is not None
    body = parse_json_body(raw, content_type)
    validate_body(endpoint.request, body)
    return tool_arguments(endpoint, body, session)


def rest_answer(result: types.CallToolResult) -> Response:
    """A result as its REST response: the structured content (the envelope for an error), in the
    bytes ``JSONResponse`` would write."""
    content = result.structured_content or {}
    status = STATUS_BY_CODE.get(str(content.get("code")), 400) if result.is_error else 200
    return Response(b"".join(encoded(content, ensure_ascii=False)), status_code=status, media_type="application/json")


async def call_tool(
    request: Request, endpoint: Endpoint, sessions: SessionStore, runtime: ToolRuntime,
    admission: Admission | None = None,
) -> Response:
    session = await require_session(request, sessions)
    assert endpoint.tool is not None
    raw = await request.body()
    try:
        with anyio.fail_after(runtime.settings.call_timeout_seconds):
            arguments = await anyio.to_thread.run_sync(
                checked_arguments, endpoint, raw, request.headers.get("content-type"), session, abandon_on_cancel=True)
    except TimeoutError:
        return tool_error_response(ToolError("operation_cancelled", f"{endpoint.tool} request was cancelled",
                                             retryable=True))
    try:
        return await runtime.call(endpoint.tool, arguments, session.caller(), rest_answer, admission=admission,
                                  admit_as=user_key(session.user))
    except AdmissionRefused as refused:
        response = tool_error_response(ToolError("rate_limited", str(refused), retryable=True))
        response.headers["Retry-After"] = "1"
        return response
