"""Every HTTP body is capped and timed before it is read whole (issue #19.5)."""

from __future__ import annotations

import http.client
import json
import sys

import anyio
import pytest
from jsonschema import Draft202012Validator

from knowspec.generated.registry import error_schema
from knowspec.impl.server.body_limits import (MCP_MAX_OTHER_BODY_BYTES, REST_MAX_BODY_BYTES, BodyLimitMiddleware,
                                              BodyRule)
from serving import free_port, serving


class Recorder:
    """A downstream app that reads the whole body, and the responses sent upstream."""

    def __init__(self):
        self.bodies: list[bytes] = []

    async def __call__(self, scope, receive, send):
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.bodies.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def _drive(path: str, chunks: list[bytes], headers: list[tuple[bytes, bytes]], *, stall_after: int | None = None,
           rule: BodyRule | None = None):
    app = Recorder()
    middleware = BodyLimitMiddleware(app, mcp=rule, rest=rule)
    pulled = []
    sent = []

    async def receive():
        if stall_after is not None and len(pulled) >= stall_after:
            await anyio.sleep(3600)
        index = len(pulled)
        pulled.append(index)
        return {"type": "http.request", "body": chunks[index], "more_body": index < len(chunks) - 1}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": path, "headers": headers}
    anyio.run(middleware, scope, receive, send)
    status = sent[0]["status"]
    body = json.loads(sent[1]["body"]) if status != 200 else sent[1]["body"]
    return status, body, len(pulled), app.bodies


def test_declared_length_over_the_cap_is_413_before_any_byte_is_read():
    status, body, pulled, bodies = _drive("/ClientREST/Login", [b"x"], [(b"content-length", b"300000000")])
    assert status == 413 and pulled == 0 and bodies == []
    Draft202012Validator(error_schema()).validate(body)
    assert body["code"] == "resource_limit"


def test_chunked_body_is_refused_as_soon_as_it_passes_the_cap():
    chunk = b"x" * (256 * 1024)
    status, body, pulled, bodies = _drive("/ClientREST/Login", [chunk] * 100, [(b"transfer-encoding", b"chunked")])
    assert status == 413 and bodies == []
    assert pulled == REST_MAX_BODY_BYTES // len(chunk) + 1


def test_mcp_body_over_its_cap_is_a_json_rpc_error():
    rule = BodyRule(max_bytes=10, total_seconds=5)
    status, body, _, _ = _drive("/mcp", [b"x" * 11], [(b"content-length", b"11")], rule=rule)
    assert status == 413 and body["error"]["code"] == -32600 and body["id"] is None


def test_a_stalled_body_is_408_after_the_idle_limit():
    rule = BodyRule(max_bytes=1000, total_seconds=30, idle_seconds=0.05)
    status, body, pulled, bodies = _drive("/ClientREST/Login", [b"{", b"}"], [(b"content-length", b"2")],
                                          stall_after=1, rule=rule)
    assert status == 408 and bodies == [] and pulled == 1
    assert body["code"] == "invalid_request" and body["retryable"] is True


def test_a_body_within_limits_reaches_the_app_whole():
    status, _, _, bodies = _drive("/ClientREST/Login", [b'{"user":', b'"a"}'], [(b"content-length", b"12")])
    assert status == 200 and bodies == [b'{"user":"a"}']


@pytest.mark.parametrize("path", ["/mcp", "/ClientREST/Login"])
def test_a_request_declaring_both_a_length_and_chunks_is_400_and_closes_the_connection(path):
    """A proxy that trusts Content-Length would end the request elsewhere (request smuggling)."""
    headers = [(b"content-length", b"5"), (b"transfer-encoding", b"chunked")]
    status, body, pulled, bodies = _drive(path, [b'{"a":1}'], headers)
    assert status == 400 and pulled == 0 and bodies == []
    assert "Content-Length and Transfer-Encoding" in json.dumps(body)


@pytest.mark.parametrize(("body", "says"), [
    (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', "batch requests are not supported"),
    (b"  []", "batch requests are not supported"),
    (b"42", "a message must be one JSON object"),
    (b"null", "a message must be one JSON object"),
    (b'"ping"', "a message must be one JSON object"),
])
def test_an_mcp_body_that_is_not_one_object_is_a_json_rpc_error_of_our_own(body, says):
    status, answer, _, bodies = _drive("/mcp", [body], [(b"content-length", str(len(body)).encode())])
    assert status == 400 and bodies == []
    assert answer["error"] == {"code": -32600, "message": f"Invalid Request: {says}"} and answer["id"] is None


@pytest.mark.parametrize("body", [b'{"jsonrpc":"2.0","id":1,"method":"ping"}', b"not json", b""])
def test_an_object_or_what_is_not_json_at_all_goes_on_to_the_sdk(body):
    headers = [(b"content-length", str(len(body)).encode())] if body else [(b"transfer-encoding", b"chunked")]
    status, _, _, bodies = _drive("/mcp", [body], headers)
    assert status == 200 and bodies == [body]


def _json_rpc(method: str, params: dict, *, method_last: bool = False) -> bytes:
    message = {"jsonrpc": "2.0", "id": 1, "params": params, "method": method} if method_last else \
        {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return json.dumps(message).encode()


BIG = "a" * (MCP_MAX_OTHER_BODY_BYTES + 1)
INITIALIZE_PARAMS = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": BIG, "version": "0"}}


@pytest.mark.parametrize("body", [
    _json_rpc("initialize", INITIALIZE_PARAMS),
    _json_rpc("initialize", INITIALIZE_PARAMS, method_last=True),  # the method after the big params
    _json_rpc("tools/list", {"cursor": BIG}),
    json.dumps([json.loads(_json_rpc("tools/call", {"name": "x", "arguments": {"q": BIG}}))]).encode(),  # a batch
    b"\xff" * (MCP_MAX_OTHER_BODY_BYTES + 1),  # not UTF-8
], ids=["initialize", "initialize-method-last", "tools-list", "batch", "not-utf8"])
def test_an_mcp_message_other_than_a_tool_call_is_refused_over_one_mib(body):
    status, answer, _, bodies = _drive("/mcp", [body], [(b"content-length", str(len(body)).encode())])
    assert status == 413 and bodies == []
    assert answer["error"]["code"] == -32600 and answer["id"] is None
    assert "other than tools/call" in answer["error"]["message"]


def test_a_tool_call_over_one_mib_reaches_the_app_whole():
    body = _json_rpc("tools/call", {"name": "search_concepts", "arguments": {"query": BIG}}, method_last=True)
    status, _, _, bodies = _drive("/mcp", [body], [(b"content-length", str(len(body)).encode())])
    assert status == 200 and bodies == [body]


@pytest.mark.parametrize("body", [
    _json_rpc("tools/call", {"name": "list_concepts", "arguments": {"a": [[]] * 400_000}}),
    b"[" * (MCP_MAX_OTHER_BODY_BYTES + 1),  # nested past what json decodes, too
], ids=["empty-lists", "deep"])
def test_a_body_holding_more_values_than_any_call_may_is_refused_before_it_is_decoded(monkeypatch, body):
    """66 MiB of empty lists decoded into ~2 GB and held the GIL for seconds, for a call the
    raw-argument walk refused anyway (more than 100,000 values)."""
    from knowspec.impl.server import body_limits

    decoded = []
    monkeypatch.setattr(body_limits, "_tool_call", lambda body: decoded.append(body) or (True, None))
    assert len(body) > MCP_MAX_OTHER_BODY_BYTES
    status, answer, _, bodies = _drive("/mcp", [body], [(b"content-length", str(len(body)).encode())])
    assert status == 413 and bodies == [] and decoded == []
    assert answer["error"]["code"] == -32600 and "more than 100,000 JSON values" in answer["error"]["message"]


def test_a_tool_call_whose_big_text_is_full_of_brackets_and_commas_reaches_the_app():
    """Only what stands outside strings counts: a concept's text holds commas by the million."""
    text = "[a], {b}, \"c\", " * 200_000
    body = _json_rpc("tools/call", {"name": "write_concept", "arguments": {"content": text}}, method_last=True)
    status, _, _, bodies = _drive("/mcp", [body], [(b"content-length", str(len(body)).encode())])
    assert status == 200 and bodies == [body]


def test_an_mcp_message_of_one_mib_reaches_the_app_whole():
    body = _json_rpc("initialize", {**INITIALIZE_PARAMS, "clientInfo": {"name": "", "version": "0"}})
    body = body[:-1] + b" " * (MCP_MAX_OTHER_BODY_BYTES - len(body)) + b"}"
    status, _, _, bodies = _drive("/mcp", [body], [(b"content-length", str(len(body)).encode())])
    assert status == 200 and bodies == [body] and len(body) == MCP_MAX_OTHER_BODY_BYTES


@pytest.fixture(scope="module")
def http_base(tmp_path_factory):
    port, appdir = free_port(), tmp_path_factory.mktemp("appdir")
    with serving([sys.executable, "-m", "knowspec.impl.cli", "serve", "--http", f"127.0.0.1:{port}",
                  "--appdir", str(appdir)], port) as url:
        yield port


def test_real_server_refuses_an_oversized_anonymous_login_with_the_envelope(http_base):
    conn = http.client.HTTPConnection("127.0.0.1", http_base, timeout=30)
    size = 8 * REST_MAX_BODY_BYTES
    conn.putrequest("POST", "/ClientREST/Login")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(size))
    conn.endheaders()
    response = conn.getresponse()  # answered before the body is sent
    assert response.status == 413
    body = json.loads(response.read())
    Draft202012Validator(error_schema()).validate(body)
    assert body["code"] == "resource_limit"


def test_real_server_refuses_a_big_anonymous_initialize(tmp_path):
    port = free_port()
    with serving([sys.executable, "-m", "knowspec.impl.cli", "serve", "--http", f"127.0.0.1:{port}",
                  "--appdir", str(tmp_path), "--allow-anonymous"], port):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        conn.request("POST", "/mcp", _json_rpc("initialize", INITIALIZE_PARAMS), headers)
        response = conn.getresponse()
        assert response.status == 413
        assert json.loads(response.read())["error"]["code"] == -32600
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        small = {**INITIALIZE_PARAMS, "clientInfo": {"name": "probe", "version": "0"}}
        conn.request("POST", "/mcp", _json_rpc("initialize", small), headers)
        assert conn.getresponse().status == 200


def _raw(port: int, request: bytes) -> bytes:
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):  # the server closes the connection after answering
            answer += chunk
    return answer


def test_real_server_refuses_a_login_framed_twice_and_closes(http_base):
    body = b'{"user":"u","password":"p"}'
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    answer = _raw(http_base, b"POST /ClientREST/Login HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                             b"Content-Type: application/json\r\nContent-Length: 5\r\n"
                             b"Transfer-Encoding: chunked\r\n\r\n" + chunked)
    assert answer.startswith(b"HTTP/1.1 400") and b"connection: close" in answer.lower()


def test_real_server_does_not_redirect_a_trailing_slash_to_the_host_it_was_told(http_base):
    answer = _raw(http_base, b"POST /ClientREST/DocSearch/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                             b"Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
    assert answer.startswith(b"HTTP/1.1 404") and b"location:" not in answer.lower()


def test_real_server_refuses_a_login_of_half_a_million_values(http_base):
    """Logins are anonymous: a body of empty lists under the 1 MiB cap was decoded on the event
    loop, and four such callers slowed every other request to ~0.4 s."""
    conn = http.client.HTTPConnection("127.0.0.1", http_base, timeout=30)
    body = b"[" + b"[]," * 340_000 + b"[]]"
    conn.request("POST", "/ClientREST/Login", body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    answer = json.loads(response.read())
    Draft202012Validator(error_schema()).validate(answer)
    assert (response.status, answer["code"]) == (400, "resource_limit")  # as the argument walk answers it
    assert answer["message"] == "request body exceeds the resource limits"


def test_a_rest_body_of_too_many_values_is_refused_before_json_decodes_it(monkeypatch):
    from knowspec.impl.errors import ToolError
    from knowspec.impl.rest import validation

    decoded = []
    monkeypatch.setattr(validation, "json", type("Json", (), {"loads": staticmethod(decoded.append)}))
    with pytest.raises(ToolError) as refused:
        validation.parse_json_body(b"[" + b"[]," * 340_000 + b"[]]", "application/json")
    assert refused.value.code == "resource_limit" and decoded == []
