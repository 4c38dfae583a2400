"""Who may call what over HTTP: the bearer gate on ``/mcp`` and the OKF access rules.

The model (README "Security model"):
- stdio is the local user, who already owns the files: every tool, every path.
- Over HTTP every MCP request carries ``Authorization: Bearer <token>`` from
  ``POST /ClientREST/Login`` (the REST users and sessions); without one, or with a token that is
  not a live session, ``/mcp`` answers 401 with ``WWW-Authenticate: Bearer``. An operator may
  opt in to anonymous callers (``serve --allow-anonymous``): they may read, never write.
- Doc and help tools apply the caller's ACL (``{user, roles..., *}``) as REST does.
- OKF tools read and write only under the folders the operator lists (``--bundle-root``); any
  other ``bundle_path`` answers one fixed ``invalid_request`` that says nothing about whether
  the path exists. With no root listed, OKF tools refuse over HTTP.
- The write and apply tools (every OKF tool not marked read-only) need the WRITER or SYSADMIN
  role (``impl/docpool/auth.py``).
"""

from __future__ import annotations

import argparse
import copy
import json
import posixpath
from pathlib import Path
from typing import Any, Callable

import anyio

from knowspec.impl.cli_args import session_quota, whole_number
from knowspec.impl.context import Caller
from knowspec.impl.docpool.auth import may_write
from knowspec.impl.errors import ToolError
from knowspec.impl.server.host_names import add_host_options
from knowspec.impl.server.json_answer import is_mcp_path, send_json, send_jsonrpc_error

MCP_PATH = "/mcp"
OUTSIDE_ROOTS = "bundle_path is not inside a bundle root this server serves"
NO_ROOTS = "this server serves no OKF bundles over HTTP: its operator listed no --bundle-root"
SESSION_STATE = "knowspec_session"  # the request state key under which the gate leaves the session
LOGIN_HINT = "log in at POST /ClientREST/Login and send Authorization: Bearer <token>"


def inside_roots(bundle_path: str, roots: tuple[Path, ...]) -> bool:
    """Whether the absolute ``bundle_path`` is a root or lies under one (decided on the text of
    the cleaned path, never by looking at the disk; the bundle loader refuses symlinks)."""
    clean = posixpath.normpath(bundle_path)
    for root in roots:
        base = posixpath.normpath(str(root))
        if clean == base or clean.startswith(base.rstrip("/") + "/"):
            return True
    return False


def okf_refusal(entry: Any, bundle_path: Any, caller: Caller, roots: tuple[Path, ...]) -> ToolError | None:
    """Why ``caller`` may not make this OKF call, or ``None``. Other families pass through."""
    if caller.unrestricted or getattr(entry, "family", "") != "okf":
        return None
    if not entry.read_only and not may_write(caller.roles):
        who = f"user {caller.user}" if caller.user else "an anonymous caller"
        return ToolError("forbidden", f"{entry.name} changes a bundle and {who} may only read: "
                                      "it needs the WRITER or SYSADMIN role")
    # A relative or padded path is left to the tool's own bundle_path rules: their answers
    # depend on the text alone, never on what exists.
    if isinstance(bundle_path, str) and posixpath.isabs(bundle_path) and bundle_path == bundle_path.strip() \
            and not inside_roots(bundle_path, roots):
        return ToolError("invalid_request", OUTSIDE_ROOTS if roots else NO_ROOTS)
    return None




def guarded_runtime(runtime: Any, roots: tuple[Path, ...]) -> Any:
    """A copy of ``runtime`` whose OKF handlers check the caller first.

    The check runs where a handler runs: after schema validation (bad input still answers
    ``schema_validation`` / ``resource_limit`` as the contract says) and before any file is
    touched. The caller's roles are the user's as granted now (the session store reads them with
    the session at every request), so a revoked WRITER stops writing at once, not when the session
    ends. The original runtime (stdio, REST) is left as it is.
    """
    guarded = copy.copy(runtime)
    guarded.handlers = {
        name: (_guard(runtime.entries[name], handler, roots)
               if handler is not None and runtime.entries[name].family == "okf" else handler)
        for name, handler in runtime.handlers.items()
    }
    return guarded


def _guard(entry: Any, handler: Callable, roots: tuple[Path, ...]) -> Callable:
    def checked(args: Any, ctx: Any) -> Any:
        refusal = okf_refusal(entry, getattr(args, "bundle_path", None), ctx.caller, roots)
        if refusal is not None:
            raise refusal
        return handler(args, ctx)

    checked.__name__ = getattr(handler, "__name__", entry.name)
    return checked


def bearer_of(headers: list[tuple[bytes, bytes]]) -> tuple[bool, str | None]:
    """``(an Authorization header was sent, its bearer token or None)``."""
    for key, value in headers:
        if key.lower() == b"authorization":
            text = value.decode("latin-1")
            if text[:7].lower() == "bearer ":
                return True, text[7:].strip() or None
            return True, None
    return False, None


def authorizations(headers: list[tuple[bytes, bytes]]) -> int:
    """How many ``Authorization`` headers the request carries."""
    return sum(1 for key, _ in headers if key.lower() == b"authorization")


TWO_IDENTITIES = "a request may carry one Authorization header"


async def _refuse_two_identities(scope: dict, send: Callable) -> None:
    """400 for a request with two or more ``Authorization`` headers, on every route: the server
    read the first, and a proxy or a log that reads the last would name another caller."""
    if is_mcp_path(scope):
        await send_jsonrpc_error(send, 400, f"Invalid Request: {TWO_IDENTITIES}")
        return
    from knowspec.impl.server.tool_results import envelope_of

    await send_json(send, 400, json.dumps(envelope_of(ToolError("invalid_request", TWO_IDENTITIES))).encode("utf-8"))


def _principal(user: str) -> Any:
    """The caller as the SDK's session manager reads it (``scope["user"]``, as Starlette's
    authentication middleware leaves it): an MCP session then answers only the user who opened it,
    anyone else (another user, or the anonymous caller) getting the SDK's 404 "Session not found"."""
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken

    return AuthenticatedUser(AccessToken(token="", client_id=user, scopes=[], subject=user))


class BearerGate:
    """ASGI middleware: ``/mcp`` requests need a live session unless anonymous callers are allowed.

    ``session_for(token)`` answers the session or ``None``; it reads the catalog, so it runs in a
    worker thread, and the session it found rides in the request's state (``SESSION_STATE``) for
    the tool call to name its caller (and as ``scope["user"]`` for the SDK, which binds each MCP
    session to the user who opened it). A refused request gets 401 with ``WWW-Authenticate: Bearer``
    and the REST error envelope; other paths pass untouched. A request on any path with two
    ``Authorization`` headers is refused (400): the first would have named the caller.
    """

    def __init__(self, app: Any, session_for: Callable[[str | None], Any], allow_anonymous: bool) -> None:
        self.app = app
        self.session_for = session_for
        self.allow_anonymous = allow_anonymous

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        path = scope.get("path", "")
        if scope.get("type") == "http" and authorizations(scope.get("headers") or []) > 1:
            await _refuse_two_identities(scope, send)
            return
        if scope.get("type") != "http" or path.rstrip("/") != MCP_PATH:
            await self.app(scope, receive, send)
            return
        sent, token = bearer_of(scope.get("headers") or [])
        session = await anyio.to_thread.run_sync(self.session_for, token) if token else None
        if session is not None:
            scope.setdefault("state", {})[SESSION_STATE] = session
            scope["user"] = _principal(session.user)
        if (not sent and self.allow_anonymous) or session is not None:
            await self.app(scope, receive, send)
            return
        if sent:
            message, challenge = f"the bearer token is not a live session: {LOGIN_HINT}", \
                'Bearer realm="knowspec", error="invalid_token"'
        else:
            message, challenge = f"a session is required: {LOGIN_HINT}", 'Bearer realm="knowspec"'
        from knowspec.impl.server.tool_results import envelope_of

        body = json.dumps(envelope_of(ToolError("unauthenticated", message))).encode("utf-8")
        await send_json(send, 401, body, [(b"www-authenticate", challenge.encode())])


# --- serve options ----------------------------------------------------------------------------


def add_serve_access_options(serve: argparse.ArgumentParser) -> None:
    """The HTTP security settings of ``knowspec serve`` (stdio ignores them)."""
    serve.add_argument("--bundle-root", action="append", type=Path, default=[], metavar="DIR",
                       help="over HTTP, serve OKF bundles only under DIR (repeatable; none: OKF tools refuse)")
    serve.add_argument("--allow-anonymous", action="store_true",
                       help="over HTTP, let MCP callers without a session read (never write)")
    add_host_options(serve)
    serve.add_argument("--import-dir", type=Path, metavar="DIR",
                       help="IMPORTDOC reads source pools only from DIR (default: APPDIR/imports)")
    serve.add_argument("--session-ttl", type=float, metavar="SECONDS",
                       help="a session's absolute life after login (default 43200 = 12 h)")
    serve.add_argument("--session-idle", type=float, metavar="SECONDS",
                       help="a session ends after this long unused (default 1800 = 30 min)")
    serve.add_argument("--mcp-sessions-per-caller", type=session_quota, metavar="N",
                       help="open MCP sessions one user, or one anonymous client address, may hold (default 100)")
    serve.add_argument("--rest-sessions-per-user",
                       type=whole_number("--rest-sessions-per-user", "sessions", 1, 100_000),
                       metavar="N", help="live logins (REST sessions) one user may hold; a login past it ends the "
                                         "user's least recently used session (default 100)")
    serve.add_argument("--requests-per-caller", type=whole_number("--requests-per-caller", "requests", 1, 100_000),
                       metavar="N", help="HTTP requests one caller may have in flight; more answer 429 (default 32)")
    serve.add_argument("--calls-per-caller", type=whole_number("--calls-per-caller", "calls", 1, 100_000),
                       metavar="N", help="MCP tool calls one caller may have running; more are refused (default 20)")
    serve.add_argument("--concurrent-calls", type=whole_number("--concurrent-calls", "calls", 1, 10_000),
                       metavar="N", help="tool handlers run at once over HTTP; more wait their caller's turn "
                                         "(default: twice the cores, at least 4)")
    serve.add_argument("--request-body-mib-in-flight", type=whole_number("--request-body-mib-in-flight", "MiB", 1,
                                                                         1_048_576),
                       metavar="MIB", help="MiB of big request bodies (over 1 MiB) held at once across all callers; one "
                                           "past it answers 503 (default 128)")
    serve.add_argument("--max-connections", type=whole_number("--max-connections", "connections", 1, 1_000_000),
                       metavar="N", help="open connections one server process keeps; more are closed at once "
                                         "(default 4096, fewer when the open-file limit is low)")
    serve.add_argument("--connections-per-address", type=whole_number("--connections-per-address", "connections", 1,
                                                                      1_000_000),
                       metavar="N", help="open connections from one client address (a trusted proxy: no such cap; "
                                         "default 512)")
    serve.add_argument("--forwarded-allow-ips", metavar="IPS",
                       help="peers trusted to name the client in X-Forwarded-For, e.g. a reverse proxy's "
                            "address (comma-separated, or *; default: none)")


def apply_serve_access_options(args: argparse.Namespace, settings: Any) -> None:
    roots = getattr(args, "bundle_root", None) or []
    settings.bundle_roots = tuple(Path(posixpath.normpath(str(r.absolute()))) for r in roots)
    settings.allow_anonymous = bool(getattr(args, "allow_anonymous", False))
    settings.allowed_hosts = tuple(getattr(args, "allowed_host", None) or ())
    settings.allowed_origins = tuple(getattr(args, "allowed_origin", None) or ())
    if getattr(args, "import_dir", None):
        settings.import_dir = args.import_dir.absolute()
    if getattr(args, "session_ttl", None):
        settings.session_ttl_seconds = args.session_ttl
    if getattr(args, "session_idle", None):
        settings.session_idle_seconds = args.session_idle
    if getattr(args, "mcp_sessions_per_caller", None):
        settings.mcp_sessions_per_caller = args.mcp_sessions_per_caller
    if getattr(args, "rest_sessions_per_user", None):
        settings.rest_sessions_per_user = args.rest_sessions_per_user
    for name in ("requests_per_caller", "calls_per_caller", "concurrent_calls", "request_body_mib_in_flight",
                 "forwarded_allow_ips", "max_connections", "connections_per_address"):
        if getattr(args, name, None):
            setattr(settings, name, getattr(args, name))
