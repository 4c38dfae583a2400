"""The server imports the SDK's server modules only; the SDK's packages stay whole for every other importer."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
import knowspec.impl.server.mcp_server, knowspec.impl.server.stdio_transport
print(sorted(m for m in ("mcp.client", "mcp.server.mcpserver") if m in sys.modules))
from mcp import ClientSession, stdio_client
from mcp.server import MCPServer, Server
import mcp
print(mcp.ClientSession is ClientSession, mcp.server.Server is Server, mcp.types.Tool.__name__)
"""


def run(script: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    return done.stdout.splitlines()


def test_serving_modules_do_not_import_the_sdk_client_or_mcpserver_yet_its_packages_stay_whole():
    assert run(SCRIPT) == ["[]", "True True Tool"]


def test_an_sdk_imported_first_is_left_as_it_is():
    script = "import mcp, sys\nimport knowspec.impl.server.mcp_server\nprint('mcp.client' in sys.modules)"
    assert run(script) == ["True"]


WITHOUT_HTTP = """
import sys
from knowspec.impl.server.sdk_imports import import_server_without_http
print(import_server_without_http(), import_server_without_http())
print(sorted(m for m in ("starlette", "uvicorn", "mcp.server.streamable_http_manager") if m in sys.modules))
import mcp.server.lowlevel.server as low
try:
    low.Server("x").streamable_http_app()
except RuntimeError as exc:
    print(str(exc))
import starlette.routing
print(type(starlette.routing.Route).__name__, low.Starlette.__class__.__name__)
"""


def test_a_stdio_process_imports_the_server_without_the_http_stack_and_says_so_if_asked_for_it():
    assert run(WITHOUT_HTTP) == [
        "True False", "[]",
        "mcp.server.transport_security.TransportSecuritySettings: this stdio process imported the MCP server "
        "without its HTTP stack",
        "type HttpStackNotLoaded",  # a later import gets the real module; the server module keeps its stand-in
    ]


def test_build_server_uses_the_server_class_a_host_put_in_the_module(monkeypatch):
    from knowspec.impl.server import mcp_server
    from knowspec.impl.server.pipeline import ToolRuntime
    from knowspec.generated import registry

    base = mcp_server.Server  # imported at first read

    class HostServer(base):  # type: ignore[misc,valid-type]
        pass

    monkeypatch.setattr(mcp_server, "Server", HostServer)
    server = mcp_server.build_server(ToolRuntime(entries=registry.TOOLS, handlers={}))
    assert type(server) is HostServer and base.__name__ == "Server"



FALLBACK = """
import importlib
from knowspec.impl.server import sdk_imports
real_import = importlib.import_module

def newer_sdk(name):  # as if a newer SDK used a stood-in name at its import (not an ImportError)
    real_import(name)
    raise TypeError("'HttpStackNotLoaded' object is not subscriptable")

sdk_imports.importlib = type("Fake", (), {"import_module": staticmethod(newer_sdk)})
print(sdk_imports.import_server_without_http())
import sys
from mcp.server.lowlevel import Server
import mcp.server.lowlevel.server as low
print(Server.__name__, type(low.Starlette).__name__, "starlette.routing" in sys.modules)
"""


def test_an_sdk_whose_imports_no_longer_match_is_imported_whole():
    assert run(FALLBACK) == ["False", "Server type True"]
