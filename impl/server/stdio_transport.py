"""MCP over stdin/stdout, one JSON-RPC message per line, where every request line gets one answer.

The SDK's own stdio transport drops a line it cannot turn into a message (malformed JSON, a batch
array, a lone surrogate escape, nesting past the decoder's depth) and, at end of input, answers
calls still running with "Connection closed". This transport instead:

- answers a line that is not JSON (or not UTF-8, or too deep to decode) with -32700 and id null;
- answers JSON that is not one JSON-RPC message (a batch array, a scalar, a malformed object)
  with -32600, echoing the id when the object has a usable one;
- passes a lone surrogate inside ``tools/call`` arguments on to the call pipeline, whose raw
  argument walk answers ``invalid_request`` (spec/okf/contract/read.md §3.0); anywhere else in the message it is
  -32600;
- at end of input, waits for the calls in flight (up to ``drain_seconds``), writes their
  answers, and only then ends the session.

Decoding and encoding of large lines run in a worker thread, so a big request never holds the
event loop; an answer the call parked (``parked_answers.py``) is written as its parked bytes.
When stdin and stdout are pipes (or sockets), as an MCP client starts a server, they are read and
written without blocking from the event loop, which waits for readiness instead of handing each
read, write and flush to a worker thread: a call then costs one thread hand-over (its handler's)
instead of five, each a wake-up of both sides, and on a busy host a wait for a core.
While serving, fd 0 reads the null device and fd 1 writes to stderr, so a stray ``print`` in a
handler cannot corrupt the wire; both are restored on exit.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import sys
from contextlib import asynccontextmanager, contextmanager
from typing import Any, AsyncIterator, Awaitable, BinaryIO, Callable, Iterator

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from knowspec.impl.server.json_answer import BATCH_REFUSED
from knowspec.impl.server.parked_answers import ParkedAnswers, is_placeholder
from knowspec.impl.server.request_ids import UNUSABLE_ID_MESSAGE, is_request_id, unusable_id

log = logging.getLogger("knowspec.stdio")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INTERNAL_ERROR = -32603
MAX_LINE_BYTES = 72 * 1024 * 1024  # the HTTP body cap: above the 64 MiB argument estimate
INLINE_BYTES = 64 * 1024  # smaller lines are decoded on the loop; larger ones in a thread
READ_CHUNK = 1024 * 1024
PIPE_BYTES = 1024 * 1024  # the answer pipe's capacity, where the system allows it


def error_line(code: int, message: str, request_id: Any = None) -> bytes:
    """A JSON-RPC error response as one wire line."""
    body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    return json.dumps(body, separators=(",", ":")).encode("utf-8") + b"\n"


def _has_lone_surrogate(value: Any, depth: int = 0) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if depth > 64:  # only the message outside its arguments is walked here; deep values live in arguments
        return False
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v, depth + 1) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_lone_surrogate(v, depth + 1) for v in value)
    return False


def _usable_id(value: Any) -> Any:
    return value if is_request_id(value) and not _has_lone_surrogate(value) else None


def decode_line(line: bytes) -> types.JSONRPCMessage | bytes:
    """One wire line → a JSON-RPC message, or the error line that answers it."""
    try:
        text = line.decode("utf-8")
        value = json.loads(text)
    except (UnicodeDecodeError, ValueError):
        return error_line(PARSE_ERROR, "Parse error")
    except RecursionError:
        return error_line(PARSE_ERROR, "Parse error: nesting too deep")
    if isinstance(value, list):
        return error_line(INVALID_REQUEST, f"Invalid Request: {BATCH_REFUSED}")
    if not isinstance(value, dict):
        return error_line(INVALID_REQUEST, "Invalid Request")
    request_id = _usable_id(value.get("id"))
    outside_arguments = value
    params = value.get("params")
    if value.get("method") == "tools/call" and isinstance(params, dict) and "arguments" in params:
        # Arguments are the pipeline's to judge (invalid UTF-8 there is invalid_request).
        outside_arguments = {**value, "params": {k: v for k, v in params.items() if k != "arguments"}}
    if _has_lone_surrogate(outside_arguments):
        return error_line(INVALID_REQUEST, "Invalid Request: invalid UTF-8", request_id)
    if unusable_id(value):  # the SDK would take it for a notification: no answer, ever
        return error_line(INVALID_REQUEST, UNUSABLE_ID_MESSAGE)
    try:
        return types.jsonrpc_message_adapter.validate_python(value, by_name=False)
    except Exception:
        return error_line(INVALID_REQUEST, "Invalid Request", request_id)


def encode_message(message: types.JSONRPCMessage) -> bytes:
    """A message as one wire line; an answer that cannot be encoded becomes an internal error."""
    try:
        return message.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8") + b"\n"
    except Exception:
        log.exception("could not encode an outgoing message")
        request_id = getattr(message, "id", None)
        if isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)):
            return error_line(INTERNAL_ERROR, "Internal error: the answer could not be encoded", _usable_id(request_id))
        return b""


class _InFlight:
    """Request ids forwarded to the server and not yet answered (nor cancelled by the client)."""

    def __init__(self) -> None:
        self.ids: set[Any] = set()
        self.empty = anyio.Event()
        self.empty.set()

    def add(self, request_id: Any) -> None:
        self.ids.add(request_id)
        if self.empty.is_set():
            self.empty = anyio.Event()

    def discard(self, request_id: Any) -> None:
        self.ids.discard(request_id)
        if not self.ids:
            self.empty.set()


def _pipe_fd(stream: BinaryIO) -> int | None:
    """The descriptor of ``stream`` when it is a pipe or a socket (read and written without
    blocking); None for anything else: a terminal or a file keeps its blocking mode."""
    try:
        fd = stream.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, OSError, ValueError):  # io.BytesIO and the like have no descriptor
        return None
    return fd if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) else None


def _thread_reads(source: BinaryIO) -> Callable[[], Awaitable[bytes]]:
    async def read() -> bytes:
        # Abandoned on cancel: a read blocked on an open pipe must not hold up shutdown.
        return await anyio.to_thread.run_sync(source.read, READ_CHUNK, abandon_on_cancel=True)
    return read


def _loop_reads(fd: int) -> Callable[[], Awaitable[bytes]]:
    """Reads of a non-blocking ``fd`` on the event loop, waiting for it to be readable."""
    async def read() -> bytes:
        while True:
            try:
                return os.read(fd, READ_CHUNK)
            except BlockingIOError:
                await anyio.wait_readable(fd)
    return read


IOV_MAX = 1024  # pieces one writev takes (POSIX's minimum for IOV_MAX is 16; Linux's is 1024)


def _loop_writes(fd: int) -> Callable[[list[bytes]], Awaitable[None]]:
    """Writes to a non-blocking ``fd`` on the event loop; a full pipe is waited on, never spun on.
    An answer's pieces (a parked answer spliced into the SDK's line) go in one ``writev``, not a
    write each: every write woke the client's read."""
    async def write(pieces: list[bytes]) -> None:
        views = [memoryview(piece) for piece in pieces if piece]
        while views:
            try:
                written = os.writev(fd, views[:IOV_MAX])
            except BlockingIOError:
                await anyio.wait_writable(fd)
                continue
            while written:
                if written >= len(views[0]):
                    written -= len(views.pop(0))
                else:
                    views[0], written = views[0][written:], 0
    return write


def _thread_writes(stdout: BinaryIO) -> Callable[[list[bytes]], Awaitable[None]]:
    sink = anyio.wrap_file(stdout)

    async def write(pieces: list[bytes]) -> None:
        for piece in pieces:
            await sink.write(piece)
        await sink.flush()
    return write


@contextmanager
def _non_blocking(fds: list[int]) -> Iterator[None]:
    """``fds`` without blocking while serving; their modes are restored after (the descriptions
    are shared with fd 0 and 1, which the process gets back)."""
    modes = [os.get_blocking(fd) for fd in fds]
    try:
        for fd in fds:
            os.set_blocking(fd, False)
        yield
    finally:
        for fd, mode in zip(fds, modes):
            try:
                os.set_blocking(fd, mode)
            except OSError:
                pass


async def _lines(read: Callable[[], Awaitable[bytes]]) -> AsyncIterator[bytes | None]:
    """Lines without their newline; ``None`` for a line over ``MAX_LINE_BYTES`` (dropped whole)."""
    buffer = bytearray()
    overflow = False
    while True:
        chunk = await read()
        if not chunk:
            break
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                if not overflow:
                    buffer += chunk[start:]
                    if len(buffer) > MAX_LINE_BYTES:
                        overflow, buffer = True, bytearray()
                break
            if overflow:
                overflow = False
                yield None
            else:
                buffer += chunk[start:end]
                yield bytes(buffer)
            buffer = bytearray()
            start = end + 1
    if overflow:
        yield None
    elif buffer.strip():
        yield bytes(buffer)


def _widen_pipe(fd: int) -> None:
    """Let a pipe on ``fd`` hold ``PIPE_BYTES``: a big answer then reaches the client in a few
    hand-overs instead of one per 64 KiB (each a wake-up of both sides). Linux only; a
    descriptor that is not a pipe, or a system limit below the size, leaves it as it is."""
    try:
        import fcntl
    except ImportError:  # not a POSIX system
        return
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if set_size is None:
        return
    try:
        fcntl.fcntl(fd, set_size, PIPE_BYTES)
    except OSError:
        pass


@asynccontextmanager
async def _claimed_stdio() -> AsyncIterator[tuple[BinaryIO, BinaryIO]]:
    """Private duplicates of fd 0/1; the originals point at /dev/null and stderr meanwhile."""
    sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)
    _widen_pipe(wire_out)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
    finally:
        os.close(null)
    try:
        # closefd=False: a reader thread may still block on the descriptor after exit.
        yield os.fdopen(wire_in, "rb", buffering=0, closefd=False), os.fdopen(wire_out, "wb", closefd=False)
    finally:
        sys.stdout.flush()
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)


@asynccontextmanager
async def stdio_transport(stdin: BinaryIO | None = None, stdout: BinaryIO | None = None, *,
                          drain_seconds: float = 60.0, answers: ParkedAnswers | None = None):
    """``(read_stream, write_stream)`` for ``Server.run``, over the given binary streams or stdio;
    ``answers``: where the server parks its calls' encoded answers."""
    if stdin is None or stdout is None:
        async with _claimed_stdio() as (wire_in, wire_out):
            async with stdio_transport(wire_in, wire_out, drain_seconds=drain_seconds, answers=answers) as streams:
                yield streams
        return

    in_fd, out_fd = _pipe_fd(stdin), _pipe_fd(stdout)
    if in_fd is not None and out_fd is not None:
        with _non_blocking([in_fd, out_fd]):
            async with _serving(_loop_reads(in_fd), _loop_writes(out_fd), drain_seconds, answers) as streams:
                yield streams
        return
    async with _serving(_thread_reads(stdin), _thread_writes(stdout), drain_seconds, answers) as streams:
        yield streams


@asynccontextmanager
async def _serving(read: Callable[[], Awaitable[bytes]], write: Callable[[list[bytes]], Awaitable[None]],
                   drain_seconds: float, answers: ParkedAnswers | None):
    """The session over a ``read`` of the next chunk of input and a ``write`` of answer pieces."""
    write_lock = anyio.Lock()
    in_flight = _InFlight()
    to_server, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_server = anyio.create_memory_object_stream[SessionMessage](0)
    reading = anyio.CancelScope()
    client_gone = False

    async def emit(data: bytes | list[bytes]) -> None:
        nonlocal client_gone
        pieces = [data] if isinstance(data, bytes) else data
        if not any(pieces) or client_gone:
            return
        async with write_lock:
            try:
                await write(pieces)
            except BrokenPipeError:  # the client closed its end of the answers: it has left, as at end of input
                client_gone = True
                reading.cancel()

    def encoded(message: types.JSONRPCMessage) -> bytes | list[bytes]:
        data = encode_message(message)
        return (answers.splice(data) if answers is not None else None) or data

    async def reader() -> None:
        async with to_server:
            async for line in _lines(read):
                if line is None:
                    await emit(error_line(INVALID_REQUEST, "Invalid Request: message exceeds the size limit"))
                    continue
                if not line.strip():
                    continue
                if len(line) > INLINE_BYTES:
                    decoded = await anyio.to_thread.run_sync(decode_line, line)
                else:
                    decoded = decode_line(line)
                if isinstance(decoded, bytes):
                    await emit(decoded)
                    continue
                if isinstance(decoded, types.JSONRPCRequest):
                    in_flight.add(decoded.id)
                elif isinstance(decoded, types.JSONRPCNotification) and decoded.method == "notifications/cancelled":
                    in_flight.discard((decoded.params or {}).get("requestId"))
                await to_server.send(SessionMessage(decoded))
            # End of input: let the calls in flight finish and be answered before the server stops.
            with anyio.move_on_after(drain_seconds):
                await in_flight.empty.wait()

    async def writer() -> None:
        async with from_server:
            async for session_message in from_server:
                message = session_message.message
                if is_placeholder(message):  # small: encoded on the event loop
                    data = encoded(message)
                else:
                    data = await anyio.to_thread.run_sync(encoded, message)
                await emit(data)
                if answers is not None and isinstance(data, list):  # a parked answer, now written
                    size = sum(map(len, data))
                    del data  # its bytes are freed before ``written`` (a heap trim) runs
                    await answers.after_writing(size)
                if isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)):
                    in_flight.discard(message.id)

    async with anyio.create_task_group() as tg:
        async def read_until_stopped() -> None:
            with reading:
                await reader()

        tg.start_soon(read_until_stopped)
        tg.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            # The server has stopped: stop reading, but let every answer it sent reach the wire.
            reading.cancel()
            await write_stream.aclose()
