"""A minimal HTTP/1.1 keep-alive client on asyncio streams, for load generators.

The throughput benchmark's load generator shares the machine with the server it measures, so
every millisecond of CPU it spends per call is taken from the server. A general client (httpx)
costs ~1 ms of CPU per call in pure Python; this one pre-encodes the fixed request head and
parses only what an MCP answer needs (status, headers, a Content-Length or chunked body).
"""

from __future__ import annotations

import asyncio


class HttpError(RuntimeError):
    """A non-2xx answer, or a malformed one."""


class KeepAliveConnection:
    """One persistent connection: ``post`` sends a request and reads its whole answer."""

    def __init__(self, host: str, port: int, headers: dict[str, str]) -> None:
        self.host, self.port = host, port
        self.headers = {"host": f"{host}:{port}", **headers}
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    def _head(self, path: str, length: int) -> bytes:
        lines = [f"POST {path} HTTP/1.1", *(f"{k}: {v}" for k, v in self.headers.items()), f"content-length: {length}"]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def post(self, path: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        assert self.reader is not None and self.writer is not None, "open() first"
        self.writer.write(self._head(path, len(body)) + body)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head[:-4].decode("latin-1").split("\r\n")
        status = int(status_line.split(" ", 2)[1])
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            payload = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            payload = await self._read_chunked()
        else:
            raise HttpError(f"answer without a length: {status_line}")
        if not 200 <= status < 300:
            raise HttpError(f"{status_line}: {payload[:300]!r}")
        return status, headers, payload

    async def _read_chunked(self) -> bytes:
        assert self.reader is not None
        parts = []
        while True:
            size = int((await self.reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
            if size == 0:
                await self.reader.readuntil(b"\r\n")  # no trailers are sent; the empty line ends the body
                return b"".join(parts)
            parts.append((await self.reader.readexactly(size + 2))[:-2])

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except OSError:
                pass
