"""One Starlette app: streamable HTTP MCP at ``/mcp`` and the REST surface beside it."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from knowspec.impl.rest.envelope import EXCEPTION_HANDLERS
from knowspec.impl.rest.routes import rest_routes
from knowspec.impl.server.mcp_server import build_server
from knowspec.impl.server.pipeline import ToolRuntime


def build_app(runtime: ToolRuntime, *, host: str = "127.0.0.1", dns_rebinding_protection: bool = True) -> Starlette:
    """The SDK builds the app (and runs its session manager in the lifespan); REST rides along.

    REST shares the runtime, so a Help*/Doc* request goes through the same call pipeline as an
    MCP ``tools/call``; every HTTP error body, framework ones included, is the error envelope.
    """
    from mcp.server.transport_security import TransportSecuritySettings

    server = build_server(runtime)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "tools": len(runtime.order),
                             "implemented": sum(runtime.implemented().values())})

    routes: list[BaseRoute] = [
        Route("/healthz", health, methods=["GET"]),
        *rest_routes(runtime.settings, runtime=runtime),
    ]
    security = None if dns_rebinding_protection else TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app = server.streamable_http_app(
        streamable_http_path="/mcp", transport_security=security, host=host, custom_starlette_routes=routes,
    )
    for exc_class, handler in EXCEPTION_HANDLERS.items():
        app.add_exception_handler(exc_class, handler)
    return app
