"""One request id at a time per MCP session: a second request with an id still in flight is
refused (409) before the SDK, which would leave one of the two unanswered for ever."""

from __future__ import annotations

import threading

from starlette.testclient import TestClient

from knowspec.impl.config import Settings
from knowspec.impl.context import ToolOutput
from knowspec.impl.server.http_app import build_app
from knowspec.impl.server.pipeline import ToolRuntime
from knowspec.impl.server.request_ids import request_id_of

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def test_the_id_is_read_as_the_sdk_keys_it_and_only_from_one_request():
    assert request_id_of(b'{"jsonrpc":"2.0","id":1,"method":"ping"}') == "1"
    assert request_id_of(b'{"method":"ping","id":"1"}') == "1"  # as the SDK keys an answer: str(id)
    assert request_id_of(b'{"method":"ping","id":""}') == ""
    assert request_id_of(b'{"jsonrpc":"2.0","method":"notifications/initialized"}') is None
    assert request_id_of(b'[{"id":1,"method":"ping"}]') is None and request_id_of(b"not json") is None


def _call(client, session, text, request_id=7):
    return client.post("/mcp", headers=session, json={"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                                                      "params": {"name": "echo_list", "arguments": {"text": text}}})


def test_a_second_request_with_an_id_in_flight_is_refused_and_the_first_is_answered(mini_registry, tmp_path):
    started, release = threading.Event(), threading.Event()

    def slow(args, ctx):
        started.set()
        release.wait(30)
        return ToolOutput({"results": []}, text="first")

    runtime = ToolRuntime(Settings(appdir=tmp_path, allow_anonymous=True), entries=mini_registry.TOOLS,
                          handlers={"echo_list": slow, "echo_text": None})
    app = build_app(runtime, host="testserver", dns_rebinding_protection=False)
    with TestClient(app) as client:
        init = client.post("/mcp", headers=HEADERS, json=INITIALIZE)
        session = {**HEADERS, "Mcp-Session-Id": init.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
        client.post("/mcp", headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        first: list = []
        waiting = threading.Thread(target=lambda: first.append(_call(client, session, "a")))
        waiting.start()
        assert started.wait(30)
        second = _call(client, session, "b")
        assert second.status_code == 409 and "already in flight" in second.json()["error"]["message"]
        same_text = _call(client, session, "c", request_id="7")  # the SDK keys answers by str(id)
        assert same_text.status_code == 409
        release.set()
        waiting.join(30)
        assert [r.status_code for r in first] == [200] and '"first"' in first[0].text
        again = _call(client, session, "d")  # the id is free once its request was answered
        assert again.status_code == 200 and '"first"' in again.text


def test_a_request_with_an_id_no_request_may_have_is_refused_not_taken_for_a_notification(mini_registry, tmp_path):
    """The SDK had answered 202 and run nothing: its client waited for an answer for ever."""
    from knowspec.impl.server.request_ids import UNUSABLE_ID

    for bad in (b"null", b"1.5", b"true", b"{}", b"[1]"):
        assert request_id_of(b'{"jsonrpc":"2.0","id":%s,"method":"ping"}' % bad) is UNUSABLE_ID
    runtime = ToolRuntime(Settings(appdir=tmp_path, allow_anonymous=True), entries=mini_registry.TOOLS,
                          handlers={"echo_list": None, "echo_text": None})
    app = build_app(runtime, host="testserver", dns_rebinding_protection=False)
    with TestClient(app) as client:
        sessionless = client.post("/mcp", headers=HEADERS, json={**INITIALIZE, "id": None})
        init = client.post("/mcp", headers=HEADERS, json=INITIALIZE)
        session = {**HEADERS, "Mcp-Session-Id": init.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
        in_session = [_call(client, session, "a", request_id=bad) for bad in (None, 1.5, True, {})]
    for answer in (sessionless, *in_session):
        assert answer.status_code == 400
        assert answer.json()["error"] == {"code": -32600, "message": "Invalid Request: a request's id must be a "
                                                                     "string or an integer"}


def test_a_call_whose_client_hung_up_keeps_its_id_until_it_returns(mini_registry, tmp_path):
    """A request reusing the id of a call still running had that call's answer routed to it (and both ran)."""
    import http.client
    import json
    import socket
    import time

    from serving import serving_app

    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def slow(args, ctx):
        started.set()
        release.wait(30)
        finished.set()
        return ToolOutput({"results": []}, text="first")

    runtime = ToolRuntime(Settings(appdir=tmp_path, allow_anonymous=True), entries=mini_registry.TOOLS,
                          handlers={"echo_list": slow, "echo_text": None})
    with serving_app(build_app(runtime, host="127.0.0.1")) as port:
        def post(message: dict, headers: dict) -> tuple[int, dict, str]:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            connection.request("POST", "/mcp", json.dumps(message), {**headers, "Host": f"127.0.0.1:{port}"})
            answer = connection.getresponse()
            return answer.status, dict(answer.getheaders()), answer.read().decode()

        status, headers, _ = post(INITIALIZE, HEADERS)
        session = {**HEADERS, "Mcp-Session-Id": headers["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
        post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        call = {"jsonrpc": "2.0", "id": 777, "method": "tools/call",
                "params": {"name": "echo_list", "arguments": {"text": "a"}}}
        body = json.dumps(call).encode()
        hung_up = socket.create_connection(("127.0.0.1", port))
        head = "".join(f"{k}: {v}\r\n" for k, v in {**session, "Host": f"127.0.0.1:{port}",
                                                     "Content-Length": len(body)}.items())
        hung_up.sendall(f"POST /mcp HTTP/1.1\r\n{head}\r\n".encode() + body)
        assert started.wait(30)
        hung_up.close()
        time.sleep(0.5)  # the server sees its client gone; the call runs on
        assert not finished.is_set()
        status, _, text = post(call, session)
        assert status == 409 and "already in flight" in text
        release.set()
        assert finished.wait(30)
        for _ in range(100):  # the id is free once the call has returned
            status, _, text = post(call, session)
            if status != 409:
                break
            time.sleep(0.05)
        assert status == 200 and '"first"' in text
