"""The supervisor's dispatcher: which worker each accepted connection is handed to.

Real sockets, in process: a listener, the dispatcher's thread, and fake workers that are just the
datagram sockets a worker receives on. A fake worker reads the request from the descriptor it
was handed, so each test also shows that routing consumed none of the client's bytes.
"""

from __future__ import annotations

import socket
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from knowspec.impl.server import connection_dispatch
from knowspec.impl.server.connection_dispatch import Dispatcher, session_owner
from knowspec.impl.server.connection_handoff import handoff_path
from knowspec.impl.server.workers import bound_socket

A, B = "aaaaaaaaaaaa", "bbbbbbbbbbbb"
tags = st.from_regex(r"[0-9a-f]{12}", fullmatch=True)
drawn_ids = st.from_regex(r"[0-9a-f]{32}", fullmatch=True)
other_headers = st.lists(st.sampled_from([b"Host: x", b"Accept: */*", b"Content-Type: application/json",
                                          b"Authorization: Bearer t", b"mcp-protocol-version: 2025-06-18"]),
                         max_size=4)


def request_head(headers: list[bytes], newline: bytes = b"\r\n") -> bytes:
    return newline.join([b"POST /mcp HTTP/1.1", *headers, b"", b""])


@given(tags, drawn_ids, other_headers, other_headers, st.sampled_from([b"Mcp-Session-Id", b"mcp-session-id",
                                                                       b"MCP-SESSION-ID"]),
       st.sampled_from([b"\r\n", b"\n"]))
def test_a_head_naming_a_session_names_the_worker_that_owns_it(tag, drawn, before, after, name, newline):
    head = request_head([*before, name + b": " + f"{tag}-{drawn}".encode(), *after], newline)
    assert session_owner(head) == tag
    assert session_owner(head + b'{"jsonrpc": "2.0"}') == tag


@pytest.mark.parametrize("head", [
    request_head([b"Host: x"]),  # a new session's initialize: no session yet
    request_head([b"mcp-session-id: " + b"0" * 32]),  # an id no worker issued
    request_head([b"mcp-session-id: 0123456789AB-x"]),
    b"POST /mcp HTTP/1.1\r\nHost: x\r\n\r\nmcp-session-id: aaaaaaaaaaaa-x\r\n",  # in the body, not the head
    b"POST /mcp HTTP/1.1\r\nmcp-session-id: aaaaaaaaaaaa-x",  # the line may still be cut: wait for it
    b"mcp-session-id: aaaaaaaaaaaa-x\r\n\r\n",  # the request line is not a header
    b"",
])
def test_a_head_without_a_whole_session_header_names_no_worker(head):
    assert session_owner(head) is None


class FakeWorker:
    """What a worker receives on: the datagram socket named by its tag."""

    def __init__(self, run_dir: Path, tag: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(handoff_path(run_dir, tag)))
        self.sock.settimeout(5)

    def handed(self) -> socket.socket:
        """The next connection handed here."""
        _, fds, _, _ = socket.recv_fds(self.sock, 16, 1)
        conn = socket.socket(fileno=fds[0])
        conn.settimeout(5)
        return conn

    def request(self) -> bytes:
        """The next connection handed here, read whole as a client's request."""
        with self.handed() as conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                data += chunk
        return data

    def nothing_handed(self, seconds: float = 0.3) -> bool:
        self.sock.settimeout(seconds)
        try:
            self.sock.recv(16)
        except TimeoutError:
            return True
        finally:
            self.sock.settimeout(5)
        return False


@contextmanager
def dispatching(run_dir: Path):
    listener = bound_socket("127.0.0.1", 0)
    dispatcher = Dispatcher(listener, run_dir)
    dispatcher.start()
    try:
        yield listener.getsockname()
    finally:
        dispatcher.stop()
        listener.close()


def connect(address, data: bytes = b"") -> socket.socket:
    client = socket.create_connection(address, timeout=5)
    if data:
        client.sendall(data)
    return client


def get(marker: str) -> bytes:
    return f"GET /healthz?n={marker} HTTP/1.1\r\nHost: x\r\n\r\n".encode()


def with_session(tag: str, marker: str) -> bytes:
    return f"POST /mcp?n={marker} HTTP/1.1\r\nHost: x\r\nMcp-Session-Id: {tag}-{'0' * 32}\r\n\r\n".encode()


def test_connections_naming_no_session_go_to_the_workers_in_turn(tmp_path):
    a, b = FakeWorker(tmp_path, A), FakeWorker(tmp_path, B)
    with dispatching(tmp_path) as address:
        clients, received = [], []
        for n in range(6):
            clients.append(connect(address, get(str(n))))
            received.append((a if n % 2 == 0 else b).request())
    assert received == [get(str(n)) for n in range(6)]


def test_a_connection_naming_a_session_goes_to_its_owner_and_leaves_the_turn_as_it_was(tmp_path):
    a, b = FakeWorker(tmp_path, A), FakeWorker(tmp_path, B)
    with dispatching(tmp_path) as address:
        named = [connect(address, with_session(B, "1"))]
        assert b.request() == with_session(B, "1")
        new = connect(address, get("2"))
        assert a.request() == get("2")  # still A's turn
        named.append(connect(address, with_session(A, "3")))
        assert a.request() == with_session(A, "3")
        assert b.nothing_handed()
        new.close()


def test_a_head_sent_in_parts_is_routed_by_the_session_header_in_its_second_part(tmp_path):
    a, b = FakeWorker(tmp_path, A), FakeWorker(tmp_path, B)
    whole = with_session(B, "1")
    with dispatching(tmp_path) as address:
        client = connect(address, whole[:30])
        time.sleep(0.1)
        client.sendall(whole[30:])
        assert b.request() == whole
        assert a.nothing_handed()


def test_a_silent_connection_goes_to_the_next_worker_once_the_peek_time_is_up(tmp_path, monkeypatch):
    monkeypatch.setattr(connection_dispatch, "PEEK_SECONDS", 0.2)
    a = FakeWorker(tmp_path, A)
    with dispatching(tmp_path) as address:
        client = connect(address)
        with a.handed() as handed:
            client.sendall(get("late"))
            assert handed.recv(4096) == get("late")


def test_a_dead_workers_socket_file_is_skipped_and_removed(tmp_path):
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    dead.bind(str(handoff_path(tmp_path, "000000000000")))  # sorts first
    dead.close()
    a = FakeWorker(tmp_path, A)
    with dispatching(tmp_path) as address:
        client = connect(address, get("1"))
        assert a.request() == get("1")
    assert not handoff_path(tmp_path, "000000000000").exists()
    client.close()


def test_a_connection_waits_for_a_worker_that_is_still_starting(tmp_path):
    with dispatching(tmp_path) as address:
        client = connect(address, get("early"))
        time.sleep(0.3)
        a = FakeWorker(tmp_path, A)
        assert a.request() == get("early")
        client.close()


def test_a_client_that_closes_before_sending_anything_is_handed_to_nobody(tmp_path):
    a = FakeWorker(tmp_path, A)
    with dispatching(tmp_path) as address:
        connect(address).close()
        assert a.nothing_handed()
        client = connect(address, get("next"))
        assert a.request() == get("next")
        client.close()


def test_a_client_trickling_its_head_is_peeked_at_a_few_times_not_hundreds(tmp_path, monkeypatch):
    peeks = []
    peek = Dispatcher._peek
    monkeypatch.setattr(Dispatcher, "_peek", staticmethod(lambda entry: (peeks.append(1), peek(entry))))
    a = FakeWorker(tmp_path, A)
    with dispatching(tmp_path) as address:
        client = connect(address, b"GET /")  # then nothing more until the peek time (1 s) is up
        with a.handed() as handed:
            assert handed.recv(4096) == b"GET /"
        client.close()
    assert 1 <= len(peeks) <= 12


def test_a_connection_no_worker_takes_in_time_is_closed(tmp_path, monkeypatch):
    monkeypatch.setattr(connection_dispatch, "WORKER_WAIT_SECONDS", 0.2)
    with dispatching(tmp_path) as address:
        client = connect(address, get("nobody"))
        try:
            ended = client.recv(16) == b""
        except ConnectionResetError:  # closed with the request unread: a reset
            ended = True
        client.close()
    assert ended  # within the socket's 5 s timeout: not left hanging
