"""One JSON-RPC request id at a time per MCP session: a request whose id is already being
answered on its session is refused before the SDK sees it.

The SDK routes each answer to the HTTP request that waits for it by the request's id alone. Two
requests of one session with the same id in flight left one of them waiting for ever: a hostile
probe sent 20 parallel ``tools/call`` requests with one id, each padded to 60 MiB, and about 17
were never answered; their streams stayed open with their bodies (RSS 1.5 -> 5.9 GB, held until
the client went away). JSON-RPC already asks a client to keep its ids unique while a request is
pending, so a second one is answered HTTP 409 with a JSON-RPC error (id null, as every request
refused before the SDK) and never reaches it.

The id is read from the body the body caps already hold (``body_limits``): a big body was parsed
there, off the event loop, and its id is handed on in the scope (``JSONRPC_ID``); a small one is
parsed here. Each server process keeps its own set, as it keeps its own sessions.

A request whose id no request may have (``unusable_id``) is answered 400 with ``-32600`` here,
with a session or without: the SDK would take it for a notification and answer nothing.
"""

from __future__ import annotations

import contextlib
import enum
import json
from collections import Counter
from typing import Any, Awaitable, Callable, Iterator

import anyio

from knowspec.impl.server.json_answer import send_jsonrpc_error, session_id_of

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

JSONRPC_ID = "knowspec.jsonrpc_id"  # scope key: the body's request id as the SDK keys it (None: none)
JSONRPC_MESSAGE = "knowspec.jsonrpc_message"  # scope key: an initialize as decoded here (None: another body)
PARSE_ON_LOOP_BYTES = 64 * 1024     # bigger bodies are parsed on a worker thread


class Unusable(enum.Enum):
    """A request whose ``id`` is not a string or an integer: null, a boolean (which MCP forbid),
    an object, an array, or a number written with a fraction or an exponent (the SDK keys ids as
    strings and integers). The SDK reads such a message as a notification and answers nothing, so
    its client would wait for ever: it is answered ``-32600`` instead (stdio and HTTP alike)."""

    ID = "unusable id"


UNUSABLE_ID = Unusable.ID
UNUSABLE_ID_MESSAGE = "Invalid Request: a request's id must be a string or an integer"


def is_request_id(value: Any) -> bool:
    """A string or an integer (not a boolean): the ids the SDK keys requests by."""
    return isinstance(value, (int, str)) and not isinstance(value, bool)


def unusable_id(message: Any) -> bool:
    """Whether ``message`` is a request (a method and an ``id`` key) whose id is not a string or an integer."""
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return False
    return not is_request_id(message["id"])


def decoded(body: bytes) -> Any:
    """The body as JSON, or None when it is none."""
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def request_id_of(body: bytes) -> str | Unusable | None:
    """The request's ``id`` as the SDK keys its answer streams (``str(id)``: ``7`` and ``"7"``
    share one), ``UNUSABLE_ID`` for a request with an id no request may have, None for a body
    that is no single JSON-RPC request (a notification, a response, a batch, not JSON)."""
    return id_key(decoded(body))


def id_key(message: Any) -> str | Unusable | None:
    """``request_id_of`` of a decoded message."""
    if unusable_id(message):
        return UNUSABLE_ID
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return None
    return str(message["id"])


class IdsInFlight:
    """The ``(session, request id)`` pairs being answered. The HTTP request that brought one holds
    it, and so does the tool call it started (``mcp_server``), which outlives its request when the
    client hangs up: a request reusing the id then had the old call's answer routed to it by the
    SDK, and both calls ran."""

    def __init__(self) -> None:
        self._held: Counter[tuple[str, str]] = Counter()

    def __contains__(self, key: tuple[str, str]) -> bool:
        return key in self._held

    def hold(self, key: tuple[str, str]) -> None:
        self._held[key] += 1

    def release(self, key: tuple[str, str]) -> None:
        self._held[key] -= 1
        if self._held[key] <= 0:
            del self._held[key]

    @contextlib.contextmanager
    def holding(self, scope: Scope, request_id: Any) -> Iterator[None]:
        """Holds the id of the request in ``scope`` (a session's, with an id) while the block runs."""
        session = session_id_of(scope)
        if session is None or request_id is None:
            yield
            return
        key = (session, str(request_id))
        self.hold(key)
        try:
            yield
        finally:
            self.release(key)


class OneRequestIdAtATime:
    """Refuses a POST to ``/mcp`` whose session already has a request with its id in flight."""

    def __init__(self, app: ASGIApp, path: str = "/mcp", in_flight: IdsInFlight | None = None) -> None:
        self.app, self.path = app, path
        self._in_flight = in_flight if in_flight is not None else IdsInFlight()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST" or scope.get("path") != self.path:
            await self.app(scope, receive, send)
            return
        session = session_id_of(scope)
        first = await receive()  # the whole body: the body caps replay it in one message
        if JSONRPC_ID in scope:
            request_id = scope[JSONRPC_ID]
        else:
            body = first.get("body", b"")
            message = decoded(body) if len(body) <= PARSE_ON_LOOP_BYTES else await anyio.to_thread.run_sync(decoded, body)
            # the session quota reads an initialize from it (anything else is not kept for the request's life)
            scope[JSONRPC_MESSAGE] = message if isinstance(message, dict) and message.get("method") == "initialize" \
                else None
            request_id = id_key(message)
        if request_id is UNUSABLE_ID:
            await send_jsonrpc_error(send, 400, UNUSABLE_ID_MESSAGE)
            return
        if request_id is None or session is None:
            await self.app(scope, replaying(first, receive), send)
            return
        key = (session, request_id)
        if key in self._in_flight:
            shown = json.dumps(request_id[:64], ensure_ascii=False)
            await send_jsonrpc_error(send, 409, f"Invalid Request: request id {shown} is already in flight in "
                                                "this session; use a new id for each request")
            return
        self._in_flight.hold(key)
        try:
            await self.app(scope, replaying(first, receive), send)
        finally:
            self._in_flight.release(key)


def replaying(first: Message, receive: Receive) -> Receive:
    """``receive`` that gives ``first`` (the body already taken) once, then the live messages."""
    pending = [first]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay
