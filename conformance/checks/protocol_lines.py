"""Every request line gets exactly one answer, whatever the line holds.

Rules: JSON-RPC 2.0 §5 (a request that cannot be parsed is answered with -32700 and id null; an
invalid request with -32600) and the contract's raw-argument walk (spec/okf/contract/read.md §3.0: invalid UTF-8
in arguments is ``invalid_request``, too deep is ``resource_limit``). A server may answer a line
with a JSON-RPC error or, for a well-formed call, with a tool result; what it may not do is stay
silent (the client waits forever) or answer twice. Over stdio each line is one message; over
HTTP each POST body is.
"""

from __future__ import annotations

import json
import time
from typing import Any

from knowspec.conformance.checks.raw_wire import INITIALIZED, RawHttp, RawStdio, initialize_message
from knowspec.conformance.checks.registry import CheckContext, check
from knowspec.conformance.failures import CheckFailed

RULE = ("JSON-RPC 2.0 §5 (-32700 parse error / -32600 invalid request, id null when unknown); "
        "spec/okf/contract/read.md §3.0 raw-argument walk; every request line gets exactly one answer")
PROBE_TOOL = "search_concepts"
ANSWER_SECONDS = 10.0
START_SECONDS = 60.0  # a cold server process may take a while to start
MIN_BUDGET = 30.0


def _call_line(request_id: Any, arguments_json: str, tool: str = PROBE_TOOL) -> bytes:
    return ('{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"%s","arguments":%s}}'
            % (json.dumps(request_id), tool, arguments_json)).encode()


def hostile_lines(bundle_path: str) -> list[tuple[str, bytes, Any]]:
    """(label, line, the id its answer must carry: a value, or None for id null)."""
    path = json.dumps(bundle_path)
    return [
        ("malformed JSON", b'{"jsonrpc":"2.0","id":"m1","method":', None),
        ("batch array", b'[{"jsonrpc":"2.0","id":"b1","method":"ping"}]', None),
        ("lone surrogate in arguments", _call_line("s1", '{"bundle_path":%s,"query":"\\ud800"}' % path), "s1"),
        ("nesting 199 deep in arguments",
         _call_line("d1", '{"bundle_path":%s,"query":%s}' % (path, "[" * 199 + "]" * 199)), "d1"),
        ("nesting 5000 deep in arguments",
         _call_line("d2", '{"bundle_path":%s,"query":%s}' % (path, "[" * 5000 + "]" * 5000)), "any"),
    ]


def _applies(ctx: CheckContext) -> str | None:
    if ctx.deadline is not None and ctx.deadline - time.monotonic() < MIN_BUDGET:
        return "time budget too short for the raw-line round trips"
    return None


def _judge(label: str, line: bytes, expected_id: Any, replies: list[dict[str, Any]]) -> None:
    if len(replies) != 1:
        raise CheckFailed(f"{label}: {len(replies)} answers to one request line, expected exactly 1",
                          arguments=line[:300].decode("utf-8", "replace"), response=replies[:3])
    reply = replies[0]
    if "unparseable" in reply or reply.get("jsonrpc") != "2.0" or not ("result" in reply or "error" in reply):
        raise CheckFailed(f"{label}: the answer is not a JSON-RPC response",
                          arguments=line[:300].decode("utf-8", "replace"), response=reply)
    if expected_id is None and reply.get("id") is not None:
        raise CheckFailed(f"{label}: an unreadable request must be answered with id null",
                          arguments=line[:300].decode("utf-8", "replace"), response=reply)
    if expected_id not in (None, "any") and reply.get("id") not in (expected_id, None):
        raise CheckFailed(f"{label}: the answer carries id {reply.get('id')!r}, expected {expected_id!r}",
                          arguments=line[:300].decode("utf-8", "replace"), response=reply)


def _over_stdio(ctx: CheckContext, lines: list[tuple[str, bytes, Any]]) -> None:
    with RawStdio(ctx.conn.target.argv()) as raw:
        raw.initialize(START_SECONDS)
        for label, line, expected_id in lines:
            raw.send(line)
            raw.send(b'{"jsonrpc":"2.0","id":"after","method":"ping"}')
            replies = []
            deadline = time.monotonic() + ANSWER_SECONDS
            while time.monotonic() < deadline:
                reply = raw.wait_for(lambda r: True, deadline - time.monotonic())
                if reply is None:
                    break
                if reply.get("id") == "after":
                    replies += raw.drain(0.2)  # a straggler for the hostile line would be a 2nd answer
                    break
                replies.append(reply)
            else:
                raise CheckFailed(f"{label}: the session stopped answering (no reply to a ping after it)",
                                  arguments=line[:300].decode("utf-8", "replace"))
            replies = [r for r in replies if r.get("id") != "after" and _is_response(r)]
            _judge(label, line, expected_id, replies)


def _is_response(message: Any) -> bool:
    """An answer to a request (a result or an error), or a line that is no message at all. A
    server may send notifications (a log line) and requests of its own (a ping) at any time:
    they answer nothing."""
    if not isinstance(message, dict) or "unparseable" in message:
        return True
    return ("result" in message or "error" in message) and "method" not in message


def _over_http(ctx: CheckContext, lines: list[tuple[str, bytes, Any]]) -> None:
    raw = RawHttp(ctx.conn.target.spec, ANSWER_SECONDS, ctx.conn.target.bearer_token)
    raw.initialize()
    for label, line, expected_id in lines:
        try:
            status, replies = raw.post(line)
        except OSError as exc:
            raise CheckFailed(f"{label}: no HTTP answer ({type(exc).__name__}: {exc})",
                              arguments=line[:300].decode("utf-8", "replace"))
        if label == "batch array" and len(replies) == 1 and "batch" in replies[0]:
            replies = replies[0]["batch"] if len(replies[0]["batch"]) == 1 else replies
        _judge(f"{label} (HTTP {status})", line, expected_id, [r for r in replies if _is_response(r)])


@check("every_line_answered", RULE, scope="server", applies=_applies, since=1)
def every_line_answered(ctx: CheckContext) -> None:
    """Malformed JSON, a batch, a lone surrogate and deep nesting each get exactly one answer."""
    lines = hostile_lines(ctx.fill()["bundle_path"])
    ctx.calls += len(lines)
    if ctx.conn.target.is_stdio:
        _over_stdio(ctx, lines)
    else:
        _over_http(ctx, lines)


STDOUT_RULE = ("MCP stdio transport: the server writes nothing to its stdout that is not a valid MCP message "
               "(a log line or a stray print there breaks every client reading the stream)")


def _stdio_target(ctx: CheckContext) -> str | None:
    if not ctx.conn.target.is_stdio:
        return "stdio targets only: over HTTP a body is one message (every_line_answered reads them)"
    return _applies(ctx)


def _read_tools(ctx: CheckContext) -> list[str]:
    """The advertised tools the contract says only read, in contract order (never a write)."""
    return [t.name for t in ctx.contract.tools if t.read_only and ctx.is_advertised(t.name)]


@check("stdout_only_messages", STDOUT_RULE, scope="server", applies=_stdio_target, since=1)
def stdout_only_messages(ctx: CheckContext) -> None:
    """From start-up on, ordinary requests (initialize, tools/list, a call of each read tool on a
    fixture bundle, ping) leave nothing on stdout but JSON-RPC messages."""
    fill = json.dumps(ctx.fill())
    lines = [b'{"jsonrpc":"2.0","id":"list","method":"tools/list"}',
             *(_call_line(f"call-{i}", fill, name) for i, name in enumerate(_read_tools(ctx))),
             b'{"jsonrpc":"2.0","id":"after","method":"ping"}']
    ctx.calls += len(lines)
    seen: list[dict[str, Any]] = []  # every line read, in order

    def answering(request_id: str) -> Any:
        def match(reply: dict[str, Any]) -> bool:
            seen.append(reply)
            return reply.get("id") == request_id
        return match

    with RawStdio(ctx.conn.target.argv()) as raw:
        raw.send(json.dumps(initialize_message()).encode())
        if raw.wait_for(answering("init"), START_SECONDS) is None:
            raise CheckFailed("no answer to initialize", response=seen[:3])
        raw.send(json.dumps(INITIALIZED).encode())
        for line in lines:
            raw.send(line)
        if raw.wait_for(answering("after"), ANSWER_SECONDS * len(lines)) is None:
            raise CheckFailed("the session stopped answering (no reply to a ping after the calls)", response=seen[-3:])
        seen += raw.drain(0.2)
    stray = [r.get("unparseable", r) for r in seen if "unparseable" in r or r.get("jsonrpc") != "2.0"]
    if stray:
        raise CheckFailed(f"{len(stray)} line(s) on stdout that are not JSON-RPC messages, the first: "
                          f"{str(stray[0])[:200]!r}", response=stray[:3])
