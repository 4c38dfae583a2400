"""Over HTTP, MCP callers are the REST session's identity, or (when the operator allows it)
anonymous: never unrestricted. Doc tools apply that identity's ACL as REST does."""

from __future__ import annotations

import json
import sys
import urllib.request

import anyio
import httpx2
import mcp.types as types
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from knowspec.impl.config import Settings
from knowspec.impl.demo import EXAMPLES, prepare
from knowspec.impl.docpool import auth
from knowspec.impl.docpool.builder import build_pool
from knowspec.impl.docpool.importdoc import import_collection
from serving import free_port, serving

# A collection not open to everyone (erisim != herkes): only the topic's ACL principals see it.
RESTRICTED = {"slug": "gizli-maas-raporu", "collection": "private-docs"}  # acl: [Muhasebe]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    appdir = tmp_path_factory.mktemp("appdir")
    settings = Settings(appdir=appdir)
    prepare(settings)
    source = appdir / "imports" / "private-source.db"
    source.parent.mkdir()
    build_pool(EXAMPLES / "help", source, "private-docs", erisim="kisitli")
    assert import_collection(settings, "demo", "private-docs", str(source))["result"] is True
    auth.create_user(settings.catalog_path, "ayse", "pw", ["Muhasebe"])
    auth.create_user(settings.catalog_path, "bob", "pw", [])
    port = free_port()
    with serving([sys.executable, "-m", "knowspec.impl.cli", "serve", "--http", f"127.0.0.1:{port}",
                  "--appdir", str(appdir), "--database", "demo", "--allow-anonymous"], port) as base:
        yield base


def login(base: str, user: str) -> str:
    request = urllib.request.Request(base + "/ClientREST/Login", method="POST",
                                     data=json.dumps({"user": user, "password": "pw"}).encode(),
                                     headers={"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(request, timeout=5).read())["token"]


def doc_get(base: str, token: str | None) -> types.CallToolResult:
    async def go():
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as client, \
                streamable_http_client(base + "/mcp", http_client=client) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            request = types.CallToolRequest(params=types.CallToolRequestParams(name="doc_get", arguments=RESTRICTED))
            return await session.send_request(request, types.CallToolResult)

    return anyio.run(go)


def test_anonymous_http_caller_cannot_read_a_restricted_topic(server):
    result = doc_get(server, None)
    assert result.is_error and result.structured_content["code"] == "not_found"


def test_session_without_the_principal_cannot_read_it(server):
    result = doc_get(server, login(server, "bob"))
    assert result.is_error and result.structured_content["code"] == "not_found"


def test_session_with_the_principal_reads_it(server):
    result = doc_get(server, login(server, "ayse"))
    assert not result.is_error, result.structured_content
    assert result.structured_content["slug"] == "gizli-maas-raporu"
