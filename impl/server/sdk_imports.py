"""Import the ``mcp`` SDK's server modules without its package-level re-exports.

``import mcp.types`` first runs ``mcp/__init__.py``, which imports the whole client side (the
client session and its in-memory transport, the stdio client, session groups), and the
``mcp.server`` package's ``__init__`` imports ``MCPServer`` and its resource and prompt
managers. A server reads none of them, yet they were 11 MiB of an idle stdio server's resident
size (73 -> 62 MiB, measured with ``benchmarks/okf_cold_memory.py``'s idle figure).

:func:`defer_package_inits` puts those two packages in ``sys.modules`` as modules whose own
``__init__`` has not run: a submodule (``mcp.types``, ``mcp.server.lowlevel``) imports as usual,
and the first read of any other attribute (``from mcp import ClientSession``) runs the package's
real ``__init__`` into the same module object, so every importer sees the package it expects.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType
from typing import Any

PACKAGES = ("mcp", "mcp.server")  # parents first


def _deferred(name: str) -> ModuleType | None:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return None
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def __getattr__(attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        if importlib.util.find_spec(f"{name}.{attr}") is not None:  # a submodule: no need for the rest
            return importlib.import_module(f"{name}.{attr}")
        # Anything else is one of the package's re-exports: run its ``__init__`` now, once.
        delattr(module, "__getattr__")
        loader.exec_module(module)
        return getattr(module, attr)

    setattr(module, "__getattr__", __getattr__)
    return module


def defer_package_inits() -> None:
    """Install the deferred packages, unless the SDK is already imported (then nothing changes)."""
    if PACKAGES[0] in sys.modules:
        return
    for name in PACKAGES:
        module = _deferred(name)
        if module is None:
            return
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)


# What ``mcp.server.lowlevel.server`` imports at its top for ``Server.streamable_http_app`` and
# ``Server.session_manager`` alone: Starlette and its middleware, the OAuth routes, the
# streamable-HTTP session manager (which brings sse-starlette, uvicorn and click). A stdio server
# never calls either, yet they were 7 MiB of its idle resident size.
SERVER_MODULE = "mcp.server.lowlevel.server"
HTTP_ONLY_IMPORTS: dict[str, tuple[str, ...]] = {
    "starlette.applications": ("Starlette",),
    "starlette.middleware": ("Middleware",),
    "starlette.middleware.authentication": ("AuthenticationMiddleware",),
    "starlette.routing": ("Mount", "Route"),
    "mcp.server.auth.middleware.auth_context": ("AuthContextMiddleware",),
    "mcp.server.auth.middleware.bearer_auth": ("BearerAuthBackend", "RequireAuthMiddleware"),
    "mcp.server.auth.provider": ("OAuthAuthorizationServerProvider", "TokenVerifier"),
    "mcp.server.auth.routes": ("build_resource_metadata_url", "create_auth_routes", "create_protected_resource_routes"),
    "mcp.server.auth.settings": ("AuthSettings",),
    "mcp.server.streamable_http": ("EventStore",),
    "mcp.server.streamable_http_manager": ("DEFAULT_MAX_SESSIONS", "DEFAULT_SESSION_IDLE_TIMEOUT",
                                           "StreamableHTTPASGIApp", "StreamableHTTPSessionManager"),
    "mcp.server.transport_security": ("DEFAULT_MAX_REQUEST_BODY_SIZE", "TransportSecuritySettings"),
}


class HttpStackNotLoaded:
    """Stands in, inside the low-level server module of a stdio process, for one name of the
    HTTP stack: using it says so instead of serving HTTP half-configured."""

    def __init__(self, name: str) -> None:
        self.name = name

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{self.name}: this stdio process imported the MCP server without its HTTP stack")

    __call__ = _refuse

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        self._refuse()


def import_server_without_http() -> bool:
    """Import the SDK's low-level ``Server`` for a process that serves stdio for life, with the
    HTTP-only names of its module stood in for (:class:`HttpStackNotLoaded`); True if it did.

    Nothing changes when the module is already imported, or when the SDK's imports no longer
    match :data:`HTTP_ONLY_IMPORTS` (then the module is imported as usual). The stand-ins live
    only in that module's globals: a later ``import starlette.routing`` gets the real module.
    """
    if SERVER_MODULE in sys.modules:
        return False
    defer_package_inits()
    stood_in = [name for name in HTTP_ONLY_IMPORTS if name not in sys.modules]
    for name in stood_in:
        module = ModuleType(name)
        for attr in HTTP_ONLY_IMPORTS[name]:
            setattr(module, attr, HttpStackNotLoaded(f"{name}.{attr}"))
        sys.modules[name] = module
    try:
        importlib.import_module(SERVER_MODULE)
        return True
    except Exception:  # the SDK imports or uses something else now (any error): import it whole
        for name in [m for m in sys.modules if m == "mcp.server.lowlevel" or m.startswith("mcp.server.lowlevel.")]:
            sys.modules.pop(name, None)
        return False
    finally:
        for name in stood_in:
            sys.modules.pop(name, None)
