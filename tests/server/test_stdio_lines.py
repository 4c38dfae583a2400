"""Over stdio every request line gets exactly one answer, and end of input waits for calls in
flight (issues #19.4 and #14.3)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time

import anyio
import pytest
from hypothesis import given, settings, strategies as st

from knowspec.impl.context import ToolOutput
from knowspec.impl.server.mcp_server import build_server
from knowspec.impl.server.pipeline import ToolRuntime
from knowspec.impl.server.stdio_transport import decode_line, stdio_transport

INIT = {"jsonrpc": "2.0", "id": "init", "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _call_line(request_id, arguments_json: str, tool: str = "search_concepts") -> str:
    return ('{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"%s","arguments":%s}}'
            % (json.dumps(request_id), tool, arguments_json))


HOSTILE_LINES = {
    "malformed JSON": "{not json",
    "batch array": '[{"jsonrpc":"2.0","id":90,"method":"ping"}]',
    "scalar": "42",
    "not UTF-8": b'{"jsonrpc":"2.0","id":91,"method":"ping","x":"\xff"}'.decode("latin-1"),
    "lone surrogate in arguments": _call_line(1, '{"bundle_path":"/tmp","query":"\\ud800"}'),
    "lone surrogate as id": '{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}',
    "nesting 199 deep": _call_line(2, '{"bundle_path":"/tmp","query":%s}' % ("[" * 199 + "]" * 199)),
    "nesting past the decoder": _call_line(3, '{"bundle_path":"/tmp","query":%s}' % ("[" * 5000 + "]" * 5000)),
    "request without method": '{"jsonrpc":"2.0","id":4}',
}


def _run_server(lines: list[str]) -> list[dict]:
    text = "\n".join([json.dumps(INIT), json.dumps(INITIALIZED), *lines]) + "\n"
    payload = text.encode("latin-1") if "\xff" in text else text.encode("utf-8")
    done = subprocess.run([sys.executable, "-m", "knowspec.impl.cli", "serve", "--stdio", "--appdir", "/nonexistent-appdir"],
                          input=payload, capture_output=True, timeout=120)
    return [json.loads(line) for line in done.stdout.decode("utf-8").splitlines()]


@pytest.mark.parametrize("case", sorted(HOSTILE_LINES))
def test_every_hostile_line_gets_exactly_one_answer(case):
    answers = _run_server([HOSTILE_LINES[case], '{"jsonrpc":"2.0","id":"after","method":"ping"}'])
    assert [a.get("id") for a in answers].count("init") == 1
    others = [a for a in answers if a.get("id") not in ("init", "after")]
    assert len(others) == 1, (case, answers)
    assert [a.get("id") for a in answers].count("after") == 1, "the session goes on after the bad line"


def test_lone_surrogate_in_arguments_is_invalid_request_and_deep_arguments_are_resource_limit():
    answers = {a.get("id"): a for a in _run_server([HOSTILE_LINES["lone surrogate in arguments"],
                                                    HOSTILE_LINES["nesting 199 deep"]])}
    assert answers[1]["result"]["structuredContent"]["code"] == "invalid_request"
    assert answers[2]["result"]["structuredContent"]["code"] == "resource_limit"


@pytest.mark.parametrize(("line", "code"), [
    (b"{not json", -32700),
    (b'\xff{"jsonrpc":"2.0"}', -32700),
    (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', -32600),
    (b'{"jsonrpc":"2.0","id":7}', -32600),
    *[(b'{"jsonrpc":"2.0","id":%s,"method":"ping"}' % bad, -32600)    # read by the SDK as notifications:
      for bad in (b"null", b"1.5", b"2.0", b"1E2", b"true", b"{}", b"[1]")],  # they had no answer at all
])
def test_lines_that_are_not_one_message_decode_to_a_json_rpc_error(line, code):
    answer = json.loads(decode_line(line))
    assert answer["error"]["code"] == code
    assert answer["id"] == (7 if b'"id":7' in line else None)


def test_calls_in_flight_at_end_of_input_are_answered_with_their_results(mini_registry):
    def slow(args, ctx):
        time.sleep(0.3)
        return ToolOutput({"text": args.text, "items": []})

    runtime = ToolRuntime(entries=mini_registry.TOOLS, handlers={"echo_text": slow})
    server = build_server(runtime)
    lines = [json.dumps(INIT), json.dumps(INITIALIZED),
             json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                         "params": {"name": "echo_text", "arguments": {"text": "late"}}})]
    stdin, stdout = io.BytesIO(("\n".join(lines) + "\n").encode()), io.BytesIO()

    async def go():
        async with stdio_transport(stdin, stdout, drain_seconds=30) as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(go)
    answers = {a["id"]: a for a in map(json.loads, stdout.getvalue().decode().splitlines())}
    assert "error" not in answers[9], answers[9]
    assert answers[9]["result"]["structuredContent"] == {"text": "late", "items": []}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pipe capacity is set with Linux's F_SETPIPE_SZ")
def test_the_answer_pipe_holds_a_big_answer_in_few_hand_overs(tmp_path):
    import fcntl

    from knowspec.impl.server.stdio_transport import PIPE_BYTES

    server = subprocess.Popen([sys.executable, "-m", "knowspec.impl.cli", "serve", "--stdio", "--appdir", str(tmp_path)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        server.stdin.write(json.dumps(INIT).encode() + b"\n")
        server.stdin.flush()
        assert json.loads(server.stdout.readline())["id"] == "init"
        assert fcntl.fcntl(server.stdout.fileno(), fcntl.F_GETPIPE_SZ) >= min(
            PIPE_BYTES, int(open("/proc/sys/fs/pipe-max-size").read()))
    finally:
        server.stdin.close()
        server.wait(30)


def test_a_client_that_closes_its_end_of_the_answers_ends_the_server_quietly(tmp_path):
    """It had ended with exit 1 and "failed: ExceptionGroup": a client leaving is no failure."""
    import subprocess
    import sys

    server = subprocess.Popen([sys.executable, "-m", "knowspec.impl.cli", "serve", "--stdio", "--appdir",
                               str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    server.stdin.write((json.dumps(initialize) + "\n").encode())
    server.stdin.flush()
    assert json.loads(server.stdout.readline())["id"] == 1
    server.stdout.close()
    try:
        for request_id in range(2, 40):
            server.stdin.write((json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}) + "\n")
                               .encode())
            server.stdin.flush()
            time.sleep(0.05)
        server.stdin.close()
    except BrokenPipeError:
        pass  # the server has stopped reading: what it should do
    assert server.wait(30) == 0
    err = server.stderr.read().decode()
    assert "failed" not in err and "Traceback" not in err


def _written_through_a_pipe(pieces: list[bytes]) -> bytes:
    """``pieces`` written by the transport's writer to a non-blocking pipe that a thread drains."""
    import os
    import threading

    from knowspec.impl.server.stdio_transport import _loop_writes, _non_blocking

    read_fd, write_fd = os.pipe()
    got = bytearray()

    def drain() -> None:
        while chunk := os.read(read_fd, 3000):  # slower than the writer: the pipe fills, writes are partial
            got.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        with _non_blocking([write_fd]):
            anyio.run(_loop_writes(write_fd), pieces)
    finally:
        os.close(write_fd)
        reader.join(30)
        os.close(read_fd)
    return bytes(got)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=64), st.integers(0, 200_000).map(lambda n: b"x" * n)), max_size=12))
def test_an_answers_pieces_arrive_whole_and_in_order(pieces):
    """One writev for the pieces of an answer (a write each had woken the client's read each
    time), partial writes into a full pipe carried on where they stopped."""
    assert _written_through_a_pipe(pieces) == b"".join(pieces)


def test_more_pieces_than_one_writev_takes_arrive_whole():
    from knowspec.impl.server.stdio_transport import IOV_MAX

    pieces = [bytes([i % 251]) * (i % 7) for i in range(3 * IOV_MAX + 5)]
    assert _written_through_a_pipe(pieces) == b"".join(pieces)
