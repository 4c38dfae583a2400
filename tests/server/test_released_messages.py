"""An idle MCP session keeps no request it has answered: the SDK's session loop holds its last
message until the next one, so a 65 MiB tools/call stayed resident for the session's life
(a hostile probe ratcheted the server to 1.3 GB; impl/server/released_messages.py)."""

from __future__ import annotations

import gc

import anyio
from starlette.testclient import TestClient

from knowspec.impl.config import Settings
from knowspec.impl.context import ToolOutput
from knowspec.impl.server.http_app import build_app
from knowspec.impl.server.pipeline import ToolRuntime
from knowspec.impl.server.released_messages import ReleasingReadStream
from mcp.shared.message import SessionMessage

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
MARKER = "released-messages-marker-"
BIG = 4 * 1024 * 1024


def test_the_message_given_before_is_emptied_when_the_next_is_asked_for():
    async def main() -> list:
        send, receive = anyio.create_memory_object_stream(4)
        first, second = SessionMessage(message="one", metadata="m1"), SessionMessage(message="two")  # type: ignore[arg-type]
        await send.send(first)
        await send.send(second)
        await send.aclose()
        stream = ReleasingReadStream(receive)
        seen = []
        async for item in stream:
            seen.append((item.message, first.message, first.metadata))
        return seen + [second.message]

    assert anyio.run(main) == [("one", "one", "m1"), ("two", None, None), None]


def _big_strings() -> int:
    gc.collect()
    def marked(x: object) -> bool:  # the raw body or its parse: the marker stands near the start
        return isinstance(x, (str, bytes)) and len(x) >= BIG and (
            MARKER in x[:200] if isinstance(x, str) else MARKER.encode() in x[:200])

    return sum(1 for o in gc.get_objects() for x in gc.get_referents(o) if marked(x))


def test_an_idle_http_session_holds_no_answered_tools_call(mini_registry, tmp_path):
    handlers = {"echo_list": lambda args, ctx: ToolOutput({"results": []}, text="ok"), "echo_text": None}
    runtime = ToolRuntime(Settings(appdir=tmp_path, allow_anonymous=True), entries=mini_registry.TOOLS,
                          handlers=handlers)
    app = build_app(runtime, host="testserver", dns_rebinding_protection=False)
    with TestClient(app) as client:
        init = client.post("/mcp", headers=HEADERS, json=INITIALIZE)
        session = {**HEADERS, "Mcp-Session-Id": init.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
        client.post("/mcp", headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        status = client.post("/mcp", headers=session, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "echo_list", "arguments": {"text": MARKER + "x" * BIG}}}).status_code  # the client's copy goes
        assert status == 200
        assert _big_strings() == 0  # the session is open and idle: neither the body nor its parse is kept
