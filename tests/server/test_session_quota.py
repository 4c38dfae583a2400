"""Each caller holds at most so many open MCP sessions (``serve --mcp-sessions-per-caller``), so no
caller can fill the SDK's one table of sessions and lock everyone else out of ``/mcp``: a user
however many tokens they hold, an anonymous caller by address. A real server over the wire, and
the middleware alone against a stand-in for the SDK (parallel opening requests, ended sessions)."""

from __future__ import annotations

import json
import shutil
import sys
import urllib.error
import urllib.request
from pathlib import Path

import anyio
import pytest

from knowspec.impl.config import Settings
from knowspec.impl.docpool import auth
from knowspec.impl.server.session_quota import SessionQuota
from serving import free_port, serving
from test_http_security import INITIALIZE, TOOLS_LIST, _in_session, _mcp_request, login

EXAMPLE_BUNDLE = Path(__file__).resolve().parents[2] / "examples" / "okf-sample"
QUOTA = 3


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    base = tmp_path_factory.mktemp("quota")
    settings = Settings(appdir=base / "app")
    auth.create_user(settings.catalog_path, "rita", "pw", [])
    auth.create_user(settings.catalog_path, "walt", "pw", [])
    auth.create_user(settings.catalog_path, "sam", "pw", [])
    auth.create_user(settings.catalog_path, "bea", "pw", [])
    auth.create_user(settings.catalog_path, "max", "pw", [])
    shutil.copytree(EXAMPLE_BUNDLE, base / "root" / "kb")
    port = free_port()
    with serving([sys.executable, "-m", "knowspec.impl.cli", "serve", "--http", f"127.0.0.1:{port}",
                  "--appdir", str(base / "app"), "--bundle-root", str(base / "root"), "--allow-anonymous",
                  "--mcp-sessions-per-caller", str(QUOTA)], port) as url:
        yield url


def _opened(base: str, token: str | None) -> tuple[int, str | None]:
    status, headers = _mcp_request(base, token, INITIALIZE)
    return status, headers.get("mcp-session-id")


def test_a_user_past_the_quota_is_refused_429_and_others_still_get_in(server):
    rita = login(server, "rita")
    mine = [_opened(server, rita) for _ in range(QUOTA)]
    assert [status for status, _ in mine] == [200] * QUOTA
    assert _mcp_request(server, login(server, "rita"), INITIALIZE)[0] == 429  # a second token: the same user
    assert _opened(server, login(server, "walt"))[0] == 200
    assert _in_session(server, mine[0][1], rita, TOOLS_LIST) == 200  # her open sessions still answer
    assert _in_session(server, mine[0][1], rita, {}) == 200          # one ended (DELETE) ...
    assert _opened(server, rita)[0] == 200                           # ... makes room for one more
    assert _opened(server, rita)[0] == 429


def test_anonymous_callers_share_their_addresss_quota(server):
    for _ in range(QUOTA):
        assert _opened(server, None)[0] == 200
    assert _opened(server, None)[0] == 429
    assert _opened(server, login(server, "walt"))[0] == 200


def test_a_local_peer_rotating_x_forwarded_for_is_still_one_caller(server):
    """No proxy is trusted unless the operator names one (``--forwarded-allow-ips``): a probe had
    opened 9,977 anonymous sessions by naming a new address in each request."""
    def opened(address: str) -> int:
        request = urllib.request.Request(server + "/mcp", data=json.dumps(INITIALIZE).encode(), method="POST",
                                         headers={"Content-Type": "application/json", "X-Forwarded-For": address,
                                                  "Accept": "application/json, text/event-stream"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status
        except urllib.error.HTTPError as refused:
            return refused.code

    statuses = [opened(f"10.9.0.{i}") for i in range(QUOTA + 2)]
    assert statuses.count(429) >= 2 and statuses.count(200) <= QUOTA


def test_the_refusal_is_a_json_rpc_error_naming_the_quota(server):
    walt = login(server, "walt")
    while _opened(server, walt)[0] == 200:
        pass
    request = urllib.request.Request(server + "/mcp", data=json.dumps(INITIALIZE).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "Authorization": f"Bearer {walt}",
                                              "Accept": "application/json, text/event-stream"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    body = json.loads(refused.value.read())
    assert refused.value.code == 429 and body["error"]["code"] == -32600
    assert f"at most {QUOTA}" in body["error"]["message"]


@pytest.mark.parametrize("accept, message, status", [
    ("application/json, text/event-stream", TOOLS_LIST, 400),  # no session to list tools in
    ("text/html", INITIALIZE, 406),
])
def test_a_request_the_sdk_refuses_names_no_session(server, accept, message, status):
    request = urllib.request.Request(server + "/mcp", data=json.dumps(message).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "Accept": accept,
                                              "Authorization": f"Bearer {login(server, 'sam')}"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == status
    assert refused.value.headers.get("mcp-session-id") is None  # the SDK dropped the one it made


@pytest.mark.parametrize("method", ["GET", "DELETE", "OPTIONS", "HEAD"])
def test_a_request_of_another_method_without_a_session_names_none(server, method):
    request = urllib.request.Request(server + "/mcp", method=method, headers={
        "Accept": "application/json, text/event-stream", "Authorization": f"Bearer {login(server, 'sam')}"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code >= 400
    assert refused.value.headers.get("mcp-session-id") is None


# --- the middleware alone ------------------------------------------------------------------------

class StandInSdk:
    """Opens a session per opening request (after ``hold`` is set, when given) and answers its id."""

    def __init__(self) -> None:
        self.sessions: dict[str, bool] = {}
        self.hold: anyio.Event | None = None

    async def __call__(self, scope, receive, send):
        if self.hold is not None:
            await self.hold.wait()
        session = f"s{len(self.sessions)}"
        self.sessions[session] = True
        await send({"type": "http.response.start", "status": 200, "headers": [(b"mcp-session-id", session.encode())]})
        await send({"type": "http.response.body", "body": b"{}"})


def _scope(client: str = "10.0.0.1", headers=()) -> dict:
    return {"type": "http", "method": "POST", "path": "/mcp", "headers": list(headers), "client": (client, 5000)}


async def _status(app, scope, body: bytes = b"") -> int:
    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}

    await app(scope, receive, send)
    return sent[0]["status"]


# an initialize padded past the size parsed on the event loop: its check awaits a worker thread
BIG_INITIALIZE = json.dumps({**INITIALIZE, "params": {**INITIALIZE["params"], "capabilities": {
    "experimental": {"pad": {"x": "x" * 70_000}}}}}).encode()


@pytest.mark.parametrize("body", [b"", BIG_INITIALIZE], ids=["empty", "70-kb-initialize"])
def test_parallel_opening_requests_cannot_overshoot_the_quota(body):
    sdk = StandInSdk()
    quota = SessionQuota(sdk, per_caller=2, live_sessions=lambda: sdk.sessions)

    async def go() -> list[int]:
        sdk.hold = anyio.Event()
        statuses: list[int] = []

        async def one() -> None:
            statuses.append(await _status(quota, _scope(), body))

        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(one)
            await anyio.sleep(0.05)  # all five asked while none was answered
            sdk.hold.set()
        return sorted(statuses)

    assert anyio.run(go) == [200, 200, 429, 429, 429]


def test_a_session_the_sdk_ended_no_longer_counts_and_other_requests_pass():
    sdk = StandInSdk()
    quota = SessionQuota(sdk, per_caller=1, live_sessions=lambda: sdk.sessions)
    assert anyio.run(_status, quota, _scope()) == 200
    assert anyio.run(_status, quota, _scope()) == 429
    assert anyio.run(_status, quota, _scope(client="10.0.0.2")) == 200    # another address
    assert anyio.run(_status, quota, _scope(headers=[(b"mcp-session-id", b"s0")])) == 200  # in a session
    del sdk.sessions["s0"]  # ended there (idle timeout, DELETE)
    assert anyio.run(_status, quota, _scope()) == 200


def _raw_post(base: str, token: str, message: dict, headers: dict | None = None) -> tuple[int, dict, bytes]:
    request = urllib.request.Request(base + "/mcp", data=json.dumps(message).encode(), method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {token}", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()


def test_an_initialize_the_sdk_would_refuse_opens_no_session_and_fills_no_quota(server):
    """The SDK answered it 200 with an error and kept the session: a client retrying it locked its user out."""
    bea = login(server, "bea")
    bad = {**INITIALIZE, "params": {**INITIALIZE["params"], "protocolVersion": 5}}
    for _ in range(QUOTA + 2):
        status, headers, body = _raw_post(server, bea, bad)
        assert status == 400 and "mcp-session-id" not in headers
        error = json.loads(body)
        assert error["id"] == 1 and error["error"]["code"] == -32602
        assert "protocolVersion" in error["error"]["message"]
    # snake_case names: our check had read them, the SDK reads the wire names only
    snake = {**INITIALIZE, "params": {"protocol_version": "2025-06-18", "capabilities": {},
                                      "client_info": {"name": "t", "version": "0"}}}
    status, headers, _ = _raw_post(server, bea, snake)
    assert status == 400 and "mcp-session-id" not in headers
    assert _opened(server, bea)[0] == 200


def test_a_request_served_without_a_session_is_not_held_to_the_session_quota(server):
    max_ = login(server, "max")
    assert [_opened(server, max_)[0] for _ in range(QUOTA)] == [200] * QUOTA
    assert _opened(server, max_)[0] == 429
    status, headers, body = _raw_post(server, max_, TOOLS_LIST, {"MCP-Protocol-Version": "2026-07-28"})
    assert status != 429 and b"Too many open MCP sessions" not in body and "mcp-session-id" not in headers
