"""serverInfo: knowspec names itself unless the operator asks for okf-mcp's identity."""

from __future__ import annotations

import os
import sys
from importlib.metadata import version

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

SERVER = [sys.executable, "-m", "knowspec.impl.cli", "serve", "--stdio", "--appdir", "/nonexistent-appdir"]


async def server_info(*extra: str):
    params = StdioServerParameters(command=SERVER[0], args=[*SERVER[1:], *extra], env={**os.environ})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        return (await session.initialize()).server_info


@pytest.mark.parametrize(("extra", "expected"), [
    ((), ("knowspec", version("knowspec"))),
    (("--server-name", "okf-mcp", "--server-version", "0.2.0"), ("okf-mcp", "0.2.0")),
])
def test_server_info_is_knowspec_by_default_and_the_contract_identity_on_request(extra, expected):
    info = anyio.run(server_info, *extra)
    assert (info.name, info.version) == expected
