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
