"""Tool answers over HTTP are encoded off the event loop (issue #19: no serialisation on the loop)."""

from __future__ import annotations

import http.client
import json
import sys
import textwrap
import threading
import time
from pathlib import Path

import mcp.types as types
from hypothesis import given
from hypothesis import strategies as st
from mcp_types.methods import serialize_server_result
from sse_starlette.event import ensure_bytes

from knowspec.impl.server import sliced_json
from knowspec.impl.server.http_answers import PARKED_KEY, ParkedAnswers, encode_answer
from serving import free_port, serving

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=12) | st.dictionaries(st.text(max_size=8), inner, max_size=8),
    max_leaves=60,
)


@given(json_values)
def test_sliced_json_is_the_same_text_as_one_dumps(value):
    expected = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    saved = sliced_json.PIECE_WEIGHT, sliced_json.STRING_SLICE
    sliced_json.PIECE_WEIGHT, sliced_json.STRING_SLICE = 3, 4  # force slicing at every level
    try:
        assert "".join(sliced_json.json_pieces(value)) == expected
    finally:
        sliced_json.PIECE_WEIGHT, sliced_json.STRING_SLICE = saved


def _sdk_event(request_id, result: types.CallToolResult) -> bytes:
    """What the SDK writes for a tools/call answer on a 2025 session (runner shaping + transport + SSE)."""
    shaped = serialize_server_result("tools/call", "2025-06-18",
                                     result.model_dump(by_alias=True, mode="json", exclude_none=True))
    body = types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result=shaped).model_dump_json(
        by_alias=True, exclude_unset=True)
    return ensure_bytes({"event": "message", "data": body}, "\r\n")


def test_an_encoded_answer_is_the_event_the_sdk_would_write():
    result = types.CallToolResult(content=[types.TextContent(type="text", text="çay\n\"x\"")],
                                  structured_content={"results": [{"id": "a", "n": 1.5}, None, True]})
    assert encode_answer(7, "2025-06-18", result) == _sdk_event(7, result)


def test_a_large_answer_encodes_to_the_same_json_as_the_sdk():
    result = types.CallToolResult(content=[types.TextContent(type="text", text="é" * 600_000)],
                                  structured_content={"results": [{"id": str(i), "t": "x" * 300} for i in range(5000)]},
                                  is_error=False)
    ours, sdk = encode_answer("r1", "2025-06-18", result), _sdk_event("r1", result)
    payload = lambda event: json.loads(event.split(b"data: ", 1)[1])  # noqa: E731
    assert payload(ours) == payload(sdk)


def test_a_parked_answer_is_taken_once_by_its_placeholder_response():
    answers = ParkedAnswers()
    placeholder = answers.park(b"frame")
    dumped = placeholder.model_dump(by_alias=True, mode="json", exclude_none=True)
    response = types.JSONRPCResponse(jsonrpc="2.0", id=1, result=dumped)
    assert answers.take(response) == b"frame" and len(answers) == 0
    assert answers.take(types.JSONRPCResponse(jsonrpc="2.0", id=2, result={"content": []})) is None


def test_an_answer_parked_too_long_is_dropped_and_its_response_says_so():
    now = [0.0]
    answers = ParkedAnswers(max_age=10, clock=lambda: now[0])
    first = answers.park(b"old")
    now[0] = 11.0
    answers.park(b"new")  # parking purges what is stale
    response = types.JSONRPCResponse(jsonrpc="2.0", id=3, result=first.model_dump(by_alias=True, exclude_none=True))
    frame = answers.take(response)
    error = json.loads(frame.split(b"data: ", 1)[1])
    assert error["id"] == 3 and error["error"]["code"] == types.INTERNAL_ERROR and len(answers) == 1
    assert PARKED_KEY not in frame.decode()


_BIG_ANSWER_SERVER = textwrap.dedent("""
    import sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    import uvicorn
    import mini_generated.registry as registry
    from knowspec.impl.config import Settings
    from knowspec.impl.context import ToolOutput
    from knowspec.impl.server.http_app import build_app
    from knowspec.impl.server.pipeline import ToolRuntime

    TEXT = "é" * (24 * 1024 * 1024)
    ITEMS = [{"text": str(i) + "t" * 8000, "kind": "a"} for i in range(3000)]

    def big(args, ctx):
        return ToolOutput({"results": ITEMS}, text=TEXT)

    settings = Settings(appdir=Path(sys.argv[2]), allow_anonymous=True)
    runtime = ToolRuntime(settings, entries=registry.TOOLS, handlers={"echo_list": big})
    uvicorn.run(build_app(runtime), host="127.0.0.1", port=int(sys.argv[3]), log_level="warning")
""")

_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _post(conn: http.client.HTTPConnection, message: dict, headers: dict) -> http.client.HTTPResponse:
    conn.request("POST", "/mcp", body=json.dumps(message), headers=headers)
    return conn.getresponse()


def test_health_answers_while_a_large_answer_is_encoded(mini_registry, tmp_path):
    """While one client waits for a ~100 MiB answer, /healthz keeps answering.

    The window runs from the big call's request to the first byte of its answer; no health
    probe may wait for more than a third of it. With the SDK encoding on the loop, one probe
    waited out the whole encoding (most of the window).
    """
    root = str(Path(mini_registry.__file__).parent.parent)
    port = free_port()
    with serving([sys.executable, "-c", _BIG_ANSWER_SERVER, root, str(tmp_path), str(port)], port):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        init = _post(conn, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}, _HEADERS)
        session = {**_HEADERS, "Mcp-Session-Id": init.getheader("mcp-session-id")}
        init.read()
        _post(conn, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session).read()

        done, probes = threading.Event(), []

        def probe() -> None:
            health = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            while not done.is_set():
                health.request("GET", "/healthz")
                health.getresponse().read()
                probes.append(time.monotonic())

        prober = threading.Thread(target=probe)
        prober.start()
        while not probes:
            time.sleep(0.01)
        started = time.monotonic()
        answer = _post(conn, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                              "params": {"name": "echo_list", "arguments": {"text": "a"}}}, session)
        answer.read(1)  # the SSE headers came at once; this is the first byte of the event
        first_byte = time.monotonic()
        body = b"x" + answer.read()
        done.set()
        prober.join()

    event = json.loads(body.split(b"data: ", 1)[1])
    results = event["result"].get("structuredContent", {}).get("results", [])
    assert event["id"] == 1 and len(results) == 3000, str(event)[:600]
    window = first_byte - started
    marks = [started] + [t for t in probes if started < t < first_byte] + [first_byte]
    longest_wait = max(b - a for a, b in zip(marks, marks[1:]))
    assert longest_wait < window / 3, f"a probe waited {longest_wait:.2f} s of a {window:.2f} s window"
