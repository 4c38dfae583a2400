"""A client that ends its session while its last notification is on the way gets its answers on
one keep-alive connection, and the server's log says so in one line, not ~60 of tracebacks
(``impl/server/late_answers.py``)."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time

import anyio
import httpx2
import pytest

from knowspec.impl.server.late_answers import ENDED, SDK_LOGGER, SDK_MESSAGE, EndedSessionRecords, OneAnswer
from serving import free_port

STREAMS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}


def _run(app, path: str = "/mcp") -> tuple[list[dict], BaseException | None]:
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    try:
        anyio.run(OneAnswer(app), {"type": "http", "path": path, "method": "POST"}, receive, send)
    except BaseException as exc:  # noqa: BLE001 - the test looks at what escaped
        return sent, exc
    return sent, None


async def _answer(send, status: int) -> None:
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def test_a_second_answer_and_the_closed_stream_after_it_go_nowhere():
    async def sdk(scope, receive, send):
        await _answer(send, 202)
        await _answer(send, 500)  # the SDK's answer to its own failure, after the 202
        raise anyio.ClosedResourceError

    sent, escaped = _run(sdk)
    assert [m.get("status") for m in sent if m["type"] == "http.response.start"] == [202]
    assert escaped is None


def test_a_closed_stream_before_any_answer_still_escapes():
    async def sdk(scope, receive, send):
        raise anyio.ClosedResourceError

    assert isinstance(_run(sdk)[1], anyio.ClosedResourceError)


def _record(error: BaseException, message: str = SDK_MESSAGE) -> logging.LogRecord:
    try:
        raise error
    except BaseException:
        return logging.LogRecord(SDK_LOGGER, logging.ERROR, __file__, 1, message, (), sys.exc_info())


@pytest.mark.parametrize("level, shown", [(logging.INFO, True), (logging.WARNING, False)])
def test_the_sdks_record_of_an_ended_session_is_one_info_line_shown_where_info_is(level, shown):
    logger = logging.getLogger(SDK_LOGGER)
    before = logger.level
    logger.setLevel(level)
    try:
        ended = _record(anyio.ClosedResourceError())
        assert EndedSessionRecords().filter(ended) is shown
    finally:
        logger.setLevel(before)
    assert (ended.getMessage(), ended.levelno, ended.exc_info) == (ENDED, logging.INFO, None)


@pytest.mark.parametrize("error, message", [
    (ValueError("a real bug"), SDK_MESSAGE),
    (anyio.ClosedResourceError(), "Unexpected closure of read stream in message router"),
])
def test_every_other_record_passes_as_it_is(error, message):
    other = _record(error, message)
    assert EndedSessionRecords().filter(other)
    assert other.levelno == logging.ERROR and other.exc_info is not None and other.getMessage() == message


async def _sessions_that_leave_early(url: str, count: int) -> None:
    async with httpx2.AsyncClient(timeout=20) as client:
        for _ in range(count):
            opened = await client.post(url, json=INITIALIZE, headers=STREAMS)
            assert opened.status_code == 200
            session = {**STREAMS, "mcp-session-id": opened.headers["mcp-session-id"],
                       "mcp-protocol-version": "2025-06-18"}
            note = client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
            await asyncio.gather(note, client.delete(url, headers=session))


def test_clients_leaving_as_their_notification_arrives_keep_their_connection_and_a_quiet_log(tmp_path):
    """40 such sessions had given the SDK's traceback, uvicorn's 'response already completed'
    and a closed connection (the client's next request failed)."""
    port = free_port()
    log = tmp_path / "server.err"
    with log.open("wb") as err:
        server = subprocess.Popen([sys.executable, "-m", "knowspec.impl.cli", "serve", "--http", f"127.0.0.1:{port}",
                                   "--allow-anonymous", "--appdir", str(tmp_path / "app")],
                                  stdout=subprocess.DEVNULL, stderr=err)
        try:
            deadline = time.monotonic() + 60
            while b"listening on" not in log.read_bytes():
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(log.read_text(errors="replace")[-2000:])
                time.sleep(0.1)
            asyncio.run(_sessions_that_leave_early(f"http://127.0.0.1:{port}/mcp", 80))
        finally:
            server.terminate()
            server.wait(20)
    text = log.read_text(errors="replace")
    assert "Traceback" not in text and "Exception in ASGI application" not in text
