"""Tool answers are encoded once, off the event loop, and written as the SDK would write them
(issue #19: no serialisation on the loop; issue #18: big answers cheap)."""

from __future__ import annotations

import http.client
import io
import json
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import anyio
import mcp.types as types
import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from knowspec.impl.config import Settings
from knowspec.impl.context import ToolOutput
from knowspec.impl.rules import sliced_json
from knowspec.impl.server import mcp_server
from knowspec.impl.server.http_app import build_app
from knowspec.impl.server.native_memory import TRIM_AFTER_ANSWER_BYTES
from knowspec.impl.server.caller_load import AnswerBytesPerCaller
from knowspec.impl.server.parked_answers import PARKED_KEY, SEND_SLICE_BYTES, ParkedAnswers, ParkedAnswerWriter
from knowspec.impl.server.pipeline import ToolRuntime
from knowspec.impl.server.stdio_transport import stdio_transport
from serving import free_port, serving

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=12) | st.dictionaries(st.text(max_size=8), inner, max_size=8),
    max_leaves=60,
)


@hypothesis_settings(deadline=None)  # timing is not what this pins; a loaded machine must not fail it
@given(json_values, st.booleans())
def test_sliced_json_is_the_same_text_as_one_dumps(value, ensure_ascii):
    expected = json.dumps(value, ensure_ascii=ensure_ascii, separators=(",", ":"))
    saved = sliced_json.PIECE_WEIGHT, sliced_json.STRING_SLICE
    sliced_json.PIECE_WEIGHT, sliced_json.STRING_SLICE = 3, 4  # force slicing at every level
    try:
        assert "".join(sliced_json.json_pieces(value, ensure_ascii)) == expected
    finally:
        sliced_json.PIECE_WEIGHT, sliced_json.STRING_SLICE = saved


@hypothesis_settings(deadline=None)
@given(json_values, st.booleans())
def test_sliced_json_batching_light_groups_is_the_same_text_as_one_dumps(value, ensure_ascii):
    """Groups of two members, so light groups are batched whole, not only member by member."""
    expected = json.dumps(value, ensure_ascii=ensure_ascii, separators=(",", ":"))
    saved = sliced_json.PIECE_WEIGHT, sliced_json.STRING_SLICE, sliced_json.GROUP
    sliced_json.PIECE_WEIGHT, sliced_json.STRING_SLICE, sliced_json.GROUP = 6, 4, 2
    try:
        assert "".join(sliced_json.json_pieces(value, ensure_ascii)) == expected
    finally:
        sliced_json.PIECE_WEIGHT, sliced_json.STRING_SLICE, sliced_json.GROUP = saved


def _reference_weight(value) -> int:
    """What ``sliced_json.weight`` counts, written plainly: every value, plus all strings' length / 64."""
    def walk(v) -> tuple[int, int]:
        members = v.values() if isinstance(v, dict) else v if isinstance(v, list) else ()
        counts = [walk(m) for m in members]
        return 1 + sum(n for n, _ in counts), (len(v) if isinstance(v, str) else 0) + sum(c for _, c in counts)

    values, characters = walk(value)
    return values + (characters >> 6)


@given(json_values | st.lists(st.text(min_size=60, max_size=300), max_size=20))
def test_weight_counts_every_value_and_a_64th_of_each_strings_length(value):
    assert sliced_json.weight(value, limit=10**9) == _reference_weight(value)


@given(json_values, st.integers(0, 40))
def test_weight_stops_past_its_limit_having_counted_more_than_it(value, limit):
    full = _reference_weight(value)
    counted = sliced_json.weight(value, limit)
    assert counted == full if full <= limit else counted > limit


def test_weight_of_a_cyclic_value_ends_past_the_limit():
    loop: list = []
    loop.append(loop)
    assert sliced_json.weight(loop, limit=1000) > 1000


# ---- the same bytes as the SDK's own path, on every transport and protocol era -----------------

SAMPLE_BUNDLE = Path(__file__).resolve().parents[2] / "examples" / "okf-sample"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
CLIENT = {"name": "t", "version": "1"}
MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientInfo": CLIENT,
               "io.modelcontextprotocol/clientCapabilities": {}}
# What a text encoder may get wrong: non-ASCII (escaped on the modern wire), quotes, backslashes,
# control characters, U+2028, a character outside the BMP, a marker-like string.
AWKWARD = 'çay "q" \\ \n\t\x01 \u2028 😀 </x> & {"knowspec/parked":"0:0"}'


def _awkward(args, ctx):
    items = [{"text": AWKWARD + str(i), "kind": "a"} for i in range(300)]
    return ToolOutput({"results": items}, text=AWKWARD * 50)


def _mini_runtime(registry, settings: Settings) -> ToolRuntime:
    return ToolRuntime(settings, entries=registry.TOOLS, handlers={"echo_list": _awkward, "echo_text": None})


CALLS = [("echo_list", {"text": "a"}), ("echo_list", {"text": ""}), ("echo_text", {"text": "a"})]  # ok, schema error, not implemented


def _http_wire(runtime: ToolRuntime, calls: list[tuple[str, dict]]) -> list[tuple[str, str | None, bytes]]:
    """(content type, content length, body) of each call, on a 2025 session and then on the modern protocol."""
    app = build_app(runtime, host="testserver", dns_rebinding_protection=False)
    out = []
    with TestClient(app) as client:
        init = client.post("/mcp", headers=HEADERS, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": CLIENT}})
        session = {**HEADERS, "Mcp-Session-Id": init.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
        client.post("/mcp", headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        for request_id, (name, arguments) in enumerate(calls, 1):
            legacy = client.post("/mcp", headers=session, json={"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                                                              "params": {"name": name, "arguments": arguments}})
            modern = client.post("/mcp", headers={**HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
                                                  "Mcp-Name": name},
                                 json={"jsonrpc": "2.0", "id": f"m{request_id}", "method": "tools/call",
                                       "params": {"name": name, "arguments": arguments, "_meta": MODERN_META}})
            out += [(r.headers["content-type"], r.headers.get("content-length"), r.content) for r in (legacy, modern)]
    return out


def _stdio_wire(runtime: ToolRuntime, calls: list[tuple[str, dict]], park: bool, first_id: int = 1) -> list[bytes]:
    """The answer lines of ``calls``, ids from ``first_id``, on one stdio session. A session takes
    its calls at once and runs them side by side (every line is in its stdin from the start)."""
    lines = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": CLIENT}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    lines += [{"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
              for i, (name, arguments) in enumerate(calls, first_id)]
    stdin = io.BytesIO("".join(json.dumps(line) + "\n" for line in lines).encode())
    stdout = io.BytesIO()
    answers = ParkedAnswers() if park else None
    server = mcp_server.build_server(runtime, answers=answers)

    async def go():
        async with stdio_transport(stdin, stdout, drain_seconds=30, answers=answers) as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(go)
    return sorted(stdout.getvalue().splitlines())


def test_the_stdio_transport_reports_a_big_parked_answer_once_written(mini_registry, tmp_path):
    """The heap is trimmed only after the answer's bytes are out: the call's own trim ran
    before they were encoded (``native_memory.HeapTrimmer.after_answer``)."""
    big = "x" * TRIM_AFTER_ANSWER_BYTES
    handlers = {"echo_list": lambda args, ctx: ToolOutput({"results": []}, text=big if args.text == "big" else "s"),
                "echo_text": None}
    runtime = ToolRuntime(Settings(appdir=tmp_path), entries=mini_registry.TOOLS, handlers=handlers)
    stdout = io.BytesIO()
    reported = []

    def written(size: int) -> None:
        reported.append((size, len(stdout.getvalue())))

    lines = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": CLIENT}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo_list", "arguments": {"text": "a"}}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo_list", "arguments": {"text": "big"}}}]
    stdin = io.BytesIO("".join(json.dumps(line) + "\n" for line in lines).encode())
    answers = ParkedAnswers(written=written)
    server = mcp_server.build_server(runtime, answers=answers)

    async def go():
        async with stdio_transport(stdin, stdout, drain_seconds=30, answers=answers) as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(go)
    assert len(reported) == 1  # the small answer is not reported
    size, out_when_reported = reported[0]
    assert size >= TRIM_AFTER_ANSWER_BYTES and out_when_reported >= size  # reported after it was written


def test_the_http_writer_reports_a_big_parked_answer_once_sent(mini_registry, tmp_path):
    big = "y" * TRIM_AFTER_ANSWER_BYTES
    handlers = {"echo_list": lambda args, ctx: ToolOutput({"results": []}, text=big), "echo_text": None}
    runtime = ToolRuntime(Settings(appdir=tmp_path, allow_anonymous=True), entries=mini_registry.TOOLS,
                          handlers=handlers)
    reported = []
    runtime.heap.after_answer = reported.append  # what build_app hands the writer
    app = build_app(runtime, host="testserver", dns_rebinding_protection=False)
    with TestClient(app) as client:
        answer = client.post("/mcp", headers={**HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
                                              "Mcp-Name": "echo_list"},
                             json={"jsonrpc": "2.0", "id": "m1", "method": "tools/call",
                                   "params": {"name": "echo_list", "arguments": {"text": "a"}, "_meta": MODERN_META}})
        deadline = time.monotonic() + 10
        while not reported and time.monotonic() < deadline:  # reported after the last byte went out
            time.sleep(0.01)
    assert len(answer.content) >= TRIM_AFTER_ANSWER_BYTES
    assert answer.status_code == 200 and len(reported) == 1 and reported[0] >= TRIM_AFTER_ANSWER_BYTES


def test_an_http_call_parks_its_answer_for_the_request_the_writer_releases(mini_registry, tmp_path, monkeypatch):
    parked_for: list = []
    released: list = []
    park, release = ParkedAnswers.park, ParkedAnswers.release
    monkeypatch.setattr(ParkedAnswers, "park", lambda self, result, protocol_version, owner=None: (
        parked_for.append(owner), park(self, result, protocol_version, owner))[1])
    monkeypatch.setattr(ParkedAnswers, "release", lambda self, owner: (released.append(owner), release(self, owner))[1])
    _http_wire(_mini_runtime(mini_registry, Settings(appdir=tmp_path, allow_anonymous=True)),
               [("echo_list", {"text": "a"})])  # one call on a 2025 session, one on the modern protocol
    assert len(parked_for) == 2
    assert all(owner is not None and any(owner is scope for scope in released) for owner in parked_for)


def _both_paths(monkeypatch, wire):
    """``wire(park)`` with answers parked, then with the SDK encoding the real result itself."""
    parked = wire(True)
    monkeypatch.setattr(mcp_server, "parks_answers_for", lambda protocol_version: False)
    return parked, wire(False)


def test_a_parked_answer_is_the_bytes_the_sdk_writes_over_http_in_both_protocol_eras(mini_registry, tmp_path, monkeypatch):
    """Fails when an SDK release changes how it writes an answer (framing, escaping, shaping)."""
    settings = Settings(appdir=tmp_path, allow_anonymous=True)
    parked, sdk = _both_paths(monkeypatch, lambda park: _http_wire(_mini_runtime(mini_registry, settings), CALLS))
    assert [kind for kind, _, _ in parked] == ["text/event-stream", "application/json"] * len(CALLS)
    assert b"\\u00e7ay" in parked[1][2] and "çay".encode() in parked[0][2]  # modern escapes, 2025 does not
    for ours, theirs in zip(parked, sdk):
        assert ours == theirs
        assert PARKED_KEY.encode() + b'":"' not in ours[2]


def test_a_parked_answer_is_the_bytes_the_sdk_writes_over_stdio(mini_registry, tmp_path, monkeypatch):
    settings = Settings(appdir=tmp_path)
    parked, sdk = _both_paths(monkeypatch, lambda park: _stdio_wire(_mini_runtime(mini_registry, settings), CALLS, park))
    assert parked == sdk and len(parked) == 1 + len(CALLS)
    assert "çay".encode() in b"".join(parked)


def _fallback_texts(args, ctx):
    """echo_list answered without a text of its own: the pipeline writes the json fallback. Text
    "a": non-ASCII (the modern era escapes it), "b": ASCII with a DEL (escaped there too), else ASCII."""
    word = {"a": AWKWARD, "b": 'del \x7f "q" \\ \n'}.get(args.text, "plain ascii")
    return ToolOutput({"results": [{"text": f"{word} {i}", "kind": "a"} for i in range(40)]})


FALLBACK_CALLS = [("echo_list", {"text": t}) for t in ("a", "b", "c")]


def test_a_wrapped_answer_encoded_once_is_the_bytes_the_sdk_writes_on_every_transport(mini_registry, tmp_path,
                                                                                       monkeypatch):
    settings = Settings(appdir=tmp_path, allow_anonymous=True)

    def runtime() -> ToolRuntime:
        return ToolRuntime(settings, entries=mini_registry.TOOLS, handlers={"echo_list": _fallback_texts})

    parked, sdk = _both_paths(monkeypatch, lambda park: (_http_wire(runtime(), FALLBACK_CALLS),
                                                         _stdio_wire(runtime(), FALLBACK_CALLS, park)))
    assert parked == sdk
    stdio_answers = [json.loads(line)["result"] for line in parked[1][1:]]
    assert [json.loads(a["content"][0]["text"]) == a["structuredContent"]["results"] for a in stdio_answers] == [True] * 3


def test_a_wrapped_json_answer_is_encoded_once(mini_registry, tmp_path, monkeypatch):
    """The json fallback of a wrapped answer and its structured content come from one encoding,
    which parking reuses (its values are not encoded again)."""
    from knowspec.impl.server import parked_answers

    runtime = ToolRuntime(Settings(appdir=tmp_path), entries=mini_registry.TOOLS, handlers={"echo_list": _fallback_texts})
    entry = runtime.entries["echo_list"]
    output = _fallback_texts(entry.input_model.model_validate({"text": "a"}), None)
    result = runtime._success(entry, output)
    compact = {"ensure_ascii": False, "separators": (",", ":")}
    assert result.content[0].text == json.dumps(output.structured["results"], **compact)
    assert result.structured_json == json.dumps(output.structured, **compact)
    encoded_values = []
    real = parked_answers.encoded
    monkeypatch.setattr(parked_answers, "encoded", lambda value, ascii_only: encoded_values.append(value)
                        or real(value, ascii_only))
    ParkedAnswers().park(result, "2025-06-18")
    assert encoded_values == [result.content[0].text]


@hypothesis_settings(deadline=None)
@given(json_values, st.text(min_size=1, max_size=8), st.booleans())  # "" names no wrap
def test_a_wrapped_values_text_is_cut_from_the_whole_encoding(value, wrap, with_other_key):
    from knowspec.impl.server.tool_results import compact_json, wrapped_json_text

    structured = {wrap: value, **({wrap + "x": 1} if with_other_key else {})}
    both = wrapped_json_text(structured, wrap, "plain")
    assert wrapped_json_text(structured, wrap, "go") is None  # the Go encoder writes its own text
    if with_other_key:
        assert both is None
    else:
        assert both == (compact_json(structured), compact_json(value))


def test_a_lone_surrogate_in_a_wrapped_answer_is_left_to_the_encoder():
    """Its JSON has no UTF-8 bytes: parking takes the path it took before (``encoded``, then pydantic)."""
    from knowspec.impl.server.parked_answers import _written_structured
    from knowspec.impl.server.tool_results import success_result, wrapped_json_text

    structured = {"results": ["a\ud800"]}
    whole, text = wrapped_json_text(structured, "results", "plain")
    assert _written_structured(success_result(structured, text, whole), ascii_only=False) is None
    plain = {"results": ["a"]}
    assert _written_structured(success_result(plain, "x", json.dumps(plain)), ascii_only=False) == json.dumps(plain).encode()


def test_a_wrapped_value_json_cannot_carry_is_left_to_the_fallback():
    from knowspec.impl.server.tool_results import wrapped_json_text

    assert wrapped_json_text({"results": [float("nan")]}, "results", "plain") is None
    assert wrapped_json_text({"results": [{1, 2}]}, "results", "plain") is None


@given(json_values | st.text(alphabet=st.characters(blacklist_categories=()), max_size=40), st.sampled_from([1, 2, 5, 4096]))
def test_json_escaped_past_tilde_is_what_ensure_ascii_writes(value, span):
    """Kept answers are kept as raw UTF-8 JSON; the modern HTTP era writes them escaped, span by
    span (short spans here: their ends fall inside characters)."""
    from knowspec.impl.server import parked_answers

    raw = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    saved, parked_answers._ASCII_SPAN = parked_answers._ASCII_SPAN, span
    try:
        escaped = parked_answers.ascii_json(raw)
    finally:
        parked_answers._ASCII_SPAN = saved
    assert escaped == json.dumps(value, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def _keeping(built: list[str]):
    """An echo_list handler whose answers are kept (``kept_answers``): each text is built once and
    then given again from its kept answer. Text "a": what an encoder may get wrong; "b": ASCII
    with a DEL; else plain ASCII."""
    from knowspec.impl.context import AnswerKey
    from knowspec.impl.kept_answers import kept_output

    def handler(args, ctx):
        key = AnswerKey(("echo_list", args.text), "revision")
        kept = kept_output(ctx.runtime, key)
        if kept is not None:
            return kept
        built.append(args.text)
        word = {"a": AWKWARD + "\x7f", "b": 'del \x7f "q" \\ \n'}.get(args.text, "plain ascii")
        return ToolOutput({"results": [{"text": f"{word} {i}", "kind": "a"} for i in range(40)]}, text=word * 30,
                          keep=key)

    return handler


KEEP_ROUND = [("echo_list", {"text": t}) for t in ("a", "b", "c")]
KEEP_CALLS = KEEP_ROUND * 2  # the second round: kept answers


def _stdio_rounds(runtime: ToolRuntime, park: bool) -> list[bytes]:
    """``KEEP_CALLS`` over stdio, a round per session on the same runtime: a session runs its
    calls side by side, so the same text twice in one session could be built twice (both calls
    missing the kept answer before either keeps it)."""
    first = _stdio_wire(runtime, KEEP_ROUND, park)
    return first + _stdio_wire(runtime, KEEP_ROUND, park, first_id=len(KEEP_ROUND) + 1)


def test_a_kept_answer_is_the_bytes_the_sdk_writes_on_every_transport(mini_registry, tmp_path, monkeypatch):
    from knowspec.impl import runtime as process

    settings = Settings(appdir=tmp_path, allow_anonymous=True)
    built: list[str] = []

    def runtime() -> ToolRuntime:  # a runtime of its own: nothing kept by an earlier wire
        return ToolRuntime(settings, entries=mini_registry.TOOLS, handlers={"echo_list": _keeping(built)},
                           process_runtime=process.Runtime())

    parked, sdk = _both_paths(monkeypatch, lambda park: (_http_wire(runtime(), KEEP_CALLS),
                                                         _stdio_rounds(runtime(), park)))
    assert sorted(built) == sorted(["a", "b", "c"] * 4)  # each wire built each answer once: the rest were kept
    assert parked == sdk
    http = parked[0]

    def answer(body: bytes) -> dict:
        return json.loads(body[body.index(b"{"):])["result"]

    assert [answer(body) for _, _, body in http[:6]] == [answer(body) for _, _, body in http[6:]]  # built, then kept
    assert b"\\u007f" in http[7][2] and b"\x7f" in http[6][2]  # kept: the modern era escapes DEL, the 2025 era not


def test_an_answer_that_fails_its_schema_is_never_kept(mini_registry, tmp_path):
    from knowspec.impl import runtime as process
    from knowspec.impl.context import AnswerKey
    from knowspec.impl.kept_answers import kept_answer

    key = AnswerKey(("echo_list", "bad"), "revision")
    calls = []

    def bad(args, ctx):
        calls.append(1)
        return ToolOutput({"results": "not a list"}, text="x", keep=key)

    kept_runtime = process.Runtime()
    runtime = ToolRuntime(Settings(appdir=tmp_path), entries=mini_registry.TOOLS, handlers={"echo_list": bad},
                          process_runtime=kept_runtime)
    for _ in range(2):
        result = anyio.run(runtime.call, "echo_list", {"text": "a"})
        assert result.is_error and result.structured_content["code"] == "schema_validation"
    assert calls == [1, 1] and kept_answer(kept_runtime, key) is None


def _stdio_pipe_wire(runtime: ToolRuntime, calls: list[tuple[str, dict]], reader_delay: float) -> list[bytes]:
    """``_stdio_wire`` (parked) over two OS pipes, as a client starts a server; the client starts
    reading only after ``reader_delay`` seconds, so a long answer fills the pipe first."""
    import os

    lines = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": CLIENT}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    lines += [{"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
              for i, (name, arguments) in enumerate(calls, 1)]
    (in_r, in_w), (out_r, out_w) = os.pipe(), os.pipe()
    received = bytearray()

    def client_writes() -> None:
        with open(in_w, "wb") as sink:
            sink.write("".join(json.dumps(line) + "\n" for line in lines).encode())

    def client_reads() -> None:
        time.sleep(reader_delay)
        with open(out_r, "rb") as source:
            received.extend(source.read())

    answers = ParkedAnswers()
    server = mcp_server.build_server(runtime, answers=answers)
    threads = [threading.Thread(target=client_writes), threading.Thread(target=client_reads)]
    for thread in threads:
        thread.start()
    with open(in_r, "rb", buffering=0) as stdin, open(out_w, "wb") as stdout:
        async def go():
            async with stdio_transport(stdin, stdout, drain_seconds=30, answers=answers) as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(go)
        assert os.get_blocking(stdin.fileno()) and os.get_blocking(stdout.fileno())  # modes given back
    for thread in threads:
        thread.join(30)
    return sorted(bytes(received).splitlines())


def test_pipes_are_served_from_the_event_loop_with_the_same_bytes(mini_registry, tmp_path, monkeypatch):
    """Over pipes, a call costs one thread hand-over (its handler's): no read, write, flush or
    placeholder encoding goes to a worker thread, and a full pipe is waited on, not lost."""
    calls = CALLS * 6  # about 150 KB of answers: more than a pipe holds while the client waits
    runtime = _mini_runtime(mini_registry, Settings(appdir=tmp_path))
    expected = _stdio_wire(runtime, calls, park=True)
    handed_over: list[str] = []
    real = anyio.to_thread.run_sync

    async def counted(func, *args, **kwargs):
        handed_over.append(getattr(func, "__qualname__", repr(func)))
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
    assert _stdio_pipe_wire(runtime, calls, reader_delay=0.5) == expected
    # the handlers, and the initialize answer's encoding (it is no parked placeholder)
    assert sorted(handed_over) == sorted(["ToolRuntime._in_thread.<locals>.work"] * len(calls)
                                         + ["_serving.<locals>.encoded"]), handed_over


def test_list_concepts_and_graph_answers_are_the_sdk_path_bytes_on_every_transport(tmp_path, monkeypatch):
    """The golden comparison for issue #18's big answers: list_concepts (structured content and
    Go-compatible text) and get_semantic_graph on the wire, built and then kept
    (``kept_answers``), parked against the SDK's own serialisation."""
    from knowspec.impl import runtime as process

    settings = Settings(appdir=tmp_path, allow_anonymous=True, bundle_roots=(SAMPLE_BUNDLE,))
    calls = [("list_concepts", {"bundle_path": str(SAMPLE_BUNDLE)}),
             ("get_semantic_graph", {"bundle_path": str(SAMPLE_BUNDLE)})] * 2

    def runtime() -> ToolRuntime:  # nothing kept by an earlier wire
        return ToolRuntime(settings, process_runtime=process.Runtime())

    parked, sdk = _both_paths(monkeypatch, lambda park: (_http_wire(runtime(), calls), _stdio_wire(runtime(), calls, park)))
    assert parked == sdk
    answers = [json.loads(line)["result"] for line in parked[1][1:]]
    assert answers[0] == answers[2] and answers[1] == answers[3]  # (lines in id order) built, then kept
    assert answers[0]["structuredContent"]["concepts"] and json.loads(answers[0]["content"][0]["text"])["concepts"]
    assert answers[1]["structuredContent"]["@graph"]


def test_output_validation_still_runs_for_a_parked_answer(mini_registry, tmp_path):
    def off_schema(args, ctx):
        return ToolOutput({"results": [{"text": "x", "kind": "not-an-enum-value"}]})

    runtime = ToolRuntime(Settings(appdir=tmp_path), entries=mini_registry.TOOLS, handlers={"echo_list": off_schema})
    [_, answer] = _stdio_wire(runtime, [("echo_list", {"text": "a"})], park=True)
    result = json.loads(answer)["result"]
    assert result["isError"] and result["structuredContent"]["code"] == "schema_validation"


# ---- the splice --------------------------------------------------------------------------------

def _placeholder_line(answers: ParkedAnswers, request_id, result: types.CallToolResult) -> bytes:
    placeholder = answers.park(result, "2025-06-18")
    dumped = placeholder.model_dump(by_alias=True, mode="json", exclude_none=True)
    return types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result=dumped).model_dump_json(
        by_alias=True, exclude_unset=True).encode()


def test_a_parked_answer_is_taken_once_by_its_placeholder():
    answers = ParkedAnswers()
    result = types.CallToolResult(content=[types.TextContent(type="text", text="big")], structured_content={"a": [1]})
    line = _placeholder_line(answers, 1, result)
    assert len(answers) == 1 and b"big" not in line
    assert json.loads(b"".join(answers.splice(line)))["result"]["structuredContent"] == {"a": [1]}
    assert len(answers) == 0
    [again] = answers.splice(line)  # taken: a second placeholder for it is answered as unavailable
    assert json.loads(again)["error"]["code"] == types.INTERNAL_ERROR
    assert answers.splice(b'{"jsonrpc":"2.0","id":2,"result":{"content":[]}}') is None


def test_an_answer_parked_too_long_is_dropped_and_its_response_says_so():
    now = [0.0]
    answers = ParkedAnswers(max_age=10, clock=lambda: now[0])
    line = _placeholder_line(answers, 3, types.CallToolResult(content=[types.TextContent(type="text", text="old")]))
    now[0] = 11.0
    _placeholder_line(answers, 4, types.CallToolResult(content=[]))  # parking purges what is stale
    [frame] = answers.splice(b"data: " + line + b"\r\n\r\n")
    assert frame.startswith(b"data: {") and frame.endswith(b"}\r\n\r\n")
    error = json.loads(frame[6:-4])
    assert error["id"] == 3 and error["error"]["code"] == types.INTERNAL_ERROR and len(answers) == 1
    assert PARKED_KEY.encode() not in frame


def test_an_answer_for_an_http_request_that_has_ended_is_not_kept():
    answers = ParkedAnswers()
    result = types.CallToolResult(content=[types.TextContent(type="text", text="t")])
    waiting, gone = {}, {}
    answers.park(result, "2025-06-18", owner=waiting)
    answers.park(result, "2025-06-18", owner=gone)
    assert len(answers) == 2
    answers.release(gone)  # its client hung up: the SDK drops the placeholder, the bytes go too
    answers.park(result, "2025-06-18", owner=gone)  # a call that ends after its request did
    assert len(answers) == 1
    answers.release(waiting)
    assert len(answers) == 0


def test_the_http_writer_drops_what_was_parked_for_a_request_it_never_wrote():
    answers = ParkedAnswers()
    result = types.CallToolResult(content=[types.TextContent(type="text", text="t")])

    async def sdk_whose_client_left(scope, receive, send):  # parks, then finds no stream to answer on
        answers.park(result, "2025-06-18", owner=scope)

    writer = ParkedAnswerWriter(sdk_whose_client_left, answers)

    async def go():
        async def nothing(*_):
            return {"type": "http.disconnect"}

        await writer({"type": "http", "path": "/mcp", "headers": []}, nothing, nothing)

    anyio.run(go)
    assert len(answers) == 0


class SdkWritingOnePlaceholder:
    """Stands in for the SDK: parks a ``size``-byte answer and writes its placeholder as the body."""

    def __init__(self, answers: ParkedAnswers, size: int) -> None:
        self.answers, self.size = answers, size

    async def __call__(self, scope, receive, send):
        result = types.CallToolResult(content=[types.TextContent(type="text", text="a" * self.size)])
        line = _placeholder_line(self.answers, 1, result)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": line})


def _http_scope(client: str) -> dict:
    return {"type": "http", "path": "/mcp", "headers": [], "client": (client, 1)}


def test_the_http_writer_hands_the_transport_a_parked_answer_in_slices():
    answers = ParkedAnswers()
    writer = ParkedAnswerWriter(SdkWritingOnePlaceholder(answers, 3 * SEND_SLICE_BYTES), answers)
    bodies: list[bytes] = []

    async def send(message):
        if message["type"] == "http.response.body":
            bodies.append(message["body"])

    anyio.run(writer, _http_scope("10.0.0.1"), None, send)
    assert len(bodies) > 3 and max(map(len, bodies)) <= SEND_SLICE_BYTES  # the transport copies each one
    answer = json.loads(b"".join(bodies))
    assert answer["result"]["content"][0]["text"] == "a" * (3 * SEND_SLICE_BYTES)


def test_a_caller_with_too_many_unread_answers_gets_an_error_instead_of_one_more():
    answers = ParkedAnswers()
    unsent = AnswerBytesPerCaller(cap=3 * SEND_SLICE_BYTES)
    writer = ParkedAnswerWriter(SdkWritingOnePlaceholder(answers, 2 * SEND_SLICE_BYTES), answers, unsent=unsent)

    async def go():
        never_read = anyio.Event()
        got: dict[str, bytes] = {}

        async def stalled_client(message):  # takes the head and one slice, then reads no more
            if message["type"] == "http.response.body":
                await never_read.wait()

        def reading(name):
            async def send(message):
                if message["type"] == "http.response.body":
                    got[name] = got.get(name, b"") + message["body"]
            return send

        async with anyio.create_task_group() as group:
            group.start_soon(writer, _http_scope("10.0.0.1"), None, stalled_client)
            await anyio.sleep(0.05)
            await writer(_http_scope("10.0.0.1"), None, reading("same caller"))
            await writer(_http_scope("10.0.0.2"), None, reading("another caller"))
            never_read.set()
        return got

    got = anyio.run(go)
    refused = json.loads(got["same caller"])
    assert refused["error"]["code"] == types.INTERNAL_ERROR and "not read" in refused["error"]["message"]
    assert json.loads(got["another caller"])["result"]["content"][0]["text"] == "a" * (2 * SEND_SLICE_BYTES)
    assert unsent["address 10.0.0.1"] == 0 and len(answers) == 0


def test_a_marker_inside_a_json_string_is_never_spliced():
    answers = ParkedAnswers()
    line = _placeholder_line(answers, 5, types.CallToolResult(content=[types.TextContent(type="text", text="t")]))
    token_marker = line[line.index(b'"knowspec/parked:'):line.index(b'"', line.index(b'"knowspec/parked:') + 1) + 1]
    echoed = json.dumps({"jsonrpc": "2.0", "id": 6, "error": {"code": 1, "message": token_marker.decode()}}).encode()
    assert answers.splice(echoed) is None and len(answers) == 1


_BIG_ANSWER_SERVER = textwrap.dedent("""
    import sys
    import threading
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    import uvicorn
    import mini_generated.registry as registry
    from knowspec.impl.config import Settings
    from knowspec.impl.context import ToolOutput
    from knowspec.impl.server import parked_answers
    from knowspec.impl.server.http_app import build_app
    from knowspec.impl.server.pipeline import ToolRuntime

    TEXT = "é" * (24 * 1024 * 1024)
    ITEMS = [{"text": str(i) + "t" * 8000, "kind": "a"} for i in range(3000)]

    def big(args, ctx):
        return ToolOutput({"results": ITEMS}, text=TEXT)

    # The big text's encoding waits until a /healthz request has been answered after it began:
    # off the loop that takes one probe; on the loop no probe can be answered, and it gives up.
    encoding, health_answered = threading.Event(), threading.Event()
    outcome = Path(sys.argv[2]) / "health-during-encoding"
    encode = parked_answers.encoded

    def encoded_once_health_answers(value, ensure_ascii):
        if isinstance(value, str) and len(value) == len(TEXT):
            encoding.set()
            outcome.write_text("answered" if health_answered.wait(30) else "no answer in 30 s")
        return encode(value, ensure_ascii)

    parked_answers.encoded = encoded_once_health_answers

    def watching_health(app):
        async def asgi(scope, receive, send):
            await app(scope, receive, send)
            if scope["type"] == "http" and scope["path"] == "/healthz" and encoding.is_set():
                health_answered.set()
        return asgi

    settings = Settings(appdir=Path(sys.argv[2]), allow_anonymous=True)
    runtime = ToolRuntime(settings, entries=registry.TOOLS, handlers={"echo_list": big})
    uvicorn.run(watching_health(build_app(runtime)), host="127.0.0.1", port=int(sys.argv[3]), log_level="warning")
""")

_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _post(conn: http.client.HTTPConnection, message: dict, headers: dict) -> http.client.HTTPResponse:
    conn.request("POST", "/mcp", body=json.dumps(message), headers=headers)
    return conn.getresponse()


@pytest.mark.parametrize("era", ["2025-06-18", "2026-07-28"])
def test_health_answers_while_a_large_answer_is_encoded(mini_registry, tmp_path, era):
    """While one client waits for a ~100 MiB answer, /healthz keeps answering, on a 2025-era
    session and on a 2026-07-28 single exchange alike.

    The server's encoding of the answer's big text holds until a health probe has been answered
    after it began (``_BIG_ANSWER_SERVER``): an event, not a clock, so a busy machine cannot fail
    it. With the SDK encoding on the loop, no probe is answered and the encoding gives up; with
    the answer not parked at all, nothing records the encoding.
    """
    root = str(Path(mini_registry.__file__).parent.parent)
    port = free_port()
    with serving([sys.executable, "-c", _BIG_ANSWER_SERVER, root, str(tmp_path), str(port)], port):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        params: dict = {"name": "echo_list", "arguments": {"text": "a"}}
        if era == "2026-07-28":  # no handshake: every request carries its envelope
            session = {**_HEADERS, "MCP-Protocol-Version": era, "Mcp-Method": "tools/call", "Mcp-Name": "echo_list"}
            params["_meta"] = MODERN_META
        else:
            init = _post(conn, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": era, "capabilities": {}, "clientInfo": CLIENT}}, _HEADERS)
            session = {**_HEADERS, "Mcp-Session-Id": init.getheader("mcp-session-id")}
            init.read()
            _post(conn, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session).read()

        done = threading.Event()

        def probe() -> None:
            health = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            while not done.is_set():
                health.request("GET", "/healthz")
                health.getresponse().read()

        prober = threading.Thread(target=probe)
        prober.start()
        try:
            body = _post(conn, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, session).read()
        finally:
            done.set()
            prober.join()

    event = json.loads(body.split(b"data: ", 1)[1] if body.startswith(b"event:") else body)
    results = event["result"].get("structuredContent", {}).get("results", [])
    assert event["id"] == 1 and len(results) == 3000, str(event)[:600]
    outcome = tmp_path / "health-during-encoding"
    assert outcome.exists(), "the answer's text was not encoded by the parked answers (off the loop)"
    assert outcome.read_text() == "answered", outcome.read_text()
