"""At most so many open MCP sessions per caller, so that no caller can fill the SDK's one table of
sessions (10,000 a process) and lock everyone else out of ``/mcp`` (its 503) until they expire.

A caller is the signed-in user the bearer gate named (``scope["user"]``), however many tokens
they hold, or, anonymous, the client's address. A request that would open a session (a POST to
``/mcp`` without ``mcp-session-id``) beyond the caller's quota is answered 429 with a JSON-RPC
error and opens nothing; one the SDK refuses (400, 406, ...) is answered without the session id
the SDK put on it, since that session is gone. The session ids the SDK answers with are counted
for their caller while the SDK still holds them: a DELETE, its idle timeout or a crash ends them
there, and here.
Requests being answered count too, so parallel opening requests cannot overshoot the quota.

Each server process (each worker of ``--workers N``) keeps its own count, as it keeps its own
sessions.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Container

from knowspec.impl.server.access import MCP_PATH
from knowspec.impl.server.json_answer import SESSION_HEADER, send_jsonrpc_error, session_id_of


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
    if scope.get("type") != "http" or scope.get("method") != "POST":
        return False
    if scope.get("path", "").rstrip("/") != MCP_PATH:
        return False
    return session_id_of(scope) is None


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
            await self.app(scope, receive, send)
            return
        key = caller_key(scope)
        if self.open_sessions(key) >= self.per_caller:
            await _refuse(send, self.per_caller)
            return
        self._opening[key] += 1

        async def noting_the_session(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = message.get("headers") or []
                if message.get("status", 500) < 400:
                    for name, value in headers:
                        if name.lower() == SESSION_HEADER:
                            self._opened[key].add(value.decode("latin-1"))
                else:  # the SDK names a session it has already dropped (404 when used): name none
                    message = {**message, "headers": [(n, v) for n, v in headers if n.lower() != SESSION_HEADER]}
            await send(message)

        try:
            await self.app(scope, receive, noting_the_session)
        finally:
            self._opening[key] -= 1
            if not self._opening[key]:
                del self._opening[key]


async def _refuse(send: Callable, per_caller: int) -> None:
    await send_jsonrpc_error(send, 429, f"Too many open MCP sessions for this caller (at most {per_caller}): end one "
                                        "with an HTTP DELETE of its mcp-session-id, or reuse one")
