"""Login, logout and the session gate every other endpoint passes through.

A request carries its session as ``Authorization: Bearer <token>``. ``require_session`` answers
the session or raises the 401/403 ``ToolError`` that the route turns into the envelope; a
SYSADMIN-only endpoint asks for ``sysadmin=True``.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from knowspec.impl.docpool import auth
from knowspec.impl.errors import ToolError
from knowspec.impl.rest import catalog_bridge
from knowspec.impl.rest.error_responses import error_response
from knowspec.impl.rest.login_throttle import TurnNotTaken
from knowspec.impl.rest.sessions import Session, SessionStore
from knowspec.impl.rest.validation import parse_json_body, validate_body

_BEARER = "bearer "


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    if header[: len(_BEARER)].lower() == _BEARER:
        return header[len(_BEARER):].strip() or None
    return None


async def require_session(request: Request, sessions: SessionStore, *, sysadmin: bool = False) -> Session:
    """The request's live session (read from the catalog in a worker thread, off the event loop)."""
    session = await run_in_threadpool(sessions.get, bearer_token(request))
    if session is None:
        raise ToolError(
            "unauthenticated", "a valid session is required: log in at POST /ClientREST/Login"
        )
    if sysadmin and not session.is_sysadmin:
        raise ToolError("forbidden", f"user {session.user} lacks the SYSADMIN role")
    return session


def client_address(request: Request) -> str:
    """The caller's address as the server sees it (uvicorn puts a trusted proxy's
    ``X-Forwarded-For`` client here): what failed logins are counted against."""
    return request.client.host if request.client is not None else "unknown"


async def login(request: Request, settings, sessions: SessionStore, schema: dict) -> JSONResponse:
    body = await run_in_threadpool(parse_json_body, await request.body(), request.headers.get("content-type"))
    validate_body(schema, body)
    address = client_address(request)
    try:
        async with sessions.logins.turns.turn(body["user"], address):  # judged after the logins before it
            return await _log_in(body, address, settings, sessions)
    except TurnNotTaken:
        return error_response("rate_limited", "too many logins at once as this user from this address; "
                              "try again in 1 s", headers={"Retry-After": "1"})


async def _log_in(body: dict, address: str, settings, sessions: SessionStore) -> JSONResponse:
    wait = await run_in_threadpool(sessions.logins.admit, body["user"], address)
    if wait:  # refused before the password is hashed: a blocked guesser costs no scrypt
        return error_response("rate_limited", f"too many failed logins from this address; try again in {wait} s",
                              headers={"Retry-After": str(wait)})
    user = await run_in_threadpool(
        auth.authenticate, settings.catalog, body["user"], body["password"]
    )
    if user is None:
        raise ToolError("unauthenticated", "invalid user or password")
    await run_in_threadpool(sessions.logins.succeeded, body["user"], address)
    database = body.get("database") or settings.default_database
    if database is not None:
        await run_in_threadpool(catalog_bridge.require_registered, settings, database)
    session = await run_in_threadpool(sessions.open, user.name, user.roles, database, user.credential)
    if session is None:  # the password was changed, or the user removed, while this login checked it
        raise ToolError("unauthenticated", "invalid user or password")
    return JSONResponse(
        {
            "token": session.token,
            "user": session.user,
            "roles": list(session.roles),
            "database": session.database,
            "expiresIn": int(sessions.ttl_seconds),
        }
    )


async def logout(request: Request, sessions: SessionStore) -> JSONResponse:
    session = await require_session(request, sessions)
    await run_in_threadpool(sessions.close, session.token)
    return JSONResponse({"result": True})
