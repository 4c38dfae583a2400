"""`serve --http --workers N`: sessions, users and MCP sessions hold across worker processes.

A real server with two workers. Most tests pick the worker they talk to through that worker's
private socket (in the run folder, found through TMPDIR), so "login on A, call on B" is certain
rather than left to which worker the supervisor hands a connection; the public port's own
routing has its tests too.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx2
import mcp.types as types
import pytest
from hypothesis import given, strategies as st
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from knowspec.impl.cli_args import worker_count
from knowspec.impl.config import Settings
from knowspec.impl.docpool import auth
from knowspec.impl.rest.login_throttle import FREE_ATTEMPTS_PER_USER
from knowspec.impl.server.workers import RELAYED_CLIENT, RelayedClient, SessionRouter, owner_tag, relayed_headers
from serving import free_port

EXAMPLE_BUNDLE = Path(__file__).resolve().parents[2] / "examples" / "okf-sample"
SERVE = [sys.executable, "-m", "knowspec.impl.cli", "serve"]
ACCEPT = "application/json, text/event-stream"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}


class Workers:
    """A running ``serve --workers N`` and the private sockets of its live workers."""

    def __init__(self, proc: subprocess.Popen, port: int, tmp: Path, stderr: Path) -> None:
        self.proc, self.port, self.tmp, self.stderr = proc, port, tmp, stderr

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def run_dirs(self) -> list[Path]:
        return sorted(self.tmp.glob("knowspec-workers-*"))

    def live_sockets(self) -> list[Path]:
        live = []
        for path in sorted(self.tmp.glob("knowspec-workers-*/*.sock")):
            try:
                with httpx2.Client(transport=httpx2.HTTPTransport(uds=str(path)), timeout=5) as client:
                    client.get(f"{self.base}/healthz")
                live.append(path)
            except httpx2.TransportError:
                continue
        return live

    def wait_for(self, count: int, exclude: frozenset[Path] = frozenset(), timeout: float = 180) -> list[Path]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"server exited: {self.stderr.read_text()[-2000:]}")
            live = [p for p in self.live_sockets() if p not in exclude]
            if len(live) >= count:
                return live
            time.sleep(0.3)
        pytest.fail(f"{count} workers did not start: {self.stderr.read_text()[-2000:]}")

    def worker_pids(self) -> list[int]:
        pids = []
        for status in Path("/proc").glob("[0-9]*/status"):
            try:
                fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
            except OSError:
                continue
            try:
                cmdline = (status.parent / "cmdline").read_bytes()
            except OSError:
                continue
            if fields.get("PPid", "").strip() == str(self.proc.pid) and b"spawn_main" in cmdline:
                pids.append(int(status.parent.name))
        return pids


@contextmanager
def serve_workers(layout: dict, workers: int):
    port = free_port()
    tmp = Path(tempfile.mkdtemp(dir=layout["base"]))
    stderr = tmp / "stderr.log"
    with stderr.open("wb") as err:
        proc = subprocess.Popen([*SERVE, "--http", f"127.0.0.1:{port}", "--appdir", str(layout["appdir"]),
                                 "--bundle-root", str(layout["root"]), "--workers", str(workers)],
                                stdout=subprocess.DEVNULL, stderr=err, env={**os.environ, "TMPDIR": str(tmp)})
    try:
        yield Workers(proc, port, tmp, stderr)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    base = tmp_path_factory.mktemp("workers")
    appdir, root = base / "app", base / "root"
    settings = Settings(appdir=appdir)
    auth.create_user(settings.catalog_path, "rita", "pw", [])
    auth.create_user(settings.catalog_path, "wanda", "pw", ["WRITER"])
    auth.create_user(settings.catalog_path, "sam", "pw", ["SYSADMIN"])
    shutil.copytree(EXAMPLE_BUNDLE, root / "kb")
    return {"appdir": appdir, "root": root, "base": base, "catalog": settings.catalog_path}


@pytest.fixture(scope="module")
def two(layout):
    with serve_workers(layout, 2) as server:
        server.wait_for(2)
        yield server


def worker_client(server: Workers, sock: Path, **headers: str) -> httpx2.Client:
    return httpx2.Client(transport=httpx2.HTTPTransport(uds=str(sock)), base_url=server.base, timeout=60,
                         headers=headers)


def login(server: Workers, sock: Path, user: str) -> str:
    with worker_client(server, sock) as client:
        answer = client.post("/ClientREST/Login", json={"user": user, "password": "pw"})
    assert answer.status_code == 200, answer.text
    return answer.json()["token"]


def initialize(server: Workers, sock: Path, token: str) -> httpx2.Response:
    with worker_client(server, sock, authorization=f"Bearer {token}", accept=ACCEPT) as client:
        return client.post("/mcp", json=INITIALIZE)


def tag_of(sock: Path) -> str:
    return sock.stem


def test_a_login_on_one_worker_is_honoured_by_the_other(two):
    a, b = two.wait_for(2)[:2]
    token = login(two, a, "rita")
    answer = initialize(two, b, token)
    assert answer.status_code == 200, answer.text
    assert answer.headers["mcp-session-id"].startswith(tag_of(b) + "-")  # B opened it


def test_a_logout_on_one_worker_ends_the_session_on_the_other(two):
    a, b = two.wait_for(2)[:2]
    token = login(two, a, "rita")
    assert initialize(two, b, token).status_code == 200
    with worker_client(two, a, authorization=f"Bearer {token}") as client:
        assert client.post("/ClientREST/Logout").json() == {"result": True}
    refused = initialize(two, b, token)
    assert refused.status_code == 401
    assert refused.json()["code"] == "unauthenticated"


def test_failed_logins_are_counted_together_by_every_worker(two):
    """Guesses spread over both workers (through their own sockets, then the public port) count
    on one counter in the catalog: past the free attempts the next try is refused by either."""
    a, b = two.wait_for(2)[:2]
    guess = {"user": "guessed-by-both", "password": "wrong"}
    for i in range(FREE_ATTEMPTS_PER_USER + 1):
        with worker_client(two, (a, b)[i % 2]) as client:
            assert client.post("/ClientREST/Login", json=guess).status_code == 401
    for sock in (a, b):
        with worker_client(two, sock) as client:
            refused = client.post("/ClientREST/Login", json=guess)
        assert refused.status_code == 429, refused.text
        assert refused.json()["code"] == "rate_limited" and int(refused.headers["retry-after"]) >= 1
    # The public port: each try on a new connection (either worker), all from 127.0.0.1.
    answers = []
    for _ in range(FREE_ATTEMPTS_PER_USER + 2):
        with httpx2.Client(base_url=two.base, timeout=60) as client:
            answers.append(client.post("/ClientREST/Login", json=guess).status_code)
    assert answers == [401] * (FREE_ATTEMPTS_PER_USER + 1) + [429]


class Alternating(httpx2.AsyncBaseTransport):
    """Sends each request to the next worker in turn: no two consecutive requests share a worker."""

    def __init__(self, sockets: list[Path]) -> None:
        self.transports = [httpx2.AsyncHTTPTransport(uds=str(s)) for s in sockets]
        self.turn = itertools.cycle(range(len(sockets)))
        self.sent = [0] * len(sockets)

    async def handle_async_request(self, request):
        index = next(self.turn)
        self.sent[index] += 1
        return await self.transports[index].handle_async_request(request)

    async def aclose(self) -> None:
        for transport in self.transports:
            await transport.aclose()


def mcp_calls(server: Workers, transport: httpx2.AsyncBaseTransport, token: str, calls: list[tuple[str, dict]]):
    async def go():
        results = []
        async with httpx2.AsyncClient(transport=transport, headers={"Authorization": f"Bearer {token}"},
                                      timeout=60) as client, \
                streamable_http_client(server.base + "/mcp", http_client=client) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            for name, arguments in calls:
                request = types.CallToolRequest(params=types.CallToolRequestParams(name=name, arguments=arguments))
                results.append(await session.send_request(request, types.CallToolResult))
            return tools, results

    return anyio.run(go)


def test_an_mcp_session_keeps_working_when_its_requests_alternate_between_workers(two, layout):
    sockets = two.wait_for(2)[:2]
    token = login(two, sockets[0], "rita")
    transport = Alternating(sockets)
    kb = str(layout["root"] / "kb")
    tools, results = mcp_calls(two, transport, token, [
        ("search_concepts", {"bundle_path": kb, "query": "concept"}),
        ("list_concepts", {"bundle_path": kb}),
        ("search_concepts", {"bundle_path": kb, "query": "note"}),
        ("read_concept", {"bundle_path": kb, "concept_id": "missing-one"}),
    ])
    assert len(tools.tools) == 25
    assert [r.is_error for r in results] == [False, False, False, True]
    assert results[3].structured_content["code"] == "concept_not_found"
    assert min(transport.sent) >= 3  # both workers carried requests of the one session


def test_new_sessions_on_the_public_port_go_to_the_workers_in_turn(two):
    token = login(two, two.wait_for(2)[0], "rita")
    tags = []
    for _ in range(8):  # each on a new connection, as 8 clients would
        with httpx2.Client(base_url=two.base, timeout=60, headers={"authorization": f"Bearer {token}",
                                                                   "accept": ACCEPT}) as client:
            answer = client.post("/mcp", json=INITIALIZE)
        assert answer.status_code == 200, answer.text
        tags.append(owner_tag(answer.headers["mcp-session-id"]))
    assert {tag_of(s) for s in two.wait_for(2)} == set(tags)
    assert all(one != next_one for one, next_one in zip(tags, tags[1:])), tags


def test_an_answer_on_the_public_port_carries_the_headers_one_process_sends(two):
    with httpx2.Client(base_url=two.base, timeout=60) as client:
        answer = client.get("/healthz")
    assert answer.status_code == 200
    assert answer.headers["server"] == "uvicorn" and "GMT" in answer.headers["date"]


def test_an_sdk_session_over_the_public_port_does_its_calls(two, layout):
    with httpx2.Client(base_url=two.base, timeout=60) as client:
        token = client.post("/ClientREST/Login", json={"user": "rita", "password": "pw"}).json()["token"]
    kb = str(layout["root"] / "kb")
    tools, results = mcp_calls(two, httpx2.AsyncHTTPTransport(), token, [
        ("search_concepts", {"bundle_path": kb, "query": "concept"}),
        ("read_concept", {"bundle_path": kb, "concept_id": "missing-one"}),
    ])
    assert len(tools.tools) == 25
    assert [r.is_error for r in results] == [False, True]
    assert results[1].structured_content["code"] == "concept_not_found"


def test_a_revoked_write_role_stops_writes_on_another_worker(two, layout):
    a, b = two.wait_for(2)[:2]
    token = login(two, a, "wanda")
    kb = str(layout["root"] / "kb")
    note = {"bundle_path": kb, "concept_id": "worker-note", "frontmatter": "type: Note\ntitle: Worker note\n",
            "body": "# Worker note\n"}
    pinned_b = httpx2.AsyncHTTPTransport(uds=str(b))
    _, [written] = mcp_calls(two, pinned_b, token, [("write_concept", note)])
    assert not written.is_error, written.structured_content
    auth.revoke_role(layout["catalog"], "wanda", "WRITER")
    _, [refused] = mcp_calls(two, httpx2.AsyncHTTPTransport(uds=str(b)), token,
                             [("write_concept", {**note, "concept_id": "worker-note-2"})])
    assert refused.is_error and refused.structured_content["code"] == "forbidden"
    assert not (layout["root"] / "kb" / "concepts" / "worker-note-2.md").exists()


def test_a_revoked_sysadmin_is_refused_by_another_worker(two, layout):
    a, b = two.wait_for(2)[:2]
    token = login(two, a, "sam")
    command = {"command": "SQL", "params": {"sql": "ALTER DATABASE nowhere SET DOCUMENTS OFF"}}
    with worker_client(two, b, authorization=f"Bearer {token}") as client:
        allowed = client.post("/AdminREST/EXECCOMMAND", json=command)
        auth.revoke_role(layout["catalog"], "sam", "SYSADMIN")
        refused = client.post("/AdminREST/EXECCOMMAND", json=command)
    assert allowed.status_code != 403 and allowed.json().get("code") != "forbidden"
    assert refused.status_code == 403 and refused.json()["code"] == "forbidden"


def test_a_session_id_of_an_unknown_worker_answers_not_found(two):
    a = two.wait_for(2)[0]
    token = login(two, a, "rita")
    with worker_client(two, a, authorization=f"Bearer {token}", accept=ACCEPT,
                       **{"mcp-session-id": "0123456789ab-" + "0" * 32, "mcp-protocol-version": "2025-06-18"}) as client:
        answer = client.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert answer.status_code == 404
    assert answer.json()["error"]["message"] == "Session not found"


def test_a_dead_worker_is_replaced_and_sigterm_stops_every_worker(layout):
    with serve_workers(layout, 2) as server:
        first = server.wait_for(2)
        pids = server.worker_pids()
        assert len(pids) == 2
        os.kill(pids[0], signal.SIGKILL)
        replaced = server.wait_for(2, exclude=frozenset())
        deadline = time.monotonic() + 120
        while "started worker" not in server.stderr.read_text() and time.monotonic() < deadline:
            time.sleep(0.3)
        assert f"worker {pids[0]} stopped" in server.stderr.read_text()
        assert len(set(replaced) - set(first)) == 1  # one new worker, one that lived on
        workers_now = server.worker_pids()
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(60) == 0
        assert not any(Path(f"/proc/{pid}").exists() for pid in workers_now)
        assert server.run_dirs() == []


def test_one_worker_is_the_single_process_server(layout):
    with serve_workers(layout, 1) as server:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx2.get(f"{server.base}/healthz", timeout=5).status_code == 200:
                    break
            except httpx2.TransportError:
                time.sleep(0.3)
        with httpx2.Client(base_url=server.base, timeout=60) as client:
            token = client.post("/ClientREST/Login", json={"user": "rita", "password": "pw"}).json()["token"]
            answer = client.post("/mcp", json=INITIALIZE, headers={"authorization": f"Bearer {token}", "accept": ACCEPT})
        assert answer.status_code == 200
        assert "-" not in answer.headers["mcp-session-id"]  # untagged: nothing to route
        assert server.worker_pids() == [] and server.run_dirs() == []


@given(st.from_regex(r"[0-9a-f]{12}", fullmatch=True), st.from_regex(r"[0-9a-f]{32}", fullmatch=True))
def test_a_tagged_session_id_names_its_worker(tag, drawn):
    assert owner_tag(f"{tag}-{drawn}") == tag


@pytest.mark.parametrize("session_id", ["0" * 32, "-abc", "../../etc-x", "0123456789AB-x", "0123456789a-x", ""])
def test_an_untagged_or_malformed_session_id_names_no_worker(session_id):
    assert owner_tag(session_id) is None


@pytest.mark.parametrize("value", ["0", "-1", "65", "two", "1.5"])
def test_workers_must_be_a_whole_number_from_1_to_64(value):
    import argparse

    with pytest.raises(argparse.ArgumentTypeError):
        worker_count(value)
    assert worker_count("1") == 1 and worker_count("64") == 64


def test_a_cancel_sent_through_another_worker_reaches_the_call_it_names(two, layout):
    """The cancel lands on worker B, the call runs on A (B relayed it there): the call ends cancelled."""
    a, b = two.wait_for(2)[:2]
    token = login(two, a, "rita")
    big = layout["root"] / "big"
    if not big.exists():  # the first call on 6,000 concepts (~34 MB) parses them all: seconds, time to cancel it
        (big / "concepts").mkdir(parents=True)
        filler = "lorem ipsum dolor sit amet " * 200
        for n in range(6_000):
            (big / "concepts" / f"c{n}.md").write_text(
                f"---\ntype: Note\ntitle: C{n}\ntags: [t{n % 7}]\n---\n# C{n}\n\nSee [next](c{n + 1}.md).\n\n"
                f"## Part\n\n{filler}\n")
    headers = {"authorization": f"Bearer {token}", "accept": ACCEPT}

    async def go():
        on = {sock: httpx2.AsyncClient(transport=httpx2.AsyncHTTPTransport(uds=str(sock)), base_url=two.base,
                                       timeout=120, headers=headers) for sock in (a, b)}
        opened = await on[a].post("/mcp", json=INITIALIZE)
        session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
        await on[b].post("/mcp", headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "search_concepts", "arguments": {"bundle_path": str(big), "query": "lorem"}}}
        answer = {}

        async def slow_call():
            answer["body"] = (await on[b].post("/mcp", headers=session, json=call)).text

        async with anyio.create_task_group() as group:
            group.start_soon(slow_call)
            # A cancel naming a call not running yet is ignored (MCP): on a loaded machine the call
            # may reach worker A after the first one, so the cancel is sent until the call ends.
            with anyio.fail_after(120):
                while "body" not in answer:
                    await anyio.sleep(0.25)
                    cancelled = await on[b].post("/mcp", headers=session, json={
                        "jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}})
                    assert cancelled.status_code == 202
        for client in on.values():
            await client.aclose()
        return answer["body"]

    body = anyio.run(go)
    assert '"isError":false' not in body.replace(" ", "")  # never a success after the cancel
    assert "operation_cancelled" in body or "-32800" in body


def _through_router(tag: str, session_header: bytes | None, run_dir: Path) -> tuple[list, list]:
    """One /mcp request through a ``SessionRouter`` over a stub app that issues session ``abc``:
    (the session headers the app saw, the response headers the client got)."""
    from knowspec.impl.server.workers import SessionRouter

    seen: list = []
    sent: list = []

    async def app(scope, receive, send):
        seen.extend(v for k, v in scope["headers"] if k == b"mcp-session-id")
        await send({"type": "http.response.start", "status": 200, "headers": [(b"mcp-session-id", b"abc")]})
        await send({"type": "http.response.body", "body": b""})

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        if message["type"] == "http.response.start":
            sent.append(message)

    headers = [] if session_header is None else [(b"mcp-session-id", session_header)]
    scope = {"type": "http", "path": "/mcp", "method": "POST", "headers": headers}
    anyio.run(SessionRouter(app, tag, run_dir), scope, receive, send)
    return seen, sent


def test_the_router_tags_session_ids_on_the_wire_and_the_sdk_keeps_its_own(tmp_path):
    tag = "0123456789ab"
    seen, sent = _through_router(tag, None, tmp_path)                      # a new session
    assert seen == [] and dict(sent[0]["headers"])[b"mcp-session-id"] == f"{tag}-abc".encode()
    seen, sent = _through_router(tag, f"{tag}-abc".encode(), tmp_path)    # its next request
    assert seen == [b"abc"] and dict(sent[0]["headers"])[b"mcp-session-id"] == f"{tag}-abc".encode()
    seen, sent = _through_router(tag, b"abc", tmp_path)                    # an untagged id: never issued
    assert seen == [] and sent[0]["status"] == 404


def test_a_relay_names_the_client_it_saw_and_never_one_the_client_sent():
    scope = {"client": ("203.0.113.7", 4000),
             "headers": [(b"host", b"h"), (RELAYED_CLIENT, b"10.0.0.1"), (b"connection", b"keep-alive")]}
    assert relayed_headers(scope) == [(b"host", b"h"), (RELAYED_CLIENT, b"203.0.113.7")]


@pytest.mark.parametrize("client, seen", [(None, ("203.0.113.7", 0)), (("198.51.100.2", 5), ("198.51.100.2", 5))],
                         ids=["relayed-over-the-private-socket", "own-address-kept"])
def test_a_relayed_request_is_its_clients_for_per_address_rules(client, seen):
    got = []

    async def inner(scope, receive, send):
        got.append(scope["client"])

    scope = {"type": "http", "client": client, "headers": [(RELAYED_CLIENT, b"203.0.113.7")]}
    anyio.run(RelayedClient(inner), scope, None, None)
    assert got == [seen]


def test_a_relay_opens_as_many_connections_to_the_owner_as_its_requests_need(tmp_path):
    """httpx's default pool (100 connections, then a queue with no timeout) let one anonymous client
    relaying 100 event streams hold every other caller's relayed request for good."""
    router = SessionRouter(None, tag="a" * 12, run_dir=tmp_path)
    client = router._client("b" * 12, tmp_path / "b.sock")
    assert client._transport._pool._max_connections > 100_000  # httpcore's pool: no cap


@pytest.mark.parametrize("alive", [False, True], ids=["dead-owner", "owner-that-hangs-up"])
def test_a_relay_that_finds_no_listener_forgets_the_dead_workers_socket(tmp_path, alive):
    """A killed worker left its relay socket file until the server stopped, and each router its
    client for it; a live owner that drops one connection keeps both."""
    import socket
    import threading

    owner = "b" * 12
    path = tmp_path / f"{owner}.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    if alive:
        listener.listen()
        threading.Thread(target=lambda: listener.accept()[0].close(), daemon=True).start()
    else:
        listener.close()  # the file stays, as a SIGKILLed worker leaves it
    router = SessionRouter(None, tag="a" * 12, run_dir=tmp_path)
    sent: list = []

    async def receive():
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "path": "/mcp", "method": "POST", "client": ("127.0.0.1", 5), "query_string": b"",
             "headers": [(b"mcp-session-id", f"{owner}-abc".encode())]}
    anyio.run(router, scope, receive, send)
    assert sent[0]["status"] == 404
    assert path.exists() is alive
    assert (owner in router._clients) is alive
    listener.close()


def test_relays_racing_to_a_dead_worker_all_answer_not_found(tmp_path):
    """The first relay to find the owner dead had closed the client a second was sending
    through: a RuntimeError, a 500 instead of the 404 that tells a client to start anew."""
    import socket

    owner = "c" * 12
    path = tmp_path / f"{owner}.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()
    router = SessionRouter(None, tag="a" * 12, run_dir=tmp_path)
    statuses: list[int] = []

    async def relay_one(slow_body: bool) -> None:
        async def receive():
            if slow_body:  # its body arrives after another relay found the owner dead
                await anyio.sleep(0.2)
            return {"type": "http.request", "body": b"{}", "more_body": False}

        async def send(message):
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        scope = {"type": "http", "path": "/mcp", "method": "POST", "client": ("127.0.0.1", 5), "query_string": b"",
                 "headers": [(b"mcp-session-id", f"{owner}-abc".encode())]}
        await router(scope, receive, send)

    async def race() -> None:
        async with anyio.create_task_group() as group:
            for n in range(8):
                group.start_soon(relay_one, n % 2 == 1)

    anyio.run(race)
    assert statuses == [404] * 8 and owner not in router._clients
