"""A request head must arrive whole in time, or the connection is closed (slow or silent clients
used to hold their sockets for as long as they liked)."""

from __future__ import annotations

import asyncio
import socket

import pytest
import uvicorn

from knowspec.impl.server.http_protocol import HeadDeadlineProtocol

HEAD = b"GET / HTTP/1.1\r\nHost: t\r\n"


class QuickDeadline(HeadDeadlineProtocol):
    head_seconds = 0.5


async def slow_app(scope, receive, send):
    """Answers after longer than the head deadline: a whole head is never cut off."""
    if scope["type"] != "http":
        return
    await asyncio.sleep(1.0)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


async def _serving(protocol, scenario):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(slow_app, http=protocol, lifespan="off", log_level="warning", timeout_keep_alive=30)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        return await scenario(sock.getsockname()[1])
    finally:
        server.should_exit = True
        await task


async def _closed_within(reader: asyncio.StreamReader, seconds: float) -> bytes | None:
    """What the server sent before closing, or None when it kept the connection open."""
    try:
        return await asyncio.wait_for(reader.read(), seconds)
    except asyncio.TimeoutError:
        return None


def _run(protocol, scenario):
    return asyncio.run(_serving(protocol, scenario))


def _sending(prefix: bytes):
    """A client that sends ``prefix`` (no whole head) and waits: what it got before the close."""
    async def scenario(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(prefix)
        await writer.drain()
        try:
            return await _closed_within(reader, 3)
        finally:
            writer.close()

    return scenario


async def _partial_second_head(port):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(HEAD + b"\r\n")
    await writer.drain()
    first = await asyncio.wait_for(reader.readuntil(b"ok"), 5)
    writer.write(HEAD)
    await writer.drain()
    try:
        return first, await _closed_within(reader, 3)
    finally:
        writer.close()


@pytest.mark.parametrize("prefix", [b"", HEAD], ids=["nothing-sent", "head-cut-short"])
def test_a_connection_without_a_whole_head_in_time_is_closed(prefix):
    assert _run(QuickDeadline, _sending(prefix)) == b""


def test_a_whole_head_is_answered_though_the_app_takes_longer_than_the_deadline():
    first, after = _run(QuickDeadline, _partial_second_head)
    assert first.startswith(b"HTTP/1.1 200") and first.endswith(b"ok")
    assert after == b""  # the next head, cut short on the kept-alive connection, is closed too


@pytest.mark.slow
@pytest.mark.parametrize("workers", [[], ["--workers", "2"]], ids=["one-process", "two-workers"])
def test_the_served_app_closes_a_connection_whose_head_never_completes(tmp_path, workers):
    import sys
    import time

    from knowspec.impl.server.http_protocol import HEAD_SECONDS
    from serving import free_port, serving

    port = free_port()
    with serving([sys.executable, "-m", "knowspec.impl.cli", "serve", "--http", f"127.0.0.1:{port}",
                  "--appdir", str(tmp_path), *workers], port):
        with socket.create_connection(("127.0.0.1", port), timeout=HEAD_SECONDS + 10) as conn:
            start = time.monotonic()
            conn.sendall(b"POST /ClientREST/Login HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: ")
            assert conn.recv(1024) == b""  # closed, nothing answered
            assert time.monotonic() - start < HEAD_SECONDS + 5
