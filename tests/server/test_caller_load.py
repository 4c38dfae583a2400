"""No caller can take the server from the others: at most so many HTTP requests in flight per
caller (429), at most so many tool calls running per caller (a JSON-RPC error), and all request
bodies held at once within one budget (503; 413 for a body no wait would let in). A probe's 95 parallel graph calls from one reader
had made everyone else wait 48 s, and four parallel 65 MiB bodies held 1.4 GB."""

from __future__ import annotations

import json
import threading

import anyio
import pytest
from starlette.testclient import TestClient

from knowspec.impl.config import Settings
from knowspec.impl.context import ToolOutput
from knowspec.impl.server.body_limits import MCP_TOTAL_SECONDS, BodyLimitMiddleware, BodyRule
from knowspec.impl.server.call_turns import CallTurns
from knowspec.impl.server.caller_load import AnswerBytesPerCaller, CallsPerCaller, InFlight, RequestsPerCaller
from knowspec.impl.server.http_app import build_app
from knowspec.impl.server.mcp_server import BUSY
from knowspec.impl.server.pipeline import AdmissionRefused, ToolRuntime

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def test_in_flight_counts_each_key_apart_up_to_its_cap():
    counts = InFlight(2)
    assert counts.take("a") and counts.take("a") and not counts.take("a")
    assert counts.take("b")
    counts.give("a")
    assert counts["a"] == 1 and counts.take("a")


# --- requests in flight, the middleware against a stand-in app -----------------------------------

class HeldApp:
    """Answers 200 once ``release`` is set; counts the requests it got."""

    def __init__(self) -> None:
        self.release = anyio.Event()
        self.got = 0

    async def __call__(self, scope, receive, send):
        self.got += 1
        await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


def _scope(path="/mcp", client="10.0.0.1", method="POST", headers=()) -> dict:
    return {"type": "http", "method": method, "path": path, "headers": list(headers), "client": (client, 5000)}


async def _answer(app, scope, body: bytes = b"") -> dict:
    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}

    await app(scope, receive, send)
    head = sent[0]
    return {"status": head["status"], "headers": dict(head.get("headers") or []),
            "body": b"".join(m.get("body", b"") for m in sent[1:])}


def _together(app, scopes, release, *, body: bytes = b"") -> list[dict]:
    """Send every scope at once; set ``release`` once all have arrived; the answers in order."""
    async def go():
        answers: list[dict | None] = [None] * len(scopes)

        async def one(index, scope):
            answers[index] = await _answer(app, scope, body)

        async with anyio.create_task_group() as group:
            for index, scope in enumerate(scopes):
                group.start_soon(one, index, scope)
            await anyio.sleep(0.05)
            release.set()
        return answers

    return anyio.run(go)


def test_a_caller_past_its_requests_in_flight_is_refused_429_and_another_caller_is_served():
    held = HeldApp()
    app = RequestsPerCaller(held, per_caller=2)
    answers = _together(app, [_scope(), _scope(), _scope(), _scope(client="10.0.0.2")], held.release)
    assert [a["status"] for a in answers] == [200, 200, 429, 200] and held.got == 3
    refusal = json.loads(answers[2]["body"])
    assert "at most 2" in refusal["error"]["message"] and answers[2]["headers"][b"retry-after"] == b"1"
    assert anyio.run(_answer, app, _scope())["status"] == 200  # answered requests make room


def test_a_rest_request_past_the_cap_gets_the_rate_limited_envelope():
    held = HeldApp()
    app = RequestsPerCaller(held, per_caller=1)
    answers = _together(app, [_scope("/ClientREST/HelpSearch")] * 2, held.release)
    assert [a["status"] for a in answers] == [200, 429]
    assert json.loads(answers[1]["body"])["code"] == "rate_limited"


def test_event_streams_are_left_to_the_session_quota():
    held = HeldApp()
    app = RequestsPerCaller(held, per_caller=1)
    answers = _together(app, [_scope(method="GET")] * 3, held.release)
    assert [a["status"] for a in answers] == [200, 200, 200]


# --- request bodies across callers ---------------------------------------------------------------

def _big_call(size: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "t", "arguments": {"text": "x" * size}}}).encode()


BIG = _big_call(2 << 20)  # past the 1 MiB of a small body
SIZED = [(b"content-length", str(len(BIG)).encode()), (b"content-type", b"application/json")]


def test_big_bodies_held_at_once_stay_within_the_budget_and_a_refused_body_may_retry():
    held = HeldApp()
    app = BodyLimitMiddleware(held, bytes_in_flight=5 << 20)
    scopes = [_scope(client=f"10.0.0.{i}", headers=SIZED) for i in (1, 2, 3)]
    answers = _together(app, scopes, held.release, body=BIG)
    assert [a["status"] for a in answers] == [200, 200, 503]
    assert answers[2]["headers"][b"retry-after"] == b"1" and app.budget.held == 0
    assert anyio.run(_answer, app, _scope(headers=SIZED), BIG)["status"] == 200  # room again


def test_one_caller_holds_at_most_half_the_budget():
    held = HeldApp()
    app = BodyLimitMiddleware(held, mcp=BodyRule(5 << 19, MCP_TOTAL_SECONDS), bytes_in_flight=5 << 20)
    scopes = [_scope(headers=SIZED), _scope(headers=SIZED), _scope(client="10.0.0.2", headers=SIZED)]
    answers = _together(app, scopes, held.release, body=BIG)
    assert [a["status"] for a in answers] == [200, 503, 200]


def test_one_caller_alone_may_send_a_body_of_the_largest_size_allowed():
    """A 65.8 MiB call (the cap is 72) was refused with 503 and Retry-After on an idle server,
    for ever: one caller's share was half the 128 MiB budget."""
    held = HeldApp()
    held.release.set()
    app = BodyLimitMiddleware(held, bytes_in_flight=3 << 20)  # the largest body (72 MiB) is past the budget
    assert app.budget.per_caller == 3 << 20
    assert anyio.run(_answer, app, _scope(headers=SIZED), BIG)["status"] == 200  # 2.1 MiB: past half of it


@pytest.mark.parametrize("declared", [True, False], ids=["declared", "chunked"])
def test_a_body_larger_than_the_whole_budget_is_refused_for_good(declared):
    held = HeldApp()
    held.release.set()
    app = BodyLimitMiddleware(held, bytes_in_flight=2 << 20)
    headers = SIZED if declared else [(b"transfer-encoding", b"chunked"), (b"content-type", b"application/json")]
    answer = anyio.run(_answer, app, _scope(headers=headers), BIG)
    assert answer["status"] == 413 and b"retry-after" not in answer["headers"]
    assert app.budget.held == 0


def test_a_declared_length_takes_nothing_until_its_bytes_arrive():
    """Two sockets declaring 72 + 56 MiB and sending a byte every 4 s had held the whole budget."""
    held = HeldApp()
    held.release.set()
    app = BodyLimitMiddleware(held, bytes_in_flight=5 << 20)
    declaring_half = [(b"content-length", str(5 << 19).encode())]

    async def go():
        started = [anyio.Event(), anyio.Event()]

        def one_byte_then_nothing(started_event):
            async def receive():
                if not started_event.is_set():
                    started_event.set()
                    return {"type": "http.request", "body": b"x", "more_body": True}
                await anyio.sleep(30)
                return {"type": "http.disconnect"}
            return receive

        async def discard(message):
            pass

        async with anyio.create_task_group() as group:
            for index, event in enumerate(started):
                group.start_soon(app, _scope(client=f"10.0.1.{index}", headers=declaring_half),
                                 one_byte_then_nothing(event), discard)
                await event.wait()
            answer = await _answer(app, _scope(headers=SIZED), BIG)
            group.cancel_scope.cancel()
        return answer

    assert anyio.run(go)["status"] == 200


def test_small_bodies_never_wait_on_the_budget():
    held = HeldApp()
    held.release.set()
    app = BodyLimitMiddleware(held, bytes_in_flight=6 << 20)
    app.budget.take(3 << 20, "one")  # big bodies others sent fill it
    app.budget.take(3 << 20, "another")
    login = b'{"user":"u","password":"pw"}'
    scope = _scope("/ClientREST/Login", headers=[(b"content-length", str(len(login)).encode())])
    assert anyio.run(_answer, app, scope, login)["status"] == 200


def test_a_chunked_body_takes_its_budget_once_it_grows_big():
    held = HeldApp()
    held.release.set()
    app = BodyLimitMiddleware(held, bytes_in_flight=5 << 20)
    app.budget.take(2 << 20, "another caller")  # another request's body
    chunks = iter([b"x" * (1 << 19)] * 8)

    async def go():
        sent: list[dict] = []

        async def receive():
            return {"type": "http.request", "body": next(chunks), "more_body": True}

        async def send(message):
            sent.append(message)

        await app(_scope(headers=[(b"transfer-encoding", b"chunked")]), receive, send)
        return sent

    sent = anyio.run(go)
    assert sent[0]["status"] == 503 and held.got == 0
    assert app.budget.held == 2 << 20  # what this request took is given back


# --- tool calls running, a real app -------------------------------------------------------------

def _call(client, session, request_id):
    return client.post("/mcp", headers=session, json={"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                                                      "params": {"name": "echo_list", "arguments": {"text": "t"}}})


def test_a_caller_past_its_calls_in_flight_is_refused_and_served_again_once_one_ends(mini_registry, tmp_path):
    started, release = threading.Semaphore(0), threading.Event()

    def slow(args, ctx):
        started.release()
        release.wait(30)
        return ToolOutput({"results": []}, text="slow")

    settings = Settings(appdir=tmp_path, allow_anonymous=True, calls_per_caller=2)
    runtime = ToolRuntime(settings, entries=mini_registry.TOOLS, handlers={"echo_list": slow, "echo_text": None})
    with TestClient(build_app(runtime, host="testserver", dns_rebinding_protection=False)) as client:
        init = client.post("/mcp", headers=HEADERS, json=INITIALIZE)
        session = {**HEADERS, "Mcp-Session-Id": init.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
        client.post("/mcp", headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        answered: list = []
        running = [threading.Thread(target=lambda i=i: answered.append(_call(client, session, i))) for i in (1, 2)]
        for thread in running:
            thread.start()
        assert started.acquire(timeout=30) and started.acquire(timeout=30)
        refused = _call(client, session, 3)
        assert refused.status_code == 200 and f'"code":{BUSY}' in refused.text and "at most 2" in refused.text
        release.set()
        for thread in running:
            thread.join(30)
        assert [r.status_code for r in answered] == [200, 200] and all('"slow"' in r.text for r in answered)
        again = _call(client, session, 4)
        assert again.status_code == 200 and '"slow"' in again.text


@pytest.mark.parametrize("trusted, opened", [("", 1), ("*", 2)], ids=["not-trusted", "trusted-proxy"])
def test_x_forwarded_for_names_the_caller_only_from_a_peer_the_operator_trusts(mini_registry, tmp_path, trusted,
                                                                                opened):
    settings = Settings(appdir=tmp_path, allow_anonymous=True, mcp_sessions_per_caller=1,
                        forwarded_allow_ips=trusted)
    runtime = ToolRuntime(settings, entries=mini_registry.TOOLS, handlers={"echo_list": None, "echo_text": None})
    with TestClient(build_app(runtime, host="testserver", dns_rebinding_protection=False)) as client:
        statuses = [client.post("/mcp", headers={**HEADERS, "X-Forwarded-For": f"10.0.0.{i}"}, json=INITIALIZE)
                    .status_code for i in (1, 2)]
    assert statuses.count(200) == opened  # untrusted: both are the one peer, whose quota is one session


def test_the_serve_options_set_the_caps_and_refuse_nonsense():
    from knowspec.impl.cli import build_parser
    from knowspec.impl.server.access import apply_serve_access_options

    args = build_parser().parse_args(["serve", "--http", "127.0.0.1:0", "--requests-per-caller", "5",
                                      "--calls-per-caller", "3", "--request-body-mib-in-flight", "64",
                                      "--forwarded-allow-ips", "10.0.0.5"])
    settings = Settings()
    apply_serve_access_options(args, settings)
    assert (settings.requests_per_caller, settings.calls_per_caller, settings.request_body_mib_in_flight,
            settings.forwarded_allow_ips) == (5, 3, 64, "10.0.0.5")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--calls-per-caller", "0"])


def test_the_served_app_keeps_bodies_within_its_budget(mini_registry, tmp_path):
    settings = Settings(appdir=tmp_path, allow_anonymous=True, request_body_mib_in_flight=1)
    runtime = ToolRuntime(settings, entries=mini_registry.TOOLS, handlers={"echo_list": None, "echo_text": None})
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "echo_list", "arguments": {"text": "x" * (2 << 20)}}}
    with TestClient(build_app(runtime, host="testserver", dns_rebinding_protection=False)) as client:
        refused = client.post("/mcp", headers=HEADERS, json=call)
    assert refused.status_code == 413 and "retry-after" not in refused.headers  # past the whole 1 MiB budget


def test_no_more_calls_run_for_a_caller_whose_answers_wait_unread():
    unsent = AnswerBytesPerCaller(cap=100)
    calls = CallsPerCaller(5, unsent=unsent)
    unsent.take("address 10.0.0.1", 100)  # an answer of 100 bytes its client has not read

    with pytest.raises(AdmissionRefused, match="not read"):
        anyio.run(calls.admit, "address 10.0.0.1")
    anyio.run(calls.admit, "address 10.0.0.2")  # another caller's call is admitted
    assert calls.in_flight["address 10.0.0.2"] == 1 and calls.in_flight["address 10.0.0.1"] == 0


# --- turns are held by threads, and REST calls take them too ------------------------------------

def test_a_cancelled_call_keeps_its_turn_until_its_thread_returns(mini_registry, tmp_path):
    """Giving the turn back when the call was answered had let a caller that cancelled every call
    run 25 handlers at once."""
    entered, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def stubborn(args, ctx):  # never checks for cancellation
        ran.append(args.text)
        entered.set()
        release.wait(30)
        return ToolOutput({"results": []}, text="done")

    runtime = ToolRuntime(Settings(appdir=tmp_path), entries=mini_registry.TOOLS,
                          handlers={"echo_list": stubborn, "echo_text": None})
    calls = CallsPerCaller(5, CallTurns(1))

    async def go() -> None:
        async with anyio.create_task_group() as group:
            with anyio.CancelScope() as first:
                group.start_soon(lambda: runtime.call("echo_list", {"text": "a"}, admission=calls, admit_as="a"))
                await anyio.to_thread.run_sync(entered.wait, 10)
            first.cancel()  # answered (cancelled) while its thread runs on
            await anyio.sleep(0.05)
            assert calls.turns.running == 1 and calls.in_flight["a"] == 1
            group.start_soon(lambda: runtime.call("echo_list", {"text": "b"}, admission=calls, admit_as="a"))
            await anyio.sleep(0.1)
            assert ran == ["a"]  # the next call waits for the turn the abandoned thread still holds
            release.set()
        assert ran == ["a", "b"] and calls.turns.running == 0 and calls.in_flight["a"] == 0

    anyio.run(go)


def test_rest_tool_calls_count_for_their_user_and_take_turns(tmp_path):
    from knowspec.impl.docpool import auth

    started, release = threading.Event(), threading.Event()

    def slow_help_search(args, ctx):
        started.set()
        release.wait(30)
        return ToolOutput({"results": []}, text="[]")

    settings = Settings(appdir=tmp_path, calls_per_caller=1)
    auth.create_user(settings.catalog_path, "rita", "pw", [])
    runtime = ToolRuntime(settings)
    runtime.handlers["help_search"] = slow_help_search
    with TestClient(build_app(runtime, host="testserver", dns_rebinding_protection=False)) as client:
        token = client.post("/ClientREST/Login", json={"user": "rita", "password": "pw"}).json()["token"]
        headers = {"Authorization": f"Bearer {token}"}
        first: list = []
        waiting = threading.Thread(target=lambda: first.append(
            client.post("/ClientREST/HelpSearch", headers=headers, json={"query": "a"})))
        waiting.start()
        assert started.wait(30)
        refused = client.post("/ClientREST/HelpSearch", headers=headers, json={"query": "b"})
        release.set()
        waiting.join(30)
    assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
    assert refused.json()["code"] == "rate_limited" and first[0].status_code == 200
