"""At most so many open MCP sessions per caller, so that no caller can fill the SDK's one table of
sessions (10,000 a process) and lock everyone else out of ``/mcp`` (its 503) until they expire.

A caller is the signed-in user the bearer gate named (``scope["user"]``), however many tokens
they hold, or, anonymous, the client's address. A request that would open a session (a POST to
``/mcp`` without ``mcp-session-id``) beyond the caller's quota is answered 429 with a JSON-RPC
error and opens nothing. One the SDK refuses (400, 406, ...) is answered without the session id
the SDK put on it, since that session is gone (so is a GET, DELETE, OPTIONS or HEAD without
one), and an ``initialize`` whose params the SDK would refuse is answered 400 here (the SDK
answers it 200 and keeps a session no one can use). A request the SDK serves without a session
(a later protocol version's) is not counted. The session ids the SDK answers with are counted for
their caller while the SDK still holds them: a DELETE, its idle timeout or a crash ends them
there, and here. Requests being answered count too, from before their body is read, so parallel
opening requests cannot overshoot the quota.

Each server process (each worker of ``--workers N``) keeps its own count, as it keeps its own
sessions.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Container

import anyio
import mcp.types as types
import pydantic
from mcp.server.streamable_http_manager import HANDSHAKE_PROTOCOL_VERSIONS

from knowspec.impl.server.access import MCP_PATH
from knowspec.impl.server.json_answer import SESSION_HEADER, is_mcp_path, send_jsonrpc_error, session_id_of
from knowspec.impl.server.request_ids import (JSONRPC_ID, JSONRPC_MESSAGE, PARSE_ON_LOOP_BYTES, decoded,
                                               is_request_id, replaying)

INVALID_PARAMS = types.INVALID_PARAMS
VERSION_HEADER = b"mcp-protocol-version"


def sdk_sessions(server: Any) -> Callable[[], Container[str]]:
    """The ids of the sessions ``server``'s streamable HTTP manager holds now (its own table: the
    SDK offers no public view of it; ``tests/server/test_session_quota.py`` pins what is read)."""
    manager = server.session_manager
    return lambda: manager._server_instances


def user_key(name: str) -> str:
    """The key of a signed-in user's quotas, however many tokens they hold."""
    return f"user {name}"


def caller_key(scope: dict) -> str:
    """Whose quota a request counts against: the user the gate named, else the client's address."""
    user = scope.get("user")
    name = getattr(getattr(user, "access_token", None), "subject", None)
    if name:
        return user_key(name)
    client = scope.get("client")
    return f"address {client[0] if client else '?'}"


def _opens_a_session(scope: dict) -> bool:
    """A POST to ``/mcp`` without a session id, in the era of sessions: the SDK serves a request
    whose ``MCP-Protocol-Version`` names a later version statelessly, opening nothing."""
    if scope.get("type") != "http" or scope.get("method") != "POST":
        return False
    if scope.get("path", "").rstrip("/") != MCP_PATH:
        return False
    version = next((v.decode("latin-1") for k, v in scope.get("headers") or [] if k.lower() == VERSION_HEADER), None)
    if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
        return False
    return session_id_of(scope) is None


def initialize_refusal(message: Any) -> tuple[str, Any] | None:
    """``(why, id)`` for a decoded ``initialize`` request whose params the SDK's own model refuses,
    else None. The SDK answers such a request 200 with a JSON-RPC error and keeps the session it
    made for it (an opening answer below 400 establishes one) until its idle timeout: a client
    retrying a bad initialize filled its caller's quota with sessions nobody could use."""
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return None
    try:
        types.InitializeRequestParams.model_validate(message.get("params") or {}, by_name=False)  # as the SDK does
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "params"
        request_id = message.get("id")
        return (f"Invalid params: initialize {where}: {first.get('msg', 'invalid')}",
                request_id if is_request_id(request_id) else None)
    return None


class SessionQuota:
    """ASGI middleware between the bearer gate (which names the caller) and the SDK's app.
    ``live_sessions()`` answers the ids of the sessions the SDK holds now."""

    def __init__(self, app: Any, *, per_caller: int, live_sessions: Callable[[], Container[str]]) -> None:
        self.app = app
        self.per_caller = per_caller
        self.live_sessions = live_sessions
        self._opened: dict[str, set[str]] = defaultdict(set)
        self._opening: dict[str, int] = defaultdict(int)

    def open_sessions(self, key: str) -> int:
        """The sessions ``key`` holds now, opening ones included (ended ones forgotten)."""
        live = self.live_sessions()
        opened = {s for s in self._opened.pop(key, ()) if s in live}
        if opened:
            self._opened[key] = opened
        return len(opened) + self._opening.get(key, 0)

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if not _opens_a_session(scope):
            names_none = scope.get("type") == "http" and is_mcp_path(scope) and session_id_of(scope) is None
            await self.app(scope, receive, _naming_no_dropped_session(send) if names_none else send)
            return
        key = caller_key(scope)
        if self.open_sessions(key) >= self.per_caller:
            await _refuse(send, self.per_caller)
            return
        self._opening[key] += 1  # counted before any await: parallel openers cannot all pass the check

        async def noting_the_session(message: dict) -> None:
            if message["type"] == "http.response.start" and message.get("status", 500) < 400:
                for name, value in message.get("headers") or []:
                    if name.lower() == SESSION_HEADER:
                        self._opened[key].add(value.decode("latin-1"))
            await send(message)

        try:
            first = await receive()  # the whole body: the body caps replay it in one message
            refused = None
            if JSONRPC_ID not in scope:  # else the body caps decoded it: a tools/call, no initialize
                refused = initialize_refusal(await _message_of(scope, first.get("body", b"")))
            if refused is not None:
                await send_jsonrpc_error(send, 400, refused[0], code=INVALID_PARAMS, request_id=refused[1])
                return
            await self.app(scope, replaying(first, receive), _naming_no_dropped_session(noting_the_session))
        finally:
            self._opening[key] -= 1
            if not self._opening[key]:
                del self._opening[key]


async def _message_of(scope: dict, body: bytes) -> Any:
    """The body as ``OneRequestIdAtATime`` kept it (in the server: an initialize, or None for any
    other), else decoded here."""
    if JSONRPC_MESSAGE in scope:
        return scope[JSONRPC_MESSAGE]
    return decoded(body) if len(body) <= PARSE_ON_LOOP_BYTES else await anyio.to_thread.run_sync(decoded, body)


def _naming_no_dropped_session(send: Callable) -> Callable:
    """``send`` that leaves out the session id of a refusal: the SDK makes a session for any
    request without one (a GET, a DELETE, an OPTIONS too) and drops it when its answer is 400 or
    more, yet names it (404 when used)."""
    async def sending(message: dict) -> None:
        if message["type"] == "http.response.start" and message.get("status", 500) >= 400:
            headers = message.get("headers") or []
            message = {**message, "headers": [(n, v) for n, v in headers if n.lower() != SESSION_HEADER]}
        await send(message)

    return sending


async def _refuse(send: Callable, per_caller: int) -> None:
    await send_jsonrpc_error(send, 429, f"Too many open MCP sessions for this caller (at most {per_caller}): end one "
                                        "with an HTTP DELETE of its mcp-session-id, or reuse one")
