"""An HTTP server process keeps at most so many connections open, in all and per client address,
never into the descriptors it needs for its own files. A probe's 21,000 idle connections from one
address had used up the descriptors: a login then failed with 500 and asyncio logged 21,592
tracebacks."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import uvicorn

from knowspec.impl.server.connection_limits import (
    ACCEPT_OUT_OF_RESOURCE, MAX_CONNECTIONS, SAY_EVERY_SECONDS, ConnectionLimits, connection_cap,
    quiet_accept_failures, trusted_peers)
from knowspec.impl.server.http_protocol import capped
from fake_clock import Clock
from serving import free_port, serving


def test_a_connection_past_the_total_is_refused_until_one_closes():
    limits = ConnectionLimits(total=2, per_address=10)
    assert limits.admit("10.0.0.1") and limits.admit("10.0.0.2")
    assert not limits.admit("10.0.0.3")
    limits.release("10.0.0.1")
    assert limits.admit("10.0.0.3") and limits.open == 2


def test_one_address_holds_at_most_its_share_and_others_still_connect():
    limits = ConnectionLimits(total=10, per_address=2)
    assert limits.admit("10.0.0.1") and limits.admit("10.0.0.1")
    assert not limits.admit("10.0.0.1")
    assert limits.admit("10.0.0.2")
    limits.release("10.0.0.1")
    assert limits.admit("10.0.0.1")


def test_a_trusted_proxy_is_held_to_the_total_alone():
    limits = ConnectionLimits(total=3, per_address=1, trusted=trusted_peers("10.0.0.9"))
    assert all(limits.admit("10.0.0.9") for _ in range(3))
    assert not limits.admit("10.0.0.9")
    limits.release("10.0.0.9")
    assert limits.admit("10.0.0.9")


def test_a_peer_without_an_address_counts_towards_the_total_only():
    limits = ConnectionLimits(total=2, per_address=1)
    assert limits.admit(None) and limits.admit(None) and not limits.admit(None)
    limits.release(None)
    assert limits.open == 1


def test_trusted_peers_reads_addresses_networks_names_and_the_wildcard():
    trusted = trusted_peers(" 10.1.0.0/16, 192.168.1.5,proxy.local ")
    assert trusted("10.1.2.3") and trusted("192.168.1.5") and trusted("proxy.local")
    assert not trusted("10.2.0.1") and not trusted("192.168.1.6") and not trusted("::1")
    assert trusted_peers("*")("203.0.113.7") and not trusted_peers("")("127.0.0.1")


@pytest.mark.parametrize(("descriptors", "requested", "cap"), [
    (20_000, None, MAX_CONNECTIONS),
    (1024, None, 896),  # an eighth kept for the process's files
    (256, None, 192),  # at least 64 kept
    (20_000, 100, 100),
    (1024, 5000, 896),  # asked for more than the descriptors allow
])
def test_the_cap_keeps_descriptors_for_the_process_files(descriptors, requested, cap):
    assert connection_cap(descriptors, requested) == cap


def test_refusals_are_logged_once_per_interval(caplog):
    clock = Clock()
    limits = ConnectionLimits(total=0, per_address=1, clock=clock)
    with caplog.at_level(logging.WARNING, logger="knowspec.http"):
        for _ in range(500):
            limits.admit("10.0.0.1")
        clock.now += SAY_EVERY_SECONDS
        limits.admit("10.0.0.1")
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and said[0].startswith("closed 1 new") and said[1].startswith("closed 500 new")


class FakeLoop:
    def __init__(self) -> None:
        self.handler = None
        self.default: list[dict] = []

    def get_exception_handler(self):
        return self.handler

    def set_exception_handler(self, handler) -> None:
        self.handler = handler

    def default_exception_handler(self, context: dict) -> None:
        self.default.append(context)


def test_failed_accepts_are_logged_once_per_interval_and_other_errors_as_before(caplog):
    loop, clock = FakeLoop(), Clock()
    quiet_accept_failures(loop, clock)
    failed = {"message": ACCEPT_OUT_OF_RESOURCE, "exception": OSError(24, "Too many open files")}
    with caplog.at_level(logging.ERROR, logger="knowspec.http"):
        for _ in range(2048):
            loop.handler(loop, failed)
        clock.now += SAY_EVERY_SECONDS
        loop.handler(loop, failed)
    assert len(caplog.records) == 2 and "2048 time(s)" in caplog.records[1].getMessage()
    other = {"message": "Task exception was never retrieved"}
    loop.handler(loop, other)
    assert loop.default == [other]


def test_the_open_file_limit_is_raised_to_the_hard_limit():
    resource = pytest.importorskip("resource")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 256:
        pytest.skip("this host's hard limit leaves no room to lower the soft one")
    code = ("import resource; from knowspec.impl.server.connection_limits import open_file_limit; "
            "resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1])); "
            "print(open_file_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0])")
    seen, now = map(int, subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                        check=True).stdout.split())
    assert seen == now > 256


# --- through uvicorn, with raw sockets -------------------------------------------------------

async def ok_app(scope, receive, send):
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


def _closed_by_server(sock: socket.socket, seconds: float = 5.0) -> bool:
    """Whether the server closes ``sock`` before it has sent anything (it never answers it)."""
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def _get(port: int, source: str = "127.0.0.1") -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0)) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        return sock.recv(100)


async def _with_server(limits: ConnectionLimits, scenario) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(ok_app, http=capped(limits), lifespan="off", log_level="warning"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        await asyncio.to_thread(scenario, sock.getsockname()[1])
    finally:
        server.should_exit = True
        await task


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs the whole 127/8 loopback (Linux)")
def test_connections_past_an_address_share_are_closed_unread_while_other_addresses_are_served():
    limits = ConnectionLimits(total=10, per_address=3)

    def scenario(port: int) -> None:
        held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(3)]
        try:
            time.sleep(0.2)
            extra = socket.create_connection(("127.0.0.1", port), timeout=5)
            assert _closed_by_server(extra)
            extra.close()
            assert _get(port, source="127.0.0.2").startswith(b"HTTP/1.1 200")
            held.pop().close()
            time.sleep(0.2)
            assert _get(port).startswith(b"HTTP/1.1 200")
        finally:
            for sock in held:
                sock.close()

    asyncio.run(_with_server(limits, scenario))
    assert limits.open == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs the whole 127/8 loopback (Linux)")
@pytest.mark.parametrize("workers", [1, 2])
def test_serve_holds_one_address_to_its_share(tmp_path, workers, monkeypatch):
    """``knowspec serve --http --connections-per-address``, one process or each of its workers."""
    port = free_port()
    argv = [sys.executable, "-m", "knowspec.impl.cli", "serve", "--http", f"127.0.0.1:{port}",
            "--appdir", str(tmp_path / "app"), "--connections-per-address", "1", "--workers", str(workers)]
    run_root = Path(tempfile.mkdtemp(prefix="ks-", dir="/tmp"))  # short: a Unix socket path has 107 bytes
    monkeypatch.setenv("TMPDIR", str(run_root))  # where the workers' hand-off sockets appear
    try:
        with serving(argv, port):
            deadline = time.monotonic() + 120  # on a loaded host a worker may start after the port opens
            while workers > 1 and len(list(run_root.glob("knowspec-workers-*/*.in"))) < workers:
                assert time.monotonic() < deadline, "the workers did not start"  # then one took every connection
                time.sleep(0.2)
            time.sleep(1.0)  # the readiness probe's connection has gone
            held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(workers)]
            try:
                time.sleep(1.5)  # a silent connection reaches its worker after the supervisor's peek (1 s)
                extra = socket.create_connection(("127.0.0.1", port), timeout=5)
                assert _closed_by_server(extra)
                extra.close()
                assert _get(port, source="127.0.0.2").startswith(b"HTTP/1.1 ")
            finally:
                for sock in held:
                    sock.close()
    finally:
        shutil.rmtree(run_root, ignore_errors=True)


def test_a_login_while_the_catalog_cannot_be_opened_is_503_worth_a_retry(tmp_path):
    from starlette.testclient import TestClient

    from knowspec.impl.config import Settings
    from knowspec.impl.server.http_app import build_app
    from knowspec.impl.server.pipeline import ToolRuntime

    (tmp_path / "catalog.db").mkdir()  # sqlite cannot open a folder: as when no descriptor is left
    runtime = ToolRuntime(Settings(appdir=tmp_path), entries=[], handlers={})
    app = build_app(runtime, host="testserver", dns_rebinding_protection=False)
    with TestClient(app, raise_server_exceptions=False) as client:
        answer = client.post("/ClientREST/Login", json={"user": "u", "password": "p"})
    body = answer.json()
    assert answer.status_code == 503 and body["code"] == "storage_error" and body["retryable"] is True
    assert answer.headers["retry-after"] == "5"
    assert str(tmp_path) not in answer.text and os.path.isdir(tmp_path / "catalog.db")
