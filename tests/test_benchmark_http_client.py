"""The throughput benchmark's light HTTP client (``benchmarks/light_http.py``) reads whole answers,
chunked or sized, several on one keep-alive connection, and refuses a non-2xx answer."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from light_http import HttpError, KeepAliveConnection  # noqa: E402

ANSWERS = [
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n",
    b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\nMcp-Session-Id: abc\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\n{\"a\"",
    b"HTTP/1.1 404 Not Found\r\ncontent-length: 9\r\n\r\nnot found",
]


async def serve_answers(received: list[bytes]) -> tuple[asyncio.AbstractServer, int]:
    async def one_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for answer in ANSWERS:
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            received.append(head + await reader.readexactly(length))
            writer.write(answer)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(one_connection, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def test_the_light_client_reads_chunked_and_sized_answers_on_one_connection() -> None:
    async def run() -> list:
        received: list[bytes] = []
        server, port = await serve_answers(received)
        connection = KeepAliveConnection("127.0.0.1", port, {"authorization": "Bearer t"})
        await connection.open()
        got = [await connection.post("/mcp", b"{}") for _ in range(3)]
        with pytest.raises(HttpError, match="404"):
            await connection.post("/mcp", b"[1]")
        await connection.close()
        server.close()
        return [got, received]

    got, received = asyncio.run(run())
    assert [(status, body) for status, _, body in got] == [(200, b"hello, world"), (202, b""), (200, b'{"a"')]
    assert got[1][1]["mcp-session-id"] == "abc"
    assert all(request.startswith(b"POST /mcp HTTP/1.1\r\n") for request in received)
    assert b"host: 127.0.0.1:" in received[0] and b"authorization: Bearer t" in received[0]
    assert received[3].endswith(b"\r\n\r\n[1]")
