"""The real server over stdio and HTTP, driven by the real `mcp` SDK client."""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from contextlib import asynccontextmanager

import anyio
import httpx2
import mcp.types as types
import pytest
from jsonschema import Draft202012Validator
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from knowspec.generated.registry import TOOLS, error_schema
from knowspec.impl.config import Settings
from knowspec.impl.docpool import auth
from serving import free_port, serving

SERVER = [sys.executable, "-m", "knowspec.impl.cli", "serve"]


@pytest.fixture(scope="module")
def http_server(tmp_path_factory):
    """The server with one WRITER signed in: ``/mcp`` needs a session (tests/server/test_http_security.py)."""
    port, appdir = free_port(), tmp_path_factory.mktemp("appdir")
    auth.create_user(Settings(appdir=appdir).catalog_path, "walt", "pw", ["WRITER"])
    with serving([*SERVER, "--http", f"127.0.0.1:{port}", "--appdir", str(appdir),
                  "--bundle-root", str(appdir)], port) as url:
        request = urllib.request.Request(url + "/ClientREST/Login", method="POST",
                                         data=json.dumps({"user": "walt", "password": "pw"}).encode(),
                                         headers={"Content-Type": "application/json"})
        token = json.loads(urllib.request.urlopen(request, timeout=10).read())["token"]
        yield HttpTarget(url + "/mcp", token)


class HttpTarget(str):
    """The /mcp URL, carrying the bearer token of the test's session."""

    def __new__(cls, url: str, token: str) -> "HttpTarget":
        target = super().__new__(cls, url)
        target.token = token
        return target


@asynccontextmanager
async def session_for(transport: str, target: str | None = None, appdir: str = "/nonexistent-appdir"):
    if transport == "stdio":
        params = StdioServerParameters(command=SERVER[0], args=[*SERVER[1:], "--stdio", "--appdir", appdir],
                                       env={**os.environ})
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session
    else:
        headers = {"Authorization": f"Bearer {target.token}"} if getattr(target, "token", None) else {}
        async with httpx2.AsyncClient(headers=headers, timeout=120) as client, \
                streamable_http_client(target, http_client=client) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            yield session


def bad_argument_cases(entry) -> list[tuple[dict, str]]:
    cases: list[tuple[dict, str]] = [({"definitely_not_a_field": 1}, "schema_validation")]
    props = entry.input_schema.get("properties", {})
    limit = props.get("limit", {})
    if "maximum" in limit:
        cases.append(({"limit": limit["maximum"] + 1}, "resource_limit"))
    if "minimum" in limit:
        cases.append(({"limit": limit["minimum"] - 1}, "schema_validation"))
    return cases


async def exercise(session: ClientSession) -> None:
    listed = (await session.list_tools()).tools
    assert [t.name for t in listed] == [t.name for t in TOOLS]
    assert len(listed) == 25
    envelope = Draft202012Validator(error_schema())
    for tool, entry in zip(listed, TOOLS):
        Draft202012Validator.check_schema(tool.input_schema)
        Draft202012Validator.check_schema(tool.output_schema)
        assert tool.input_schema == entry.input_schema
        for arguments, code in bad_argument_cases(entry):
            request = types.CallToolRequest(params=types.CallToolRequestParams(name=tool.name, arguments=arguments))
            result = await session.send_request(request, types.CallToolResult)
            assert result.is_error is True, (tool.name, arguments)
            envelope.validate(result.structured_content)
            Draft202012Validator(tool.output_schema).validate(result.structured_content)
            assert result.structured_content["code"] == code, (tool.name, arguments, result.structured_content)


def test_stdio_lists_25_tools_and_answers_bad_arguments_with_contract_codes():
    async def go():
        async with session_for("stdio") as session:
            await exercise(session)

    anyio.run(go)


def test_http_lists_25_tools_and_answers_bad_arguments_with_contract_codes(http_server):
    async def go():
        async with session_for("http", http_server) as session:
            await exercise(session)

    anyio.run(go)


def test_tools_list_is_byte_identical_across_restarts():
    async def listing() -> str:
        async with session_for("stdio") as session:
            tools = (await session.list_tools()).tools
            return json.dumps([t.model_dump(mode="json", by_alias=True) for t in tools])

    assert anyio.run(listing) == anyio.run(listing)


def test_http_app_serves_rest_and_envelopes_beside_mcp(http_server):
    base = http_server.removesuffix("/mcp")
    spec = json.loads(urllib.request.urlopen(base + "/openapi.json", timeout=5).read())
    assert spec["openapi"].startswith("3.1") and "/ClientREST/DocSearch" in spec["paths"]
    for path, method in (("/no-such-path", "GET"), ("/ClientREST/DocSearch", "POST")):
        request = urllib.request.Request(base + path, method=method, data=b"{}" if method == "POST" else None,
                                         headers={"Content-Type": "application/json"})
        try:
            urllib.request.urlopen(request, timeout=5)
        except urllib.error.HTTPError as err:
            body = json.loads(err.read())
            assert err.code in (401, 404)
            Draft202012Validator(error_schema()).validate(body)
        else:
            pytest.fail(f"{method} {path} answered 2xx without a session")


def test_http_over_long_argument_is_resource_limit_not_a_transport_error(http_server):
    """An argument past maxLength (here several MiB) must reach the pipeline, not die as HTTP 413."""
    async def go():
        async with session_for("http", http_server) as session:
            request = types.CallToolRequest(params=types.CallToolRequestParams(
                name="write_concept",
                arguments={"bundle_path": "/x", "concept_id": "a", "frontmatter": "x", "body": "n" * (17 * 1024 * 1024)}))
            return await session.send_request(request, types.CallToolResult)

    result = anyio.run(go)
    assert result.is_error and result.structured_content["code"] == "resource_limit"
