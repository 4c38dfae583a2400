"""Every REST failure as the error envelope ``{code, message, retryable, diagnostics}``.

Tool failures (``ToolError``) and framework failures (unknown path, wrong method, malformed body)
all leave through ``error_response`` so that a client never has to parse two error shapes. The
HTTP status of a tool code is decided here and nowhere else.
"""

from __future__ import annotations

from typing import Any, Iterable

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse

from knowspec.impl.docpool.catalog_store import CatalogUnavailable
from knowspec.impl.server.tool_results import envelope_of
from knowspec.impl.errors import Diagnostic, ToolError

# HTTP status for each envelope code (spec/errors.toml plus the REST-only codes below).
STATUS_BY_CODE: dict[str, int] = {
    "schema_validation": 400,
    "resource_limit": 400,
    "invalid_request": 400,
    "unauthenticated": 401,
    "forbidden": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "pool_unavailable": 404,
    "unsupported_media_type": 415,
    "storage_error": 500,
    "internal_error": 500,
    "not_implemented": 501,
    "embedding_unavailable": 409,  # the server's state (no model pack) conflicts with the mode
    "rate_limited": 429,
    "operation_cancelled": 503,
}

CATALOG_RETRY_SECONDS = 5  # Retry-After of a 503 for a catalog that cannot be reached

_FRAMEWORK_CODES = {
    400: "invalid_request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "resource_limit",
    415: "unsupported_media_type",
}


def envelope(
    code: str, message: str, *, retryable: bool | None = None, diagnostics: Iterable[Diagnostic] = ()
) -> dict[str, Any]:
    """The MCP envelope rules apply to REST too: redaction, 512-byte messages, safe codes."""
    return envelope_of(ToolError(code, message or code, retryable=retryable, diagnostics=diagnostics))


def error_response(
    code: str,
    message: str,
    *,
    status: int | None = None,
    retryable: bool | None = None,  # None: the code's value in spec/errors.toml
    diagnostics: Iterable[Diagnostic] = (),
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    status = status or STATUS_BY_CODE.get(code, 400)
    if status == 401:  # RFC 6750: say how to authenticate (log in for a bearer token)
        headers = {"WWW-Authenticate": 'Bearer realm="knowspec"', **(headers or {})}
    return JSONResponse(
        envelope(code, message, retryable=retryable, diagnostics=diagnostics),
        status_code=status,
        headers=headers,
    )


def tool_error_response(exc: ToolError) -> JSONResponse:
    return error_response(
        exc.code, exc.message, retryable=exc.retryable, diagnostics=exc.diagnostics
    )


async def http_exception_handler(request: Request, exc: Exception) -> JSONResponse:
    """Starlette's own 404/405/... as the envelope, keeping its headers (``Allow`` on 405)."""
    assert isinstance(exc, HTTPException)
    code = _FRAMEWORK_CODES.get(exc.status_code, "invalid_request")
    message = exc.detail if isinstance(exc.detail, str) and exc.detail else code
    if exc.status_code == 404:
        message = "no such endpoint"
    elif exc.status_code == 405:
        message = "method not allowed on this endpoint"
    return error_response(code, message, status=exc.status_code, headers=dict(exc.headers or {}))


async def unexpected_exception_handler(request: Request, exc: Exception) -> JSONResponse:
    """A bug must still answer with the envelope (500), never a bare traceback page, and without
    naming what failed inside (the server's log has the traceback); a catalog database that
    cannot be reached (PostgreSQL down) is 503, worth a retry."""
    if isinstance(exc, CatalogUnavailable):  # the driver's words (hosts, sockets) stay in the server's log
        return error_response("storage_error", "the catalog database is unavailable", status=503, retryable=True,
                              headers={"Retry-After": str(CATALOG_RETRY_SECONDS)})
    return error_response("internal_error", "internal error", status=500)


EXCEPTION_HANDLERS = {
    HTTPException: http_exception_handler,
    Exception: unexpected_exception_handler,
}
