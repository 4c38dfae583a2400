"""Request body caps and deadlines for the HTTP app, enforced before anything reads a body.

Without them an anonymous client could make the server buffer a body of any size (a 300 MB
``POST /ClientREST/Login`` grew the process by 0.9 GB) or hold sockets open by trickling one.
This ASGI middleware reads each body itself, counting as the chunks arrive:

- a declared ``Content-Length`` over the cap is refused at once, an undeclared (chunked) body as
  soon as the count passes the cap: HTTP 413; on ``/mcp`` the cap is 72 MiB for a ``tools/call``
  and 1 MiB for any other message (413 as well);
- a body that stalls longer than ``idle_seconds`` between chunks, or takes longer than
  ``total_seconds`` overall, is refused: HTTP 408;
- the big bodies (over 1 MiB: tool calls) held at once across all requests, counted by the
  bytes received until their request is answered, stay within one budget
  (``--request-body-mib-in-flight``, 128 MiB), and one caller's within half of it, though never
  below one body of the largest size allowed: a body that would pass either is refused with
  HTTP 503 and ``Retry-After`` (four parallel 65 MiB calls peaked at 1.1-1.4 GB without it, each
  body within its own cap), and one larger than the whole budget, which no wait would let in,
  with 413. Small bodies (logins, every other message) never wait on it; they are bounded by
  the requests each caller may have in flight (``caller_load``);
- a request that declares both ``Content-Length`` and ``Transfer-Encoding`` is refused (HTTP
  400, connection closed): a proxy in front that read the length would disagree with this
  server on where the request ends (RFC 9112 §6.1);
- an ``/mcp`` body that is not one JSON object (a batch array, a scalar) is refused with a
  JSON-RPC error of its own (-32600), not the SDK's validation text;
- a big ``/mcp`` body that surely holds more JSON values than the raw-argument walk lets through
  (``json_size``) is refused with 413 before it is decoded: decoding 66 MiB of empty lists had
  taken ~2 GB and held the GIL for seconds, for a call the walk refused anyway;
- otherwise the app receives the body it would have read, then the live ``receive`` (so client
  disconnects still reach it).

REST paths answer with the error envelope (``resource_limit`` / ``invalid_request``), ``/mcp``
with a JSON-RPC error (id null), each the shape that path's clients already parse. Requests
without a body (``GET /mcp`` event streams among them) pass through untouched.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

import anyio

from knowspec.impl.rest.error_responses import envelope
from knowspec.impl.server.arguments import MAX_VALUES
from knowspec.impl.server.json_answer import BATCH_REFUSED, is_mcp_path, send_json, send_jsonrpc_error
from knowspec.impl.server.json_size import surely_more_values_than
from knowspec.impl.server.request_ids import JSONRPC_ID, Unusable, id_key, replaying
from knowspec.impl.server.session_quota import caller_key

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MCP_MAX_BODY_BYTES = 72 * 1024 * 1024  # above the 64 MiB argument estimate (spec/okf/contract/read.md §5.1)
# Only a tool call carries big arguments; any other message (initialize, list, ping) over this
# is refused: the SDK keeps an initialize's clientInfo for the session's life (three 60 MiB
# anonymous initializes held ~1 GB for the 30 minutes an idle session lives).
MCP_MAX_OTHER_BODY_BYTES = 1024 * 1024
BIG_BODY_METHOD = "tools/call"
REST_MAX_BODY_BYTES = 1024 * 1024  # REST bodies are small JSON objects (IMPORTDOC names a file)
BODY_BYTES_IN_FLIGHT = 128 * 1024 * 1024  # a 65 MiB call peaks at ~250 MiB of copies
SMALL_BODY_BYTES = MCP_MAX_OTHER_BODY_BYTES  # bodies up to this size are outside the budget
BUSY_RETRY_SECONDS = 1
IDLE_SECONDS = 5.0
REST_TOTAL_SECONDS = 10.0
MCP_TOTAL_SECONDS = 60.0


@dataclass(frozen=True)
class BodyRule:
    max_bytes: int
    total_seconds: float
    idle_seconds: float = IDLE_SECONDS


class _Refused(Exception):
    def __init__(self, status: int, message: str):
        self.status, self.message = status, message


class BodyBudget:
    """Bytes of big request bodies held at once, in all and per caller (at most half of all, so
    no one caller can fill it, but at least ``largest_body``, so a caller alone may send one body
    of any size allowed); used on the event loop only."""

    def __init__(self, limit: int, largest_body: int = MCP_MAX_BODY_BYTES) -> None:
        self.limit = limit
        self.per_caller = min(limit, max(limit // 2, largest_body))
        self.held = 0
        self._by_caller: Counter[str] = Counter()

    def take(self, size: int, caller: str) -> None:
        if self.held + size > self.limit or self._by_caller[caller] + size > self.per_caller:
            raise _Refused(503, "the server holds as many request bodies as it may now; retry shortly")
        self.held += size
        self._by_caller[caller] += size

    def fits(self, body_size: int) -> None:
        """Refuse for good (413) a body larger than the whole budget: no wait would let it in."""
        if body_size > self.limit:
            raise _Refused(413, f"request body exceeds the {self.limit >> 20} MiB of bodies this server holds at once")

    def give(self, size: int, caller: str) -> None:
        self.held -= size
        self._by_caller[caller] -= size
        if self._by_caller[caller] <= 0:
            del self._by_caller[caller]


def _has_body(scope: Scope) -> bool:
    headers = dict(scope.get("headers") or [])
    length = headers.get(b"content-length")
    if length is not None:
        return length.strip() not in (b"", b"0")
    return b"chunked" in headers.get(b"transfer-encoding", b"").lower()


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers") or []:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def read_body(receive: Receive, rule: BodyRule, grown: Callable[[int], None] = lambda size: None) -> bytes | None:
    """The whole body within ``rule``; ``None`` when the client disconnected first.
    ``grown(size)`` hears the size read so far after each chunk (and may refuse it)."""
    chunks: list[bytes] = []
    size = 0
    deadline = time.monotonic() + rule.total_seconds
    while True:
        wait = min(rule.idle_seconds, deadline - time.monotonic())
        if wait <= 0:
            raise _Refused(408, "request body was not received in time")
        with anyio.move_on_after(wait) as timer:
            message = await receive()
        if timer.cancelled_caught:
            raise _Refused(408, "request body was not received in time")
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > rule.max_bytes:
            raise _Refused(413, "request body exceeds the size limit")
        grown(size)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _tool_call(body: bytes) -> tuple[bool, str | Unusable | None]:
    """Whether a (big) JSON-RPC body is one ``tools/call`` request, and its id as ``request_ids``
    keys it. Decoded whole: a key may stand anywhere in the object, and only bodies over the
    small cap pay for it (once: the id goes on in the scope)."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, or nested past what json decodes
        return False, None
    if not (isinstance(message, dict) and message.get("method") == BIG_BODY_METHOD):
        return False, None
    return True, id_key(message)


_FIRST_BYTE = re.compile(rb"[ \t\r\n]*(.)", re.DOTALL)


def _conflicting_framing(scope: Scope) -> bool:
    """Whether the request declares its length twice over: ``Content-Length`` and ``Transfer-Encoding``."""
    names = {name for name, _ in scope.get("headers") or []}
    return b"content-length" in names and b"transfer-encoding" in names


def _not_one_object(body: bytes) -> str | None:
    """Why an ``/mcp`` body cannot be one JSON-RPC message, or None when it may be (an object, or
    no JSON at all, whose parse error the SDK answers)."""
    first = _FIRST_BYTE.match(body)
    if first is None or first.group(1) == b"{":
        return None
    if first.group(1) == b"[":
        return BATCH_REFUSED
    try:
        json.loads(body)  # a small body here: big ones were decoded as tool calls already
    except (ValueError, RecursionError):
        return None
    return "a message must be one JSON object"


async def _refuse(scope: Scope, send: Send, refused: _Refused) -> None:
    close = [(b"connection", b"close")]
    if refused.status == 503:
        close.append((b"retry-after", str(BUSY_RETRY_SECONDS).encode("ascii")))
    if is_mcp_path(scope):
        await send_jsonrpc_error(send, refused.status, f"Invalid Request: {refused.message}", close)
        return
    code = {413: "resource_limit", 503: "rate_limited"}.get(refused.status, "invalid_request")
    body = json.dumps(envelope(code, refused.message, retryable=refused.status in (408, 503)),
                      separators=(",", ":"))
    await send_json(send, refused.status, body.encode("utf-8"), close)


class BodyLimitMiddleware:
    """Caps and deadlines per path family: ``/mcp`` and everything else (REST)."""

    def __init__(self, app: ASGIApp, mcp: BodyRule | None = None, rest: BodyRule | None = None,
                 bytes_in_flight: int = BODY_BYTES_IN_FLIGHT):
        self.app = app
        self.mcp = mcp or BodyRule(MCP_MAX_BODY_BYTES, MCP_TOTAL_SECONDS)
        self.rest = rest or BodyRule(REST_MAX_BODY_BYTES, REST_TOTAL_SECONDS)
        self.budget = BodyBudget(bytes_in_flight, largest_body=self.mcp.max_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _has_body(scope):
            await self.app(scope, receive, send)
            return
        taken, caller = 0, caller_key(scope)

        def grown(size: int) -> None:  # a big body takes its budget as its bytes arrive
            nonlocal taken
            if size > max(taken, SMALL_BODY_BYTES):
                self.budget.fits(size)
                self.budget.take(size - taken, caller)
                taken = size

        try:
            await self._read_and_answer(scope, receive, send, grown)
        finally:
            self.budget.give(taken, caller)

    async def _read_and_answer(self, scope: Scope, receive: Receive, send: Send, grown: Callable[[int], None]) -> None:
        rule = self.mcp if is_mcp_path(scope) else self.rest
        try:
            if _conflicting_framing(scope):
                raise _Refused(400, "a request may not declare both Content-Length and Transfer-Encoding")
            declared = _declared_length(scope)
            if declared is not None and declared > rule.max_bytes:
                raise _Refused(413, "request body exceeds the size limit")
            if declared is not None and declared > SMALL_BODY_BYTES:
                self.budget.fits(declared)
            # The budget is taken by bytes received, never by a length declared: two sockets
            # declaring 72 + 56 MiB and sending a byte every 4 s had held all of it.
            body = await read_body(receive, rule, grown)
        except _Refused as refused:
            await _refuse(scope, send, refused)
            return
        if body is None:
            return  # the client left; there is no one to answer
        if is_mcp_path(scope) and len(body) > MCP_MAX_OTHER_BODY_BYTES:
            if await anyio.to_thread.run_sync(surely_more_values_than, body, MAX_VALUES):
                await _refuse(scope, send, _Refused(413, f"request body holds more than {MAX_VALUES:,} JSON values, "
                                                         "more than any tool call may"))
                return
            is_call, request_id = await anyio.to_thread.run_sync(_tool_call, body)  # not on the event loop
            if not is_call:
                await _refuse(scope, send, _Refused(413, f"request body exceeds the size limit of a message "
                                                         f"other than {BIG_BODY_METHOD}"))
                return
            scope[JSONRPC_ID] = request_id
        elif is_mcp_path(scope):
            wrong = _not_one_object(body)
            if wrong is not None:
                await _refuse(scope, send, _Refused(400, wrong))
                return
        await self.app(scope, replaying({"type": "http.request", "body": body, "more_body": False}, receive), send)
