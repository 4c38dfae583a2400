"""The MCP server: the low-level ``mcp`` 2.x ``Server`` over the tool runtime.

``tools/list`` comes straight from the generated registry (stable order, raw schemas);
``tools/call`` goes through ``ToolRuntime.call``. An unknown tool is a protocol fault and the
only tool-call failure answered as a JSON-RPC error (-32602).
"""

from __future__ import annotations

import contextlib
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, cast

import mcp.types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from knowspec.impl.context import Caller
from knowspec.impl.server.parked_answers import ParkedAnswers
from knowspec.impl.server.request_ids import IdsInFlight
from knowspec.impl.server.pipeline import Admission, AdmissionRefused, ToolRuntime

BUSY = -32000  # JSON-RPC's range for server-defined errors: the caller has too much in flight

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server


def server_class() -> type[Server]:
    """The SDK's low-level ``Server`` (this module's ``Server``, which a host may replace),
    imported at first use: ``serve_stdio`` imports it without the HTTP stack first."""
    found = globals().get("Server")
    if found is None:
        from mcp.server.lowlevel import Server as found

        globals()["Server"] = found
    return cast("type[Server]", found)


def __getattr__(name: str) -> Any:
    if name == "Server":
        return server_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def parks_answers_for(protocol_version: str) -> bool:
    """Whether a call on a session of this protocol version parks its answer: every era does.
    (The conformance suite's mutant host turns it off: its response mutants edit real results.)"""
    return True


def server_identity(runtime: ToolRuntime) -> tuple[str, str]:
    """(name, version) for serverInfo: the settings' choice, else knowspec and its version."""
    from importlib.metadata import PackageNotFoundError, version

    name, ver = runtime.settings.server_name, runtime.settings.server_version
    if not ver:
        try:
            ver = version("knowspec")
        except PackageNotFoundError:  # running from a source tree that was never installed
            ver = "0+unknown"
    return name, ver


def build_server(runtime: ToolRuntime, caller_for: Any = None, answers: ParkedAnswers | None = None,
                 admission: Admission | None = None, admit_as: Callable[[dict], str] | None = None,
                 ids_in_flight: IdsInFlight | None = None) -> Server:
    """``caller_for(ctx)`` gives the caller identity; by default every MCP caller is unrestricted.

    With ``answers``, a call's answer is encoded in its worker thread and parked there, and the
    SDK carries a placeholder to the transport, which writes the parked bytes
    (``parked_answers.py``); over HTTP it is parked for the request that asked, and dropped if
    that request has ended. ``admission`` (HTTP: ``caller_load.py``) admits each call as
    ``admit_as(scope)`` of the request that asked: its place among its caller's calls in flight
    and its turn at the handlers; a refusal is answered as JSON-RPC error ``BUSY``. ``ids_in_flight``
    (HTTP: ``request_ids.py``) holds each call's session and request id until the call returns.
    """
    tools = runtime.tool_list()
    listing = types.ListToolsResult(tools=tools)

    async def list_tools(ctx: ServerRequestContext, params: Any) -> types.ListToolsResult:
        if getattr(params, "cursor", None) is not None:  # none is ever issued: every tool is on one page
            raise MCPError(code=types.INVALID_PARAMS, message="Invalid params: unknown cursor (tools/list has one page)")
        return listing

    async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in runtime.entries:
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown tool: {params.name}")
        caller = caller_for(ctx) if caller_for else Caller()
        scope = getattr(getattr(ctx, "request", None), "scope", None)  # the HTTP request that asked
        admits, key = None, ""
        if admission is not None and admit_as is not None and scope is not None:  # HTTP
            admits, key = admission, admit_as(scope)
        holding = (ids_in_flight.holding(scope, ctx.request_id) if ids_in_flight is not None and scope is not None
                   else contextlib.nullcontext())
        try:
            with holding:
                if answers is None or ctx.request_id is None or not parks_answers_for(ctx.protocol_version):
                    return await runtime.call(params.name, params.arguments, caller, admission=admits, admit_as=key)
                park = partial(answers.park, protocol_version=ctx.protocol_version, owner=scope)
                return await runtime.call(params.name, params.arguments, caller, park, takes_json=True,
                                          admission=admits, admit_as=key)
        except AdmissionRefused as refused:
            raise MCPError(code=BUSY, message=str(refused)) from None

    name, version = server_identity(runtime)
    return server_class()(
        name,
        version=version,
        instructions=(
            "knowspec serves OKF concept bundles (pass an absolute bundle_path to each OKF tool) "
            "and help/document pools (help_* and doc_* tools). Results are bounded: when a result "
            "says truncated, narrow the query or raise limit; never claim a left-out result was seen."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        # The advertised input schemas, for the 2026-07-28 Mcp-Param header check (else the SDK
        # lists every tool again for each call).
        get_tool_input_schema=lambda tool: runtime.entries[tool].input_schema if tool in runtime.entries else None,
    )


async def serve_stdio(runtime: ToolRuntime) -> None:
    from knowspec.impl.server.sdk_imports import import_server_without_http
    from knowspec.impl.server.stdio_transport import stdio_transport

    import_server_without_http()  # before build_server's import: a stdio server never serves HTTP

    answers = ParkedAnswers(written=runtime.heap.after_answer)
    server = build_server(runtime, answers=answers)
    # At end of input, calls in flight finish (each within the call deadline) and are answered.
    drain = runtime.settings.call_timeout_seconds + 5
    async with stdio_transport(drain_seconds=drain, answers=answers) as (read, write):
        await server.run(read, write, server.create_initialization_options())
