"""The REST routes the HTTP app mounts beside ``/mcp``, built from the endpoint table.

``rest_routes(settings)`` answers Starlette routes; the parent app must also install
``EXCEPTION_HANDLERS`` (``impl/rest/error_responses.py``) so that framework 404/405 answers carry the
error envelope. ``rest_app(settings)`` is that pairing as a stand-alone app (tests, schemathesis).
"""

from __future__ import annotations

from typing import Awaitable, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from knowspec.impl.errors import ToolError
from knowspec.impl.rest import admin, session_endpoints, tool_endpoints
from knowspec.impl.rest.error_responses import EXCEPTION_HANDLERS, tool_error_response
from knowspec.impl.rest.endpoint_table import Endpoint, cached_table
from knowspec.impl.rest.openapi import cached_openapi
from knowspec.impl.rest.sessions import SessionStore
from knowspec.impl.server.pipeline import Admission, ToolRuntime

Handler = Callable[[Request], Awaitable[Response]]


def _guarded(handler: Handler) -> Handler:
    """Turn a ``ToolError`` raised anywhere in ``handler`` into the envelope response."""

    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except ToolError as exc:
            return tool_error_response(exc)

    endpoint.__name__ = getattr(handler, "__name__", "endpoint")
    return endpoint


def _handler_for(ep: Endpoint, settings, sessions: SessionStore, runtime: ToolRuntime,
                 admission: Admission | None = None) -> Handler:
    if ep.operation_id == "login":
        assert ep.request is not None
        schema = ep.request
        return lambda request: session_endpoints.login(request, settings, sessions, schema)
    if ep.operation_id == "logout":
        return lambda request: session_endpoints.logout(request, sessions)
    if ep.operation_id == "exec_command":
        return lambda request: admin.exec_command(request, ep, settings, sessions)
    if ep.tool:
        return lambda request: tool_endpoints.call_tool(request, ep, sessions, runtime, admission)
    raise ValueError(f"endpoint {ep.operation_id} has no handler")


def rest_routes(
    settings, sessions: SessionStore | None = None, runtime: ToolRuntime | None = None,
    admission: Admission | None = None,
) -> list[BaseRoute]:
    """Every endpoint of ``spec/rest/endpoints.toml`` plus ``GET /openapi.json``.

    ``runtime`` is the MCP call pipeline the Help*/Doc* endpoints go through (the server's own,
    when the HTTP app passes it; a new one over ``settings`` otherwise), admitted by the same
    ``admission`` as MCP tool calls (each call counted for its session's user, taking turns).
    """
    if sessions is None:
        sessions = SessionStore.from_settings(settings)
    if runtime is None:
        runtime = ToolRuntime(settings)
    _, endpoints = cached_table()
    document = cached_openapi()
    by_path: dict[str, dict[str, Handler]] = {}
    for ep in endpoints:
        handler = _handler_for(ep, settings, sessions, runtime, admission)
        by_path.setdefault(ep.path, {})[ep.method] = _guarded(handler)
    routes: list[BaseRoute] = [
        Route(path, _dispatch(methods), methods=sorted(methods), name=path)
        for path, methods in by_path.items()
    ]

    async def openapi(request: Request) -> Response:
        return JSONResponse(document)

    routes.append(Route("/openapi.json", openapi, methods=["GET"], name="openapi"))
    return routes


def _dispatch(methods: dict[str, Handler]) -> Handler:
    """One route per path, so that a 405 names every allowed method in ``Allow``."""

    async def endpoint(request: Request) -> Response:
        return await methods[request.method](request)

    return endpoint


def rest_app(
    settings, sessions: SessionStore | None = None, runtime: ToolRuntime | None = None
) -> Starlette:
    return Starlette(
        routes=rest_routes(settings, sessions, runtime), exception_handlers=EXCEPTION_HANDLERS
    )
