"""Raw JSON-RPC lines to a target, below any MCP client library.

The SDK client only sends well-formed messages; the protocol-edge checks need to send lines no
client would (malformed JSON, batches, lone surrogate escapes, deep nesting) and to count the
replies each one gets. ``RawStdio`` runs its own copy of a stdio target; ``RawHttp`` opens its
own session on an HTTP target. Both initialize first, like any client.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
from typing import Any, Iterator
from urllib.parse import urlsplit

from knowspec.conformance.spawned import noting_children

PROTOCOL_VERSION = "2025-06-18"
MAX_REPLY_BYTES = 8 * 1024 * 1024   # a longer stdio line or HTTP body is judged unparseable, never held whole
READ_CHUNK = 64 * 1024


def initialize_message(request_id: Any = "init") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize",
            "params": {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                       "clientInfo": {"name": "knowspec-conformance-raw", "version": "1"}}}


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def capped_lines(stream: Any, limit: int) -> Iterator[bytes]:
    """The stream's lines; a line longer than ``limit`` is read to its end but yielded as a short
    marker that does not parse, so a target writing an endless line costs bounded memory."""
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        if len(line) <= limit or line.endswith(b"\n"):
            yield line
            continue
        skipped = len(line)
        while line and not line.endswith(b"\n"):
            line = stream.readline(READ_CHUNK)
            skipped += len(line)
        yield f"<a line of {skipped} bytes, over the {limit}-byte cap>".encode()


def capped_body(response: http.client.HTTPResponse, limit: int) -> bytes:
    """The response body, or a short marker that does not parse when it runs past ``limit``."""
    data = response.read(limit + 1)
    if len(data) <= limit:
        return data
    return f"<a body over the {limit}-byte cap>".encode()


def _parse(line: bytes) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except ValueError:
        return {"unparseable": line[:200].decode("utf-8", "replace")}
    return value if isinstance(value, dict) else {"unparseable": repr(value)[:200]}


class RawStdio:
    """A private copy of the stdio target; lines in, parsed replies out (with arrival times).

    The target runs in a process group of its own, so closing it stops a wrapper command's
    children too, and no reply line is held past ``MAX_REPLY_BYTES``."""

    def __init__(self, argv: list[str]):
        self.stderr = tempfile.TemporaryFile()
        with noting_children():   # stopped by an interrupted run too (spawned.stop_all)
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                         start_new_session=True)
        self.replies: queue.Queue[tuple[float, dict[str, Any]]] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in capped_lines(self.proc.stdout, MAX_REPLY_BYTES):
            if line.strip():
                self.replies.put((time.monotonic(), _parse(line)))

    def send(self, line: bytes) -> float:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.rstrip(b"\n") + b"\n")
        self.proc.stdin.flush()
        return time.monotonic()

    def initialize(self, timeout: float) -> None:
        self.send(json.dumps(initialize_message()).encode())
        reply = self.wait_for(lambda r: r.get("id") == "init", timeout)
        if reply is None:
            raise TimeoutError("no answer to initialize")
        self.send(json.dumps(INITIALIZED).encode())

    def wait_for(self, match, timeout: float) -> dict[str, Any] | None:
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return None
            try:
                _, reply = self.replies.get(timeout=left)
            except queue.Empty:
                return None
            if match(reply):
                return reply

    def drain(self, quiet: float) -> list[dict[str, Any]]:
        """Every reply until none arrives for ``quiet`` seconds."""
        out = []
        while True:
            try:
                out.append(self.replies.get(timeout=quiet)[1])
            except queue.Empty:
                return out

    def close(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        if hasattr(os, "killpg"):   # whatever the command started and left behind
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.stderr.close()

    def __enter__(self) -> "RawStdio":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _replies_in(content_type: str, body: bytes) -> list[dict[str, Any]]:
    if not body.strip():
        return []
    if content_type.startswith("text/event-stream"):
        return [_parse(line[5:].strip().encode()) for line in body.decode("utf-8", "replace").splitlines()
                if line.startswith("data:") and line[5:].strip()]
    value = _parse(body) if not body.lstrip().startswith(b"[") else {"batch": json.loads(body)}
    return [value]


class RawHttp:
    """One MCP session of its own on an HTTP target, one connection per thread of use."""

    def __init__(self, url: str, timeout: float, bearer_token: str | None = None):
        parts = urlsplit(url)
        # The suite's own sign-in (--bearer-token, or the admin login's token) for servers that ask.
        self.auth = {"Authorization": f"Bearer {bearer_token}"} if bearer_token else {}
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or (443 if parts.scheme == "https" else 80)
        self.https = parts.scheme == "https"
        self.path = parts.path or "/"
        self.timeout = timeout
        self.session: dict[str, str] = {}

    def _connection(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=self.timeout)

    def post(self, body: bytes) -> tuple[int, list[dict[str, Any]]]:
        """(HTTP status, JSON-RPC replies in the response)."""
        conn = self._connection()
        try:
            conn.request("POST", self.path, body=body, headers={
                "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": PROTOCOL_VERSION, **self.auth, **self.session})
            response = conn.getresponse()
            data = capped_body(response, MAX_REPLY_BYTES)
            session = response.getheader("mcp-session-id")
            if session and not self.session:
                self.session = {"Mcp-Session-Id": session}
            return response.status, _replies_in(response.getheader("content-type") or "", data)
        finally:
            conn.close()

    def initialize(self) -> None:
        status, replies = self.post(json.dumps(initialize_message()).encode())
        if status >= 400 or not any(r.get("id") == "init" and "result" in r for r in replies):
            raise ConnectionError(f"initialize failed with HTTP {status}")
        self.post(json.dumps(INITIALIZED).encode())
