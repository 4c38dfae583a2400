"""Over HTTP, every MCP caller signs in; OKF tools keep to the bundle roots; writes need a
write role; IMPORTDOC keeps to the import folder. A real server, driven over the wire."""

from __future__ import annotations

import json
import shutil
import sys
import urllib.error
import urllib.request
from pathlib import Path

import anyio
import httpx2
import mcp.types as types
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from knowspec.impl.config import Settings
from knowspec.impl.docpool import auth
from serving import free_port, serving

EXAMPLE_BUNDLE = Path(__file__).resolve().parents[2] / "examples" / "okf-sample"
SERVE = [sys.executable, "-m", "knowspec.impl.cli", "serve"]
PLANTED = {"concept_id": "planted", "frontmatter": "type: Note\ntitle: Planted\n", "body": "# Planted\n"}


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    base = tmp_path_factory.mktemp("security")
    appdir, root, outside = base / "app", base / "root", base / "outside"
    settings = Settings(appdir=appdir)
    auth.create_user(settings.catalog_path, "rita", "pw", [])             # reads only
    auth.create_user(settings.catalog_path, "walt", "pw", ["WRITER"])     # may write
    auth.create_user(settings.catalog_path, "sam", "pw", ["SYSADMIN"])    # admin (IMPORTDOC)
    shutil.copytree(EXAMPLE_BUNDLE, root / "kb")
    shutil.copytree(EXAMPLE_BUNDLE, outside / "kb")
    (appdir / "imports").mkdir()
    return {"appdir": appdir, "root": root, "outside": outside, "base": base}


def _serve(layout, *extra):
    port = free_port()
    return serving([*SERVE, "--http", f"127.0.0.1:{port}", "--appdir", str(layout["appdir"]),
                    "--bundle-root", str(layout["root"]), *extra], port)


@pytest.fixture(scope="module")
def server(layout):
    with _serve(layout) as base:
        yield base


@pytest.fixture(scope="module")
def open_server(layout):
    with _serve(layout, "--allow-anonymous") as base:
        yield base


def post(url: str, body: dict, token: str | None = None, accept: str = "application/json") -> tuple[int, dict, dict]:
    headers = {"Content-Type": "application/json", "Accept": accept}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read() or b"null")


def login(base: str, user: str) -> str:
    status, _, body = post(base + "/ClientREST/Login", {"user": user, "password": "pw"})
    assert status == 200, body
    return body["token"]


def call(base: str, token: str | None, name: str, arguments: dict) -> types.CallToolResult:
    async def go():
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as client, \
                streamable_http_client(base + "/mcp", http_client=client) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            request = types.CallToolRequest(params=types.CallToolRequestParams(name=name, arguments=arguments))
            return await session.send_request(request, types.CallToolResult)

    return anyio.run(go)


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "t", "version": "0"}}}
CALL_WRITE = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "write_concept", "arguments": {"bundle_path": "/tmp", **PLANTED}}}


@pytest.mark.parametrize("token", [None, "not-a-session"])
@pytest.mark.parametrize("message", [INITIALIZE, CALL_WRITE], ids=["initialize", "write_concept"])
def test_mcp_without_a_live_session_is_401_with_a_bearer_challenge(server, layout, token, message):
    status, headers, body = post(server + "/mcp", message, token, accept="application/json, text/event-stream")
    assert status == 401
    assert {k.lower(): v for k, v in headers.items()}["www-authenticate"].startswith("Bearer")
    assert body["code"] == "unauthenticated" and "POST /ClientREST/Login" in body["message"]
    assert not (Path("/tmp") / "planted.md").exists()


def test_a_reader_cannot_write_or_apply(server, layout):
    token = login(server, "rita")
    kb = str(layout["root"] / "kb")
    result = call(server, token, "write_concept", {"bundle_path": kb, **PLANTED})
    assert result.is_error and result.structured_content["code"] == "forbidden"
    assert "WRITER" in result.structured_content["message"]
    patch = {"bundle_path": kb, "actor": "human:rita",
             "operations": [{"kind": "set_generated", "concept_id": "glossary", "generated": {"by": "human:rita"}}]}
    preview = call(server, token, "preview_concept_patch", patch)  # a preview is a read
    assert not preview.is_error, preview.structured_content
    before = (layout["root"] / "kb" / "glossary.md").read_bytes()
    result = call(server, token, "apply_concept_patch",
                  {**patch, "expected_revision": preview.structured_content["base_revision"],
                   "expected_plan_digest": preview.structured_content["plan_digest"]})
    assert result.is_error and result.structured_content["code"] == "forbidden"
    assert (layout["root"] / "kb" / "glossary.md").read_bytes() == before
    assert not (layout["root"] / "kb" / "planted.md").exists()
    listing = call(server, token, "list_concepts", {"bundle_path": kb})
    assert not listing.is_error, listing.structured_content


def test_a_writer_writes_inside_a_root_but_never_outside(server, layout):
    token = login(server, "walt")
    result = call(server, token, "write_concept", {"bundle_path": str(layout["root"] / "kb"), **PLANTED})
    assert not result.is_error, result.structured_content
    assert (layout["root"] / "kb" / "planted.md").exists()
    result = call(server, token, "write_concept", {"bundle_path": str(layout["outside"] / "kb"), **PLANTED})
    assert result.is_error and result.structured_content["code"] == "invalid_request"
    assert not (layout["outside"] / "kb" / "planted.md").exists()


def test_a_revoked_writer_stops_writing_at_once(server, layout):
    settings = Settings(appdir=layout["appdir"])
    auth.create_user(settings.catalog_path, "wendy", "pw", ["WRITER"])
    token = login(server, "wendy")
    kb = str(layout["root"] / "kb")
    assert not call(server, token, "write_concept", {"bundle_path": kb, **{**PLANTED, "concept_id": "w1"}}).is_error
    auth.revoke_role(settings.catalog_path, "wendy", "WRITER")
    result = call(server, token, "write_concept", {"bundle_path": kb, **{**PLANTED, "concept_id": "w2"}})
    assert result.is_error and result.structured_content["code"] == "forbidden"
    assert not (layout["root"] / "kb" / "w2.md").exists()


def test_outside_the_roots_an_existing_and_a_missing_bundle_answer_alike(server, layout):
    token = login(server, "rita")
    answers = []
    for path in (layout["outside"] / "kb", layout["outside"] / "no-such-kb", Path("/etc"), Path("/no/such/dir"),
                 layout["root"].parent / "root-sibling"):
        result = call(server, token, "list_concepts", {"bundle_path": str(path)})
        answers.append((result.is_error, result.structured_content, [c.text for c in result.content]))
    assert answers[0][0] is True and answers[0][1]["code"] == "invalid_request"
    assert all(a == answers[0] for a in answers), answers


def test_anonymous_callers_allowed_by_the_operator_read_but_never_write(open_server, layout):
    kb = str(layout["root"] / "kb")
    listing = call(open_server, None, "list_concepts", {"bundle_path": kb})
    assert not listing.is_error, listing.structured_content
    result = call(open_server, None, "write_concept", {"bundle_path": kb, **{**PLANTED, "concept_id": "anon"}})
    assert result.is_error and result.structured_content["code"] == "forbidden"
    assert not (layout["root"] / "kb" / "anon.md").exists()


def test_importdoc_outside_the_import_folder_answers_alike_for_existing_and_missing(server, layout):
    token = login(server, "sam")
    existing = layout["base"] / "outside.db"
    existing.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    answers = []
    for path in (str(existing), str(layout["base"] / "missing.db"), "/etc/passwd", "/etc/no-such-file",
                 "../outside.db", "../missing.db"):
        status, _, body = post(server + "/AdminREST/EXECCOMMAND",
                               {"command": "IMPORTDOC", "params": {"database": "demo", "collection": "docs",
                                                                   "path": path}}, token)
        answers.append((status, body))
    assert answers[0][0] == 202 and answers[0][1]["result"] is False
    assert all(a == answers[0] for a in answers), answers


TOOLS_LIST = {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}}
STREAMS = "application/json, text/event-stream"


def _with_two_authorizations(base: str, path: str, body: dict, first: str, second: str) -> tuple[int, dict]:
    import http.client
    from urllib.parse import urlsplit

    where = urlsplit(base)
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=30)
    data = json.dumps(body).encode()
    conn.putrequest("POST", path)
    for name, value in (("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream"),
                        ("Content-Length", str(len(data))), ("Authorization", f"Bearer {first}"),
                        ("Authorization", f"Bearer {second}")):
        conn.putheader(name, value)
    conn.endheaders(data)
    answer = conn.getresponse()
    return answer.status, json.loads(answer.read() or b"null")


@pytest.mark.parametrize("path", ["/AdminREST/EXECCOMMAND", "/mcp"])
def test_a_request_with_two_authorization_headers_is_refused_whichever_comes_first(server, layout, path):
    """The first had named the caller: an admin's token then a reader's ran IMPORTDOC, the other
    order was 403; a proxy or log reading the last would have named another caller."""
    admin, reader = login(server, "sam"), login(server, "rita")
    body = INITIALIZE if path == "/mcp" else {"command": "IMPORTDOC", "params": {"database": "demo", "collection": "docs", "path": "missing.db"}}
    for first, second in ((admin, reader), (reader, admin)):
        status, answer = _with_two_authorizations(server, path, body, first, second)
        assert status == 400
        message = answer["error"]["message"] if path == "/mcp" else answer["message"]
        assert "one Authorization header" in message


def _mcp_request(base: str, token: str | None, message: dict | None, session_id: str | None = None):
    """(status, headers) of one raw request to /mcp: ``message`` POSTed, or None to DELETE."""
    headers = {"Content-Type": "application/json", "Accept": STREAMS}
    if session_id:
        headers.update({"Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-06-18"})
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(base + "/mcp", data=json.dumps(message).encode() if message else None,
                                     headers=headers, method="POST" if message else "DELETE")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
            return response.status, {k.lower(): v for k, v in response.headers.items()}
    except urllib.error.HTTPError as exc:
        return exc.code, {}


def _open_session(base: str, token: str | None) -> str:
    status, headers = _mcp_request(base, token, INITIALIZE)
    assert status == 200
    return headers["mcp-session-id"]


def _in_session(base: str, session_id: str, token: str | None, message: dict) -> int:
    return _mcp_request(base, token, message or None, session_id)[0]


@pytest.mark.parametrize("workers", [[], ["--workers", "2"]], ids=["one-process", "two-workers"])
def test_an_mcp_session_answers_only_the_user_who_opened_it(layout, workers):
    with _serve(layout, "--allow-anonymous", *workers) as base:
        rita, walt = login(base, "rita"), login(base, "walt")
        ritas = _open_session(base, rita)
        assert _in_session(base, ritas, walt, TOOLS_LIST) == 404  # another user's token
        assert _in_session(base, ritas, None, TOOLS_LIST) == 404  # the anonymous caller
        assert _in_session(base, ritas, walt, {}) == 404          # nor may another user end it
        assert _in_session(base, ritas, rita, TOOLS_LIST) == 200  # still the owner's
        anonymous = _open_session(base, None)
        assert _in_session(base, anonymous, rita, TOOLS_LIST) == 404
        assert _in_session(base, anonymous, None, TOOLS_LIST) == 200
