"""How the suite reaches a server: a stdio command or a streamable-HTTP URL, over one era.

``Connection`` is a synchronous facade over an async MCP session that lives in an anyio
blocking portal, so checks (and hypothesis, which is synchronous) can call tools directly
and still shrink failing inputs. It bypasses the SDK's client-side output validation by
sending raw ``CallToolRequest`` messages: classifying bad outputs is the suite's job.
The transport is tapped: ``Connection.wire`` times every message, including answers the SDK
drops because nobody waits for them any more (cancelled or timed-out requests).
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import shlex
import socket
import tempfile
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Iterator

import anyio
import mcp.types as types
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, encode_header_value

from knowspec.conformance.spawned import noting_children

# legacy: the initialize handshake. modern: server/discover first (2026-07-28), falling back to the
# handshake for a server that predates it; the run reports the protocol version that was agreed.
ERAS = {"legacy": "legacy", "modern": "auto"}


class TargetError(Exception):
    """The target cannot be reached or is misconfigured (exit code 2)."""


NO_ANSWER_IN_TIME = "no answer within the call's deadline"

# The client SDK answers for the target when no answer came: a deadline that passed, a transport
# that closed, an HTTP answer that carried no JSON-RPC message. It raises these as JSON-RPC errors
# of its own; judged as the target's answers they would let a dead session pass (the same stand-in
# twice is "deterministic"). (code, how the installed SDK words the message, what happened):
# tests/conformance/test_conform_dead_sessions.py pins them against real fake targets.
SDK_STAND_INS: tuple[tuple[int, re.Pattern[str], str], ...] = tuple(
    (code, re.compile(wording), what) for code, wording, what in (
        (types.REQUEST_TIMEOUT, r"Request '[^']*' timed out$", NO_ANSWER_IN_TIME),
        (types.CONNECTION_CLOSED, r"Connection closed", "the connection to the target closed"),
        (types.CONNECTION_CLOSED, r"SSE stream ", "the HTTP event stream ended or broke without an answer"),
        (types.INTERNAL_ERROR, r"Server returned an error response",
         "an HTTP error status without a JSON-RPC error in its body"),
        (types.INVALID_REQUEST, r"Session terminated", "HTTP 404 on an open session: the target dropped the session"),
        (types.INVALID_REQUEST, r"server answered a request with 202 Accepted",
         "HTTP 202 to a request: no answer will follow"),
        (types.INVALID_REQUEST, r"Unexpected content type", "an HTTP answer that is neither JSON nor an event stream"),
        (types.INVALID_REQUEST, r"Redirect to ", "an HTTP redirect the client does not follow"),
        (types.PARSE_ERROR, r"Failed to parse ", "an HTTP answer that is not a JSON-RPC message"),
    ))


def sdk_stand_in(code: int, message: str) -> str | None:
    """What happened, when a JSON-RPC error is the client SDK's stand-in for a missing answer."""
    for known, wording, what in SDK_STAND_INS:
        if code == known and wording.match(message):
            return f"{what} ({code}: {message[:200]})"
    return None


HANDSHAKE_TIMEOUT = 60.0
STDERR_TAIL_CHARS = 300  # of a stdio server's stderr, quoted when it stopped answering


@dataclass(frozen=True)
class Target:
    """``stdio:<command line>`` or ``http(s)://host:port/mcp``."""

    spec: str
    era: str = "legacy"
    timeout: float = 30.0
    bearer_token: str | None = None  # HTTP: sent as Authorization: Bearer on every MCP request

    @property
    def is_stdio(self) -> bool:
        return self.spec.startswith("stdio:")

    def argv(self) -> list[str]:
        return shlex.split(self.spec[len("stdio:"):])

    def validate(self) -> None:
        if self.era not in ERAS:
            raise TargetError(f"unknown era {self.era!r} (legacy or modern)")
        if self.is_stdio:
            if not self.argv():
                raise TargetError("stdio target has no command")
        elif not self.spec.startswith(("http://", "https://")):
            raise TargetError(f"target must be stdio:<command> or an http(s) URL, got {self.spec!r}")


@dataclass(frozen=True)
class CallOutcome:
    """What one ``tools/call`` produced: a result, a JSON-RPC error, or a transport failure."""

    arguments: Any
    is_error: bool = False
    structured: Any = None
    texts: tuple[str, ...] = ()
    raw: dict[str, Any] | None = None
    rpc_error: tuple[int, str] | None = None      # a JSON-RPC error the target sent
    transport_error: str | None = None            # no answer from the target (see SDK_STAND_INS)
    timed_out: bool = False                       # ... because the call's deadline passed

    @property
    def is_result(self) -> bool:
        return self.raw is not None

    def canonical_bytes(self) -> bytes:
        """The result as compared for determinism: the JSON the server sent, key order kept (a
        server chooses its key order freely, but the same call gets the same bytes)."""
        if self.raw is not None:
            return json.dumps(self.raw, ensure_ascii=False, separators=(",", ":")).encode()
        return json.dumps({"rpc_error": self.rpc_error, "transport": self.transport_error}).encode()

    def summary(self) -> dict[str, Any]:
        """A JSON-able picture of the response for reports."""
        if self.raw is not None:
            return self.raw
        if self.rpc_error is not None:
            return {"jsonrpc_error": {"code": self.rpc_error[0], "message": self.rpc_error[1]}}
        return {"transport_error": self.transport_error}


@dataclass(frozen=True)
class WireEvent:
    """One JSON-RPC message where the client's transport saw it; ``at`` is ``time.monotonic()``.

    ``id`` is the message's id, or for ``notifications/cancelled`` the id it names; ``code`` is
    the envelope code of an ``isError`` result or the code of a JSON-RPC error.
    """

    seq: int
    at: float
    outgoing: bool
    kind: str                 # request | notification | response | error
    id: Any = None
    method: str = ""
    is_error: bool = False
    code: Any = None


def _wire_event(seq: int, message: Any, outgoing: bool) -> WireEvent | None:
    at = time.monotonic()
    if isinstance(message, types.JSONRPCRequest):
        return WireEvent(seq, at, outgoing, "request", message.id, message.method)
    if isinstance(message, types.JSONRPCNotification):
        params = message.params or {}
        named = params.get("requestId") if message.method == "notifications/cancelled" else None
        return WireEvent(seq, at, outgoing, "notification", named, message.method)
    if isinstance(message, types.JSONRPCResponse):
        result = message.result if isinstance(message.result, dict) else {}
        is_error = result.get("isError") is True
        env = result.get("structuredContent") if is_error else None
        return WireEvent(seq, at, outgoing, "response", message.id, is_error=is_error,
                         code=env.get("code") if isinstance(env, dict) else None)
    if isinstance(message, types.JSONRPCError):
        return WireEvent(seq, at, outgoing, "error", message.id, code=message.error.code)
    return None


class WireLog:
    """The session's messages with their times (the last few thousand), for timing-sensitive checks.

    The SDK drops an answer to a request it stopped waiting for; only the wire shows whether a
    cancelled request was answered anyway, and whether that answer came before the cancel.
    """

    def __init__(self, maxlen: int = 4096) -> None:
        self._events: collections.deque[WireEvent] = collections.deque(maxlen=maxlen)
        self._cond = threading.Condition()
        self._seq = 0

    def record(self, item: Any, outgoing: bool) -> None:
        message = getattr(item, "message", None)
        with self._cond:
            event = _wire_event(self._seq, message, outgoing)
            if event is not None:
                self._seq += 1
                self._events.append(event)
                self._cond.notify_all()

    def mark(self) -> int:
        """A position: ``find``/``wait_for`` with ``after=mark()`` see only later messages."""
        with self._cond:
            return self._seq

    def find(self, match: Callable[[WireEvent], bool], after: int = 0) -> WireEvent | None:
        with self._cond:
            return next((e for e in self._events if e.seq >= after and match(e)), None)

    def wait_for(self, match: Callable[[WireEvent], bool], after: int, timeout: float) -> WireEvent | None:
        end = time.monotonic() + timeout
        with self._cond:
            while True:
                found = next((e for e in self._events if e.seq >= after and match(e)), None)
                left = end - time.monotonic()
                if found is not None or left <= 0:
                    return found
                self._cond.wait(left)


class _TapRead:
    """A read stream that logs each incoming message, otherwise the transport's own stream."""

    def __init__(self, inner: Any, log: WireLog) -> None:
        self._inner, self._log = inner, log

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        item = await self._inner.receive()
        self._log.record(item, outgoing=False)
        return item

    def __aiter__(self) -> "_TapRead":
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> "_TapRead":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class _TapWrite:
    """A write stream that logs each outgoing message once the transport has taken it."""

    def __init__(self, inner: Any, log: WireLog) -> None:
        self._inner, self._log = inner, log

    async def send(self, item: Any) -> None:
        await self._inner.send(item)
        self._log.record(item, outgoing=True)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> "_TapWrite":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


@contextlib.asynccontextmanager
async def _tapped(transport: Any, log: WireLog) -> AsyncIterator[tuple[_TapRead, _TapWrite]]:
    async with transport as (read, write):
        yield _TapRead(read, log), _TapWrite(write, log)


def _transport(target: Target, errlog: Any) -> Any:
    if target.is_stdio:
        # The whole environment, as a shell would pass it: the SDK's default keeps only a few
        # variables (a host must not leak secrets into servers it starts from a config), which
        # would silently drop the settings a user gave the target they typed.
        argv = target.argv()
        return stdio_client(StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ)),
                            errlog=errlog)
    if target.bearer_token:
        return _http_with_bearer(target.spec, target.bearer_token)
    return streamable_http_client(target.spec)


@contextlib.asynccontextmanager
async def _http_with_bearer(url: str, token: str) -> AsyncIterator[Any]:
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as client, \
            streamable_http_client(url, http_client=client) as streams:
        yield streams


def rest_login(base: str, user: str, password: str, timeout: float = 30.0) -> tuple[str, str, tuple[str, ...]]:
    """``(token, user, roles)`` of a ``POST /ClientREST/Login`` session; ``TargetError`` if refused.

    Over HTTP a knowspec server answers ``/mcp`` only with a bearer token (the REST session):
    the suite logs in once and sends that token on every MCP request.
    """
    import urllib.error
    import urllib.request

    request = urllib.request.Request(base.rstrip("/") + "/ClientREST/Login", method="POST",
                                     data=json.dumps({"user": user, "password": password}).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise TargetError(f"login as {user} for the MCP session refused: HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise TargetError(f"login as {user} for the MCP session failed: {exc}") from None
    if not isinstance(body, dict) or not body.get("token"):
        raise TargetError(f"login as {user} for the MCP session answered no token")
    return str(body["token"]), str(body.get("user") or user), tuple(body.get("roles") or ())


@dataclass
class Connection:
    portal: BlockingPortal
    client: Client
    target: Target
    wire: WireLog = field(default_factory=WireLog)
    stderr: Any = None   # a stdio server's stderr file (None over HTTP)
    broken: str | None = field(default=None, init=False)   # the first call the target left unanswered
    _tools: list[dict[str, Any]] | None = field(default=None, init=False)

    async def _raw(self, request: Any, timeout: float) -> Any:
        """Send ``request`` as the SDK would and return the result exactly as parsed from the wire.

        The SDK's ``send_request`` validates every result against the negotiated revision's
        models, so a server that omits a newer optional field (``ttlMs``, ``cacheScope``,
        ``resultType``) would end in a pydantic error; the suite judges only what the contract
        requires, from the raw result.
        """
        session = self.client.session
        data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
        opts: dict[str, Any] = {}
        session._stamp(data, opts)
        name_param = getattr(type(request), "name_param", None)
        name = (data.get("params") or {}).get(name_param) if name_param else None
        if isinstance(name, str):
            opts.setdefault("headers", {}).setdefault(MCP_NAME_HEADER, encode_header_value(name))
        opts["timeout"] = timeout
        return await session._dispatcher.send_raw_request(data["method"], data.get("params"), opts)

    async def _call(self, name: str, arguments: Any, timeout: float) -> CallOutcome:
        request = types.CallToolRequest(params=types.CallToolRequestParams(name=name, arguments=arguments))
        try:
            raw = await self._raw(request, timeout)
        except MCPError as exc:
            stand_in = sdk_stand_in(exc.error.code, exc.error.message)
            if stand_in is None:
                return CallOutcome(arguments, rpc_error=(exc.error.code, exc.error.message))
            return self._unanswered(arguments, stand_in, timed_out=exc.error.code == types.REQUEST_TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - any transport fault becomes data, never a crash
            return self._unanswered(arguments, f"{type(exc).__name__}: {exc}")
        if not isinstance(raw, dict):
            return CallOutcome(arguments, transport_error=f"tools/call result is not an object: {str(raw)[:200]}")
        content = raw.get("content")
        texts = tuple(c["text"] for c in (content if isinstance(content, list) else [])
                      if isinstance(c, dict) and c.get("type") == "text" and isinstance(c.get("text"), str))
        return CallOutcome(
            arguments,
            is_error=raw.get("isError") is True,
            structured=raw.get("structuredContent"),
            texts=texts,
            raw=raw,
        )

    def _unanswered(self, arguments: Any, why: str, timed_out: bool = False) -> CallOutcome:
        """A call the target did not answer; the session is marked broken (the worker replaces it:
        the target may be gone, or still busy with the call over stdio). A stdio server that went
        away usually said why on its stderr: its last words go with the failure."""
        last_words = "" if timed_out else stderr_tail(self.stderr)
        if last_words:
            why = f"{why}; the server's stderr ends: {last_words}"
        if self.broken is None:
            self.broken = why
        return CallOutcome(arguments, transport_error=why, timed_out=timed_out)

    def call(self, name: str, arguments: Any, timeout: float | None = None) -> CallOutcome:
        return self.portal.call(self._call, name, arguments, timeout or self.target.timeout)

    def start_call(self, name: str, arguments: Any, timeout: float | None = None) -> tuple[Future, WireEvent]:
        """Send a tools/call without waiting: its future outcome and its request as written on the wire."""
        mark = self.wire.mark()
        future = self.portal.start_task_soon(self._call, name, arguments, timeout or self.target.timeout)
        sent = self.wire.wait_for(lambda e: e.outgoing and e.kind == "request" and e.method == "tools/call",
                                  mark, timeout=10.0)
        if sent is None:
            future.cancel()
            raise TimeoutError("the tools/call request was not written within 10 s")
        return future, sent

    def cancel(self, request_id: Any, reason: str) -> WireEvent | None:
        """Send ``notifications/cancelled`` for ``request_id``; the cancel as written (None: not written)."""
        mark = self.wire.mark()
        note = types.CancelledNotification(params=types.CancelledNotificationParams(request_id=request_id,
                                                                                    reason=reason))
        self.portal.call(self.client.session.send_notification, note)
        return self.wire.wait_for(lambda e: e.outgoing and e.method == "notifications/cancelled"
                                  and e.id == request_id, mark, timeout=5.0)

    def call_many(self, calls: list[tuple[str, Any]], timeout: float | None = None) -> list[CallOutcome]:
        """Send the calls concurrently on this one session and return outcomes in call order."""

        async def run() -> list[CallOutcome]:
            import anyio

            out: list[CallOutcome | None] = [None] * len(calls)

            async def one(i: int, name: str, args: Any) -> None:
                out[i] = await self._call(name, args, timeout or self.target.timeout)

            async with anyio.create_task_group() as tg:
                for i, (name, args) in enumerate(calls):
                    tg.start_soon(one, i, name, args)
            return [o for o in out if o is not None]

        return self.portal.call(run)

    @property
    def protocol(self) -> str:
        """The protocol version this session agreed with the target."""
        return str(getattr(self.client.session, "protocol_version", None) or "unknown")

    def list_tools(self) -> list[dict[str, Any]]:
        """Every tool the server advertises, as wire-shaped dicts (camelCase keys)."""
        if self._tools is None:

            async def fetch() -> list[dict[str, Any]]:
                tools: list[dict[str, Any]] = []
                cursor = None
                for _ in range(100):
                    params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                    try:
                        page = await self._raw(types.ListToolsRequest(params=params), self.target.timeout)
                    except MCPError as exc:
                        raise TargetError(f"tools/list failed: JSON-RPC error {exc.error.code}: "
                                          f"{exc.error.message[:200]}") from None
                    if not isinstance(page, dict) or not isinstance(page.get("tools"), list):
                        raise TargetError("tools/list answered without a tools array")
                    tools += [t for t in page["tools"] if isinstance(t, dict) and isinstance(t.get("name"), str)]
                    cursor = page.get("nextCursor")
                    if not isinstance(cursor, str) or not cursor:
                        break
                return tools

            self._tools = self.portal.call(fetch)
        return self._tools


def unreachable_reason(target: Target, exc: BaseException) -> str:
    """One sentence naming why a session could not open, not the task group that wrapped it."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if target.is_stdio and isinstance(exc, FileNotFoundError):
        return f"stdio command not found: {target.argv()[0]}"
    if target.is_stdio and isinstance(exc, PermissionError):
        return f"stdio command is not executable: {target.argv()[0]}"
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, (ConnectionRefusedError, socket.gaierror)):
        cause = cause.__cause__ or cause.__context__
    if isinstance(cause, ConnectionRefusedError):
        return f"cannot reach {target.spec}: connection refused"
    if isinstance(cause, socket.gaierror):
        return f"cannot reach {target.spec}: host name not found"
    refused = None if target.is_stdio else sign_in_refusal(target)
    if refused:
        return f"cannot open an MCP session to {target.spec}: {refused}"
    return f"cannot open an MCP session to {target.spec}: {type(exc).__name__}: {exc}"


SIGN_IN_HINT = ("give a bearer token (--bearer-token or $KNOWSPEC_CONFORM_TOKEN), or --rest-url with --admin-user "
                "and --admin-password to log in for it")


def sign_in_refusal(target: Target) -> str | None:
    """Why an HTTP target refused the session, when it asked for a sign-in: the SDK's client
    only says "Server returned an error response", so one request is sent by hand and a 401 or
    403 is named, with the server's own message. A ping, not an initialize: a token the server
    takes must not leave it a session nobody ends."""
    import urllib.error
    import urllib.request

    ping = {"jsonrpc": "2.0", "id": 0, "method": "ping"}
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if target.bearer_token:
        headers["Authorization"] = f"Bearer {target.bearer_token}"
    request = urllib.request.Request(target.spec, data=json.dumps(ping).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=min(target.timeout, 10.0)):
            return None
    except urllib.error.HTTPError as exc:
        if exc.code not in (401, 403):
            return None
        try:
            answer = json.loads(exc.read(4096) or b"null")
        except ValueError:
            answer = None
        said = None
        if isinstance(answer, dict):  # the REST envelope's message, or a JSON-RPC error's
            error = answer.get("error")
            said = answer.get("message") or (error.get("message") if isinstance(error, dict) else None)
        sent = "the bearer token given" if target.bearer_token else "no bearer token"
        return (f"the server answered HTTP {exc.code} to {sent}" + (f" ({str(said)[:200]})" if said else "")
                + f": {SIGN_IN_HINT}")
    except (urllib.error.URLError, OSError, ValueError):
        return None


def stderr_tail(stream: Any, limit: int = STDERR_TAIL_CHARS) -> str:
    """The last ``limit`` characters a stdio server wrote to its stderr file so far, read without
    moving the offset the server writes at; "" without one."""
    if stream is None:
        return ""
    try:
        fd = stream.fileno()
        size = os.fstat(fd).st_size
        tail = os.pread(fd, limit * 4, max(0, size - limit * 4))
    except (OSError, ValueError, AttributeError):
        return ""
    return tail.decode("utf-8", "replace")[-limit:].strip()


@contextlib.contextmanager
def connect(target: Target) -> Iterator[Connection]:
    """Open one MCP session to the target; ``TargetError`` when it cannot be reached."""
    target.validate()
    errlog = tempfile.TemporaryFile(mode="w+")  # the server's stderr: kept off the terminal
    wire = WireLog()
    with start_blocking_portal() as portal:
        # Every call passes its own deadline; this one bounds the handshake, which a server that
        # is still importing its libraries (a cold start on a busy machine) may take a while to answer.
        client = Client(_tapped(_transport(target, errlog), wire), mode=ERAS[target.era], cache=None,
                        read_timeout_seconds=max(target.timeout, HANDSHAKE_TIMEOUT))
        try:
            cm = portal.wrap_async_context_manager(client)
            with noting_children() if target.is_stdio else contextlib.nullcontext():
                entered = cm.__enter__()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - spawn/handshake failures of any kind
            tail = stderr_tail(errlog, 400)
            raise TargetError(unreachable_reason(target, exc) + (f" (server stderr: {tail})" if tail else "")) from None
        try:
            yield Connection(portal, entered, target, wire, stderr=errlog if target.is_stdio else None)
        finally:
            with contextlib.suppress(BaseException):
                cm.__exit__(None, None, None)
            errlog.close()
