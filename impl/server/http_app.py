"""One Starlette app: streamable HTTP MCP at ``/mcp`` and the REST surface beside it."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from knowspec.impl.server.mcp_server import build_server
from knowspec.impl.server.pipeline import ToolRuntime


def _openapi() -> dict[str, Any]:
    return json.loads((resources.files("knowspec.generated") / "openapi.json").read_text(encoding="utf-8"))


def _rest_routes(runtime: ToolRuntime) -> list[BaseRoute]:
    try:
        from knowspec.impl.rest.routes import rest_routes
    except ModuleNotFoundError:
        return []
    return list(rest_routes(runtime.settings))


def build_app(runtime: ToolRuntime, *, host: str = "127.0.0.1", dns_rebinding_protection: bool = True) -> Starlette:
    """The SDK builds the app (and runs its session manager in the lifespan); REST rides along."""
    from mcp.server.transport_security import TransportSecuritySettings

    server = build_server(runtime)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "tools": len(runtime.order),
                             "implemented": sum(runtime.implemented().values())})

    async def openapi(request: Request) -> JSONResponse:
        return JSONResponse(_openapi())

    routes: list[BaseRoute] = [
        Route("/healthz", health, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        *_rest_routes(runtime),
    ]
    security = TransportSecuritySettings(enable_dns_rebinding_protection=dns_rebinding_protection)
    return server.streamable_http_app(
        streamable_http_path="/mcp",
        transport_security=security if not dns_rebinding_protection else None,
        host=host,
        custom_starlette_routes=routes,
    )
