"""No event store: a GET /mcp asking to resume (``Last-Event-ID``) gets a fresh stream, never a 500."""

from __future__ import annotations

import http.client
import json

import pytest

from knowspec.impl.config import Settings
from knowspec.impl.server.http_app import build_app
from knowspec.impl.server.pipeline import ToolRuntime
from serving import serving_app

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


@pytest.mark.parametrize("last_event_id", ["0", "5", "not-an-event"])
def test_a_get_asking_to_resume_opens_the_sessions_stream(mini_registry, tmp_path, last_event_id):
    runtime = ToolRuntime(Settings(appdir=tmp_path, allow_anonymous=True), entries=mini_registry.TOOLS,
                          handlers={"echo_list": None, "echo_text": None})
    with serving_app(build_app(runtime, host="127.0.0.1")) as port:
        host = {"Host": f"127.0.0.1:{port}"}
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request("POST", "/mcp", json.dumps(INITIALIZE), {**HEADERS, **host})
        opened = connection.getresponse()
        opened.read()
        session = opened.getheader("mcp-session-id")
        stream = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        stream.request("GET", "/mcp", headers={**host, "Accept": "text/event-stream", "Mcp-Session-Id": session,
                                               "MCP-Protocol-Version": "2025-06-18", "Last-Event-ID": last_event_id})
        answer = stream.getresponse()
        assert answer.status == 200 and answer.getheader("content-type", "").startswith("text/event-stream")
        stream.close()
