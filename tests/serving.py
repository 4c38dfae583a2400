"""A real server process for a test: a free loopback port, the process started, awaited, stopped."""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from typing import Iterator

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def serving(argv: list[str], port: int, *, timeout: float = 30.0) -> Iterator[str]:
    """Run ``argv`` (a server that listens on ``port``) until the block ends; yield its base URL.

    Ready when the port accepts a connection; a process that exits first fails the test with
    its stderr (kept in a file, so a chatty server never blocks on a full pipe).
    """
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env={**os.environ})
        try:
            deadline = time.monotonic() + timeout
            while True:
                with socket.socket() as sock:
                    if sock.connect_ex(("127.0.0.1", port)) == 0:
                        break
                if proc.poll() is not None or time.monotonic() > deadline:
                    err.seek(0)
                    pytest.fail(f"server did not start: {err.read().decode(errors='replace')[-2000:]}")
                time.sleep(0.1)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            proc.wait(10)


@contextmanager
def serving_app(app, *, timeout: float = 30.0) -> Iterator[int]:
    """An ASGI ``app`` served by uvicorn in a thread of this process, on a free port (yielded)."""
    import threading
    import time

    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the app did not start")
        time.sleep(0.05)
    try:
        yield port
    finally:
        server.should_exit = True


def stdio_tool_answers(argv: list[str], calls: list[dict], *, list_tools: bool = False) -> list[dict]:
    """The JSON-RPC answers of ``calls`` (tools/call params) from a server started as ``argv``,
    spoken to in raw stdio lines: no client library is loaded in the server's process, so what it
    imports stays its own. stdin stays open until every call is answered."""
    import json

    messages: list[dict] = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    if list_tools:
        messages.append({"jsonrpc": "2.0", "id": -1, "method": "tools/list"})
    messages += [{"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": c} for i, c in enumerate(calls)]
    server = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write("".join(json.dumps(m) + "\n" for m in messages))
    server.stdin.flush()
    answers = []
    while len(answers) < len(calls):
        line = server.stdout.readline()
        assert line, "the server exited before answering"
        answer = json.loads(line)
        if answer.get("id", 0) > 0:
            answers.append(answer)
    server.stdin.close()
    assert server.wait(60) == 0
    return answers
