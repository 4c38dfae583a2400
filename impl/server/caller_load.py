"""How much one caller may have in flight over HTTP, so that no caller can take the server from
the others.

A hostile probe found two ways one caller could: 95 parallel ``get_semantic_graph`` calls from
one reader took the worker threads that everyone's calls, session checks and logins share (others
waited 48 s), and hundreds of requests whose answers the caller never read held gigabytes. The
caps, each per caller and per server process:

- ``RequestsPerCaller`` (ASGI middleware): HTTP requests being received or answered, ``/mcp``
  and REST alike (``--requests-per-caller``, default 32). A request past the cap answers HTTP 429
  at once (a JSON-RPC error on ``/mcp``, ``rate_limited`` with ``Retry-After`` on REST). The
  long-lived ``GET /mcp`` event streams are left to the session quota (``session_quota.py``).
- ``CallsPerCaller``: MCP tool calls in flight (``--calls-per-caller``, default 20),
  counted from the call's arrival to its answer. A 2025-era call keeps running when its client
  drops the connection (the specification of that era says so), so the HTTP count alone would
  let a caller that hangs up at once queue calls without end. A call past the cap is answered
  with a JSON-RPC error (``mcp_server.BUSY``) and never runs. Calls within it take turns at the handlers
  with every other caller's (``call_turns``).
- ``AnswerBytesPerCaller``: bytes of answers being written to a caller that has not read them
  yet (128 MiB). The answers of calls in flight are bounded by the two caps above, but each can
  be tens of MiB (a graph on the 2026-07-28 wire, escaped, is 16.5 MB): 32 unread ones had held
  about 1 GB. An answer past the cap is not written; its request gets a JSON-RPC error saying so
  (``parked_answers.ParkedAnswerWriter``), and no call of the caller's runs until it reads
  (``BUSY``). One answer is always written, however big.

A caller is the signed-in user the bearer gate named, however many tokens they hold, or,
anonymous, the client's address (``session_quota.caller_key``); REST requests count against the
client's address.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Callable

from knowspec.impl.rest.error_responses import envelope
from knowspec.impl.server.call_turns import CallTurns
from knowspec.impl.server.json_answer import is_mcp_path, send_json, send_jsonrpc_error
from knowspec.impl.server.pipeline import AdmissionRefused
from knowspec.impl.server.session_quota import caller_key

REQUESTS_PER_CALLER = 32
ANSWER_BYTES_PER_CALLER = 128 * 1024 * 1024
CALLS_PER_CALLER = 20  # above the conformance suite's most (3 sessions x 6 concurrent calls)
RETRY_AFTER_SECONDS = 1


class InFlight:
    """Amounts in flight per key (calls, requests, bytes), at most ``cap`` each, though a key
    holding nothing may always take one amount, however big; used on the event loop only."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._held: Counter[str] = Counter()

    def take(self, key: str, amount: int = 1) -> bool:
        """Count ``amount`` more for ``key``, unless it holds something and would pass ``cap``."""
        if self._held[key] and self._held[key] + amount > self.cap:
            return False
        self._held[key] += amount
        return True

    def give(self, key: str, amount: int = 1) -> None:
        self._held[key] -= amount
        if self._held[key] <= 0:
            del self._held[key]

    def __getitem__(self, key: str) -> int:
        return self._held.get(key, 0)


class RequestsPerCaller:
    """ASGI middleware inside the bearer gate (which names the caller), outside the body caps
    (a body being received counts)."""

    def __init__(self, app: Any, per_caller: int = REQUESTS_PER_CALLER) -> None:
        self.app = app
        self.in_flight = InFlight(per_caller)

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope.get("type") != "http" or (scope.get("method") == "GET" and is_mcp_path(scope)):
            await self.app(scope, receive, send)
            return
        key = caller_key(scope)  # REST: the address (the gate names users on /mcp only)
        if not self.in_flight.take(key):
            await _refuse(scope, send, self.in_flight.cap)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight.give(key)


async def _refuse(scope: dict, send: Callable, cap: int) -> None:
    message = (f"too many requests in flight for this caller (at most {cap}): wait for an answer "
               "before sending more")
    retry = [(b"retry-after", str(RETRY_AFTER_SECONDS).encode("ascii"))]
    if is_mcp_path(scope):
        await send_jsonrpc_error(send, 429, message, retry)
        return
    body = json.dumps(envelope("rate_limited", message, retryable=True), separators=(",", ":")).encode("utf-8")
    await send_json(send, 429, body, retry)


class CallsPerCaller:
    """The tool calls each caller has in flight, and their turns at the handlers: ``admit(key)``
    counts a call (refused past the cap) and waits for its turn (``call_turns``: calls past the
    handlers' capacity wait, callers served in rotation); ``release(key)`` ends both, once the
    call's thread has returned (``pipeline``)."""

    def __init__(self, per_caller: int = CALLS_PER_CALLER, turns: CallTurns | None = None,
                 unsent: AnswerBytesPerCaller | None = None) -> None:
        self.in_flight = InFlight(per_caller)
        self.turns = turns or CallTurns()
        self.unsent = unsent or AnswerBytesPerCaller()

    async def admit(self, key: str) -> bool:
        if self.unsent[key] >= self.unsent.cap:  # nothing more is computed for a caller who reads nothing
            raise AdmissionRefused("too many answers this caller has not read yet: read them before calling again")
        if not self.in_flight.take(key):
            raise AdmissionRefused(f"too many tool calls in flight for this caller (at most {self.in_flight.cap}): "
                                   "wait for an answer before calling again")
        try:
            return await self.turns.take(key)
        except BaseException:
            self.in_flight.give(key)
            raise

    def release(self, key: str, ticket: bool) -> None:
        self.turns.give(key, ticket)
        self.in_flight.give(key)


class AnswerBytesPerCaller(InFlight):
    """Bytes of answers each caller's connections are being written."""

    def __init__(self, cap: int = ANSWER_BYTES_PER_CALLER) -> None:
        super().__init__(cap)
