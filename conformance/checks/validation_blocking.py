"""One hostile call must not stall the server for everyone else.

Rule: the input schema is checked before a call runs (spec/okf/contract/read.md §3.0), and checking it must stay
bounded: a small request whose validation is expensive in a naive validator (``uniqueItems`` over
a long array of mixed types is quadratic in some) must neither freeze the server for other
clients nor run unbounded. Over HTTP, while that call is in flight on one connection, a cheap
request on a second connection must be answered within ``BOUND_SECONDS``; over stdio (one
client per process) the hostile call itself must be answered within ``STDIO_BOUND_SECONDS``.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from typing import Any

from knowspec.conformance.checks.raw_wire import RawHttp
from knowspec.conformance.checks.registry import CheckContext, check
from knowspec.conformance.failures import TRANSPORT_FAILURE, CheckFailed
from knowspec.conformance.generate import base_arguments

RULE = ("spec/okf/contract/read.md §3.0 (schema validation before the handler) — bounded: a hostile input must not "
        "block other clients (HTTP) or run unbounded (stdio)")
ITEMS = 30_000  # pairwise uniqueItems (jsonschema, mixed types): 9.4 s at 12,000 on a 2-core host, so ~60 s at 30,000
BOUND_SECONDS = 2.0
STDIO_BOUND_SECONDS = 10.0
CHEAP_TIMEOUT = 10.0
MIN_BUDGET = 40.0


def unique_items_target(ctx: CheckContext) -> tuple[str, str] | None:
    """(tool, property) of the first advertised tool with a ``uniqueItems`` array input."""
    for tool in ctx.contract.tools:
        if not ctx.is_advertised(tool.name):
            continue
        for name, prop in tool.input_properties.items():
            if isinstance(prop, dict) and prop.get("uniqueItems") and prop.get("type") == "array":
                return tool.name, name
    return None


def _applies(ctx: CheckContext) -> str | None:
    if unique_items_target(ctx) is None:
        return "no advertised tool takes a uniqueItems array"
    if ctx.deadline is not None and ctx.deadline - time.monotonic() < MIN_BUDGET:
        return "time budget too short"
    return None


def hostile_arguments(ctx: CheckContext) -> tuple[str, dict[str, Any]]:
    tool_name, prop = unique_items_target(ctx)  # type: ignore[misc]
    args = base_arguments(ctx.contract.tool(tool_name), ctx.fill())
    args[prop] = [i if i % 2 == 0 else str(i) for i in range(ITEMS)]  # mixed types, all distinct
    return tool_name, args


def hostile_call(ctx: CheckContext, request_id: Any) -> bytes:
    tool_name, args = hostile_arguments(ctx)
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                       "params": {"name": tool_name, "arguments": args}}).encode()


def _send_hostile(raw: RawHttp, body: bytes, done: threading.Event) -> None:
    """The hostile call, in a thread of its own. Only the second client's ping is judged, so a
    connection the target breaks here is no verdict, and no traceback on the suite's stderr."""
    try:
        raw.post(body)
    except (OSError, http.client.HTTPException):
        return
    done.set()


def _over_http(ctx: CheckContext) -> None:
    token = ctx.conn.target.bearer_token
    hostile, cheap = RawHttp(ctx.conn.target.spec, 300, token), RawHttp(ctx.conn.target.spec, CHEAP_TIMEOUT, token)
    hostile.initialize()
    cheap.initialize()
    cheap.post(b'{"jsonrpc":"2.0","id":"warm","method":"ping"}')
    body = hostile_call(ctx, "hostile")
    done = threading.Event()
    worker = threading.Thread(target=_send_hostile, args=(hostile, body, done), daemon=True)
    worker.start()
    time.sleep(0.3)  # the hostile request is on the wire and being validated
    if done.is_set():
        return  # answered before a second client could even ask: nothing was blocked
    start = time.monotonic()
    try:
        status, replies = cheap.post(b'{"jsonrpc":"2.0","id":"cheap","method":"ping"}')
    except OSError:  # socket timeout: blocked far past the bound
        raise CheckFailed(f"a ping on a second connection got no answer within {CHEAP_TIMEOUT:.0f}s while one "
                          f"hostile {ITEMS}-item uniqueItems call was validated (bound {BOUND_SECONDS}s)") from None
    took = time.monotonic() - start
    if not any(r.get("id") == "cheap" for r in replies):
        raise CheckFailed(f"a ping on a second connection got no answer (HTTP {status})", response=replies[:2])
    if took > BOUND_SECONDS and not done.is_set():
        raise CheckFailed(f"a ping on a second connection took {took:.1f}s while one hostile "
                          f"{ITEMS}-item uniqueItems call was validated (bound {BOUND_SECONDS}s)")


def _over_stdio(ctx: CheckContext) -> None:
    """On the case's own session (one client per process: nobody else to block): a result or a
    JSON-RPC error within the bound passes. Silence past it fails, and the session is marked
    broken, so the worker drops the session the server may still be busy on."""
    tool_name, args = hostile_arguments(ctx)
    outcome = ctx.conn.call(tool_name, args, STDIO_BOUND_SECONDS)
    if outcome.timed_out:
        raise CheckFailed(f"one {ITEMS}-item mixed-type uniqueItems call was not answered within "
                          f"{STDIO_BOUND_SECONDS}s: its validation is unbounded")
    if outcome.transport_error is not None:
        raise CheckFailed(f"{TRANSPORT_FAILURE}: {outcome.transport_error}", response=outcome.summary())


@check("hostile_validation_nonblocking", RULE, scope="server", applies=_applies, since=1)
def hostile_validation_nonblocking(ctx: CheckContext) -> None:
    """An expensive-to-validate call neither blocks a second client nor runs unbounded."""
    ctx.calls += 2
    if ctx.conn.target.is_stdio:
        _over_stdio(ctx)
    else:
        _over_http(ctx)
