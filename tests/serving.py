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
