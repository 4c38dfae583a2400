"""One Starlette app: streamable HTTP MCP at ``/mcp`` and the REST surface beside it."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

import mcp.types as types
from mcp.shared.exceptions import MCPError

from knowspec.impl.context import Caller
from knowspec.impl.rest.error_responses import EXCEPTION_HANDLERS
from knowspec.impl.rest.routes import rest_routes
from knowspec.impl.rest.sessions import SessionStore
from knowspec.impl.server.body_limits import BodyLimitMiddleware
from knowspec.impl.server.call_turns import CallTurns
from knowspec.impl.server.caller_load import AnswerBytesPerCaller, CallsPerCaller, RequestsPerCaller
from knowspec.impl.server.event_replay import NoEventReplay
from knowspec.impl.server.host_check import HostCheckMiddleware, host_rule, transport_security
from knowspec.impl.server.access import LOGIN_HINT, SESSION_STATE, BearerGate, guarded_runtime
from knowspec.impl.server import late_answers, released_messages
from knowspec.impl.server.parked_answers import ParkedAnswers, ParkedAnswerWriter, ascii_for_http
from knowspec.impl.server.mcp_server import build_server
from knowspec.impl.server.pipeline import ToolRuntime
from knowspec.impl.server.request_ids import IdsInFlight, OneRequestIdAtATime
from knowspec.impl.server.session_quota import SessionQuota, caller_key, sdk_sessions
from knowspec.impl.server.workers import RelayedClient, SessionRouter, Worker


MAX_REQUEST_BYTES = 72 * 1024 * 1024
ANONYMOUS = Caller(user="", roles=(), database=None, unrestricted=False)


def build_app(runtime: ToolRuntime, *, host: str = "127.0.0.1", dns_rebinding_protection: bool = True,
              worker: Worker | None = None) -> Starlette:
    """The SDK builds the app (and runs its session manager in the lifespan); REST rides along.

    REST shares the runtime, so a Help*/Doc* request goes through the same call pipeline as an
    MCP ``tools/call``; every HTTP error body, framework ones included, is the error envelope.

    Only a stdio caller is unrestricted (the seed). An HTTP MCP caller is the REST session named
    by ``Authorization: Bearer <token>`` (log in at ``/ClientREST/Login``); without one ``/mcp``
    answers 401, unless the operator allowed anonymous callers, whose principals are ``{*}``
    and who may only read. OKF tools keep to the operator's bundle roots (``access.py``).

    One worker of several (``serve --workers N``, ``workers.py``) passes its ``worker``: its MCP
    session ids carry the worker's tag (added and removed on the wire, outside the SDK), and a
    request for another worker's session is relayed to its owner (inside the gate and the body caps, outside the parked-answer writer: the owner has
    written its answers).
    """
    settings = runtime.settings
    sessions = SessionStore.from_settings(settings)
    released_messages.install()  # an idle session keeps no request it has answered
    late_answers.install()  # a message for a session that just ended is one log line

    def caller_for(ctx) -> Caller:
        request = getattr(ctx, "request", None)
        session = getattr(request.state, SESSION_STATE, None) if request is not None else None
        if session is not None:
            return session.caller()
        if settings.allow_anonymous:
            return ANONYMOUS
        # A request with a token the gate let in always carries its session; refuse, never downgrade.
        raise MCPError(code=types.INVALID_REQUEST, message=f"the session has ended: {LOGIN_HINT}")

    # tool answers are encoded off the event loop (parked_answers.py)
    answers = ParkedAnswers(ascii_for_http, written=runtime.heap.after_answer)
    # no caller takes every worker thread; calls take turns at the handlers, callers in rotation;
    # a caller whose answers wait unread gets no more computed
    unsent = AnswerBytesPerCaller()
    calls = CallsPerCaller(settings.calls_per_caller, CallTurns(settings.concurrent_calls), unsent)
    ids_in_flight = IdsInFlight()  # a call holds its request's id as long as the request that brought it
    server = build_server(guarded_runtime(runtime, settings.bundle_roots), caller_for=caller_for,
                          answers=answers, admission=calls, admit_as=caller_key, ids_in_flight=ids_in_flight)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "tools": len(runtime.order),
                             "implemented": sum(runtime.implemented().values())})

    routes: list[BaseRoute] = [
        Route("/healthz", health, methods=["GET"]),
        *rest_routes(settings, sessions=sessions, runtime=runtime, admission=calls),
    ]
    # every route (our middleware) and /mcp (the SDK's own check) alike
    rule = host_rule(host, settings.allowed_hosts, settings.allowed_origins, dns_rebinding_protection)
    security = transport_security(rule)
    app = server.streamable_http_app(
        # mcp annotates Route only; Starlette mounts any BaseRoute (the REST table has Mounts too).
        streamable_http_path="/mcp", transport_security=security, host=host,
        custom_starlette_routes=routes,  # type: ignore[arg-type]
        # Above the 64 MiB argument cap, so an over-long argument reaches the pipeline and answers
        # resource_limit instead of an HTTP 413 the client would see as a JSON-RPC error.
        max_request_body_size=MAX_REQUEST_BYTES,
    )
    # A path with a trailing slash is not redirected to one without: the redirect's Location was
    # built from the request's Host header, which a caller writes (behind a wildcard bind: any).
    app.router.redirect_slashes = False
    for exc_class, handler in EXCEPTION_HANDLERS.items():
        app.add_exception_handler(exc_class, handler)
    app.add_middleware(late_answers.OneAnswer)  # innermost: the SDK's second answer to one request goes nowhere
    app.add_middleware(NoEventReplay)  # nothing is stored to replay: a resuming GET gets a fresh stream
    app.add_middleware(ParkedAnswerWriter, answers=answers, unsent=unsent)  # placeholders written as their parked answers
    # inside the gate (it names the caller), before a worker's tags are added to the SDK's ids
    app.add_middleware(SessionQuota, per_caller=settings.mcp_sessions_per_caller, live_sessions=sdk_sessions(server))
    app.add_middleware(OneRequestIdAtATime, in_flight=ids_in_flight)  # in the worker that owns the session
    if worker is not None:  # another worker's session is relayed whole: its owner wrote its answers
        app.add_middleware(SessionRouter, tag=worker.tag, run_dir=worker.run_dir)
    # every body capped and timed before it is read, and all of them held at once within a budget
    app.add_middleware(BodyLimitMiddleware, bytes_in_flight=settings.request_body_mib_in_flight * 1024 * 1024)
    app.add_middleware(RequestsPerCaller, per_caller=settings.requests_per_caller)  # the gate has named the caller
    app.add_middleware(BearerGate, session_for=sessions.get, allow_anonymous=settings.allow_anonymous)
    app.add_middleware(HostCheckMiddleware, rule=rule)  # a foreign Host is never served
    if settings.forwarded_allow_ips:  # the client a trusted proxy names is the caller throughout
        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=settings.forwarded_allow_ips)
    if worker is not None:  # outermost: a request another worker relayed is its client's
        app.add_middleware(RelayedClient)
    return app
