"""A request head must arrive whole in time, and a big answer must be read at a minimum pace, or
the connection is closed (slow, silent or non-reading clients used to hold their sockets, and
the answers waiting for them, for as long as they liked)."""

from __future__ import annotations

import asyncio
import socket

import pytest
import uvicorn

from knowspec.impl.server.http_protocol import DeadlineProtocol

HEAD = b"GET / HTTP/1.1\r\nHost: t\r\n"


class QuickDeadline(DeadlineProtocol):
    head_seconds = 0.5
    read_window_seconds = 0.5
    min_read_bytes = 64 * 1024

    def connection_made(self, transport):
        # A small kernel send buffer, as on a link that is full: loopback's would take megabytes.
        transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        super().connection_made(transport)


ANSWER_CHUNKS = 8
CHUNK = b"x" * (1 << 20)


async def slow_app(scope, receive, send):
    """Answers after longer than the head deadline: a whole head is never cut off."""
    if scope["type"] != "http":
        return
    await asyncio.sleep(1.0)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


class QuickDeadlineBigKernelQueue(QuickDeadline):
    """The kernel queue of a fast link: it takes from the transport in bursts of hundreds of KiB."""

    read_window_seconds = 0.3
    min_read_bytes = 32 * 1024

    def connection_made(self, transport):
        transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
        DeadlineProtocol.connection_made(self, transport)


class BigAnswer:
    """Answers ``chunks`` MiB in 1 MiB chunks and notes when its last send returned."""

    def __init__(self, chunks: int = 8):
        self.finished = asyncio.Event()
        self.chunks = chunks

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(self.chunks * len(CHUNK)).encode())]})
        for index in range(self.chunks):
            await send({"type": "http.response.body", "body": CHUNK, "more_body": index < self.chunks - 1})
        self.finished.set()


async def _serving(protocol, scenario, app=slow_app):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, http=protocol, lifespan="off", log_level="warning", timeout_keep_alive=30)
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


def _run(protocol, scenario, app=slow_app):
    return asyncio.run(_serving(protocol, scenario, app))


async def _asking(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection with a small receive buffer (so the kernel cannot take the answer in its
    stead) that has sent one whole request."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock, limit=4096)  # reads no further ahead
    writer.write(HEAD + b"\r\n")
    await writer.drain()
    return reader, writer


def _not_reading(app: BigAnswer):
    async def scenario(port):
        reader, writer = await _asking(port)
        try:
            await asyncio.wait_for(app.finished.wait(), 10)  # the server gave up on the answer
            received = b""
            try:
                received = await asyncio.wait_for(reader.read(), 5)
            except ConnectionResetError:
                pass
            return len(received)
        finally:
            writer.close()

    return scenario


def _whole(response: bytearray, size: int) -> bool:
    head_end = response.find(b"\r\n\r\n")
    return head_end >= 0 and len(response) - head_end - 4 >= size


def _reading_at(bytes_per_tenth: int, size: int = ANSWER_CHUNKS * len(CHUNK)):
    async def scenario(port):
        reader, writer = await _asking(port)
        received = bytearray()
        try:
            while not _whole(received, size):
                tenth = 0
                while tenth < bytes_per_tenth and not _whole(received, size):
                    chunk = await asyncio.wait_for(reader.read(bytes_per_tenth - tenth), 5)
                    if not chunk:
                        return bytes(received)
                    received += chunk
                    tenth += len(chunk)
                await asyncio.sleep(0.1)
            return bytes(received)
        finally:
            writer.close()

    return scenario


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


def test_a_connection_whose_client_does_not_read_its_answer_is_closed_and_the_answer_freed():
    app = BigAnswer()
    received = _run(QuickDeadline, _not_reading(app), app)
    assert received < ANSWER_CHUNKS * len(CHUNK)  # cut short: the rest was dropped, not kept


def test_a_client_reading_at_the_minimum_pace_gets_its_whole_answer():
    app = BigAnswer()
    head, body = _run(QuickDeadline, _reading_at(256 * 1024), app).split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200") and len(body) == ANSWER_CHUNKS * len(CHUNK)


def test_a_steady_reader_is_judged_by_what_it_read_not_by_the_kernels_bursts():
    """A big kernel queue takes from the transport only in bursts; a client reading steadily at
    several times the pace asked was cut off when only the transport's bytes were counted."""
    app = BigAnswer(3)
    response = _run(QuickDeadlineBigKernelQueue, _reading_at(64 * 1024, size=3 * len(CHUNK)), app)
    assert len(response.split(b"\r\n\r\n", 1)[1]) == 3 * len(CHUNK)


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
