"""Help*/Doc* endpoints: the same handlers as the MCP tools, called as the session's user.

A REST call differs from an MCP call only in who is calling: the ``Caller`` is the session's
user, roles and database with ``unrestricted=False``, so the tools filter by the ACL; the
``database`` argument of doc_* tools is the session's database, never the body's. The body is
validated against the tool's input schema (minus the session-owned properties) first.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse

from knowspec.impl.context import CallContext, ToolOutput
from knowspec.impl.errors import ToolError, not_implemented
from knowspec.impl.rest.endpoint_table import Endpoint
from knowspec.impl.rest.session_endpoints import require_session
from knowspec.impl.rest.sessions import SessionStore
from knowspec.impl.rest.validation import integral_floats_to_int, parse_json_body, validate_body

TOOLS_MODULE = "knowspec.impl.docpool.tools"


class ToolArgs:
    """Handler arguments: schema property names as attributes, schema defaults applied."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)

    def model_dump(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def __repr__(self) -> str:
        return f"ToolArgs({self.__dict__!r})"


def tool_args(input_schema: dict[str, Any], body: dict[str, Any]) -> ToolArgs:
    """``body`` completed with every property of ``input_schema`` (default, else ``None``)."""
    values = {}
    for name, prop in input_schema.get("properties", {}).items():
        values[name] = body[name] if name in body else prop.get("default") if isinstance(prop, dict) else None
    return ToolArgs(values)


def resolve_handler(tool: str) -> Callable[[Any, CallContext], ToolOutput]:
    try:
        module = importlib.import_module(TOOLS_MODULE)
    except ImportError:
        raise not_implemented(tool) from None
    handler = getattr(module, tool, None)
    if handler is None:
        raise not_implemented(tool)
    return handler


async def call_tool(
    request: Request, endpoint: Endpoint, settings, sessions: SessionStore
) -> JSONResponse:
    session = require_session(request, sessions)
    body = parse_json_body(await request.body(), request.headers.get("content-type"))
    assert endpoint.request is not None and endpoint.tool is not None
    validate_body(endpoint.request, body)
    body = integral_floats_to_int(body)
    full_schema = endpoint.tool_input or {}
    if "database" in full_schema.get("properties", {}):
        body["database"] = session.database
    args = tool_args(full_schema, body)
    handler = resolve_handler(endpoint.tool)
    ctx = CallContext(caller=session.caller(), settings=settings)
    output = await run_with_deadline(handler, args, ctx, settings, endpoint.tool)
    return JSONResponse(output.structured)


async def run_with_deadline(handler, args, ctx: CallContext, settings, tool: str) -> ToolOutput:
    """Run the handler in a worker thread; past the deadline, flag it cancelled and answer 503."""
    timeout = getattr(settings, "call_timeout_seconds", None) or None
    try:
        with anyio.fail_after(timeout):
            return await anyio.to_thread.run_sync(handler, args, ctx, abandon_on_cancel=True)
    except TimeoutError:
        ctx.cancel_event.set()
        raise ToolError(
            "operation_cancelled", f"{tool} exceeded {timeout} s", retryable=True
        ) from None
