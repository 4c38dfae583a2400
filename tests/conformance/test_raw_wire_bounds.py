"""The raw-wire client holds bounded memory whatever a target writes, and leaves no process behind."""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path

import pytest

from knowspec.conformance.checks.raw_wire import RawStdio, capped_body, capped_lines


def test_a_line_over_the_cap_becomes_a_short_marker_and_the_next_line_survives():
    stream = io.BytesIO(b"x" * 5000 + b"\n" + b'{"id": 1}\n' + b"tail")
    lines = list(capped_lines(stream, 100))
    assert lines[0].startswith(b"<a line of 5001 bytes") and len(lines[0]) < 100
    assert lines[1:] == [b'{"id": 1}\n', b"tail"]


def test_a_line_at_the_cap_is_kept_whole():
    assert list(capped_lines(io.BytesIO(b"y" * 100 + b"\n"), 100)) == [b"y" * 100 + b"\n"]


def test_an_endless_line_is_read_in_chunks_not_held():
    class Endless(io.RawIOBase):
        """Two gigabytes of one line, produced as it is read (never stored)."""
        left = 2 * 1024 ** 3

        def readable(self):
            return True

        def readinto(self, buffer):
            n = min(len(buffer), self.left)
            buffer[:n] = b"z" * n
            self.left -= n
            return n

    marker = next(capped_lines(io.BufferedReader(Endless(), 1 << 20), 1024))
    assert marker == f"<a line of {2 * 1024 ** 3} bytes, over the 1024-byte cap>".encode()


def test_a_body_over_the_cap_becomes_a_short_marker():
    assert capped_body(io.BytesIO(b"a" * 10), 10) == b"a" * 10
    assert capped_body(io.BytesIO(b"a" * 11), 10).startswith(b"<a body over the 10-byte cap")


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to see the wrapper's child")
def test_closing_a_raw_target_stops_what_its_command_started(tmp_path):
    pidfile = tmp_path / "pid"
    raw = RawStdio(["sh", "-c", f"sleep 300 & echo $! > {pidfile}; cat"])
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.05)
    child = int(pidfile.read_text())
    raw.close()
    for _ in range(100):
        if _gone(child):
            break
        time.sleep(0.05)
    assert _gone(child), "the wrapper's background child outlived the raw target"


def test_a_hostile_call_whose_connection_breaks_is_no_verdict_and_no_traceback():
    import socket
    import threading

    from knowspec.conformance.checks.raw_wire import RawHttp
    from knowspec.conformance.checks.validation_blocking import _send_hostile

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def hang_up():
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.close()   # no HTTP answer at all

    threading.Thread(target=hang_up, daemon=True).start()
    done = threading.Event()
    port = listener.getsockname()[1]
    _send_hostile(RawHttp(f"http://127.0.0.1:{port}/mcp", 5.0), b"{}", done)   # must not raise
    listener.close()
    assert not done.is_set()
