"""The doc-pool REST IMPORTDOC path: SYSADMIN-only, params checked first, refusals as envelopes."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from knowspec.conformance.checks.common import schema_errors
from knowspec.conformance.checks.registry import CheckContext, check, holds_family
from knowspec.conformance.failures import CheckFailed

RULE = "spec/docpool/contract.md §3 (IMPORTDOC: SYSADMIN; 400 missing params; 202 result false)"
EXEC = "/AdminREST/EXECCOMMAND"
LOGIN = "/ClientREST/Login"


def post(base: str, path: str, body: Any, token: str | None = None, timeout: float = 30.0) -> tuple[int, Any]:
    """POST JSON; returns (status, parsed body or the raw text)."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(base.rstrip("/") + path, data=json.dumps(body).encode(), headers=headers,
                                     method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    except (urllib.error.URLError, OSError) as exc:
        raise CheckFailed(f"REST endpoint unreachable: {exc}") from None
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


def _needs_rest(ctx: CheckContext) -> str | None:
    return None if ctx.config.rest_url else "no --rest-url given"


def _expect_envelope(ctx: CheckContext, what: str, body: Any, status: int, statuses: tuple[int, ...],
                     request: Any) -> None:
    if status not in statuses:
        raise CheckFailed(f"{what}: HTTP {status}, expected {' or '.join(map(str, statuses))}",
                          arguments=request, response={"status": status, "body": body})
    problems = schema_errors(ctx.contract.error_schema, body)
    if problems:
        raise CheckFailed(f"{what}: the error body is not the envelope: {'; '.join(problems)}",
                          arguments=request, response={"status": status, "body": body})


@check("rest_importdoc", RULE, scope="server", applies=_needs_rest, planned=holds_family("docpool"))
def rest_importdoc(ctx: CheckContext) -> None:
    """Unauthenticated IMPORTDOC is refused; a missing param is 400; a bad collection is 202 result false."""
    base, timeout = ctx.config.rest_url or "", ctx.config.call_timeout
    root = str(ctx.bundles.root)
    command = {"command": "IMPORTDOC", "params": {"database": "conformance", "collection": "Bad Name!",
                                                  "path": f"{root}/no-such-pool.db"}}
    status, body = post(base, EXEC, command, timeout=timeout)
    _expect_envelope(ctx, "IMPORTDOC without a session", body, status, (401, 403), command)
    if not (ctx.config.admin_user and ctx.config.admin_password):
        return
    login = {"user": ctx.config.admin_user, "password": ctx.config.admin_password}
    status, body = post(base, LOGIN, login, timeout=timeout)
    if status != 200 or not isinstance(body, dict) or not body.get("token"):
        raise CheckFailed(f"admin login failed with HTTP {status}", arguments={"user": login["user"]},
                          response={"status": status, "body": body})
    token = body["token"]
    missing = {"command": "IMPORTDOC", "params": {"database": "conformance", "collection": "c"}}
    status, body = post(base, EXEC, missing, token, timeout)
    _expect_envelope(ctx, "IMPORTDOC without path", body, status, (400,), missing)
    status, body = post(base, EXEC, command, token, timeout)
    if status == 404:  # the database is not registered: refused before the collection name is read
        _expect_envelope(ctx, "IMPORTDOC into an unregistered database", body, status, (404,), command)
    elif status != 202 or not isinstance(body, dict):
        raise CheckFailed(f"IMPORTDOC with an invalid collection name: HTTP {status}, expected 202 result false",
                          arguments=command, response={"status": status, "body": body})
    if status == 202 and (body.get("result") is not False or not body.get("message")):
        raise CheckFailed("IMPORTDOC refusal must be {result: false, message}", arguments=command,
                          response={"status": status, "body": body})
    if root in json.dumps(body, ensure_ascii=False):
        raise CheckFailed("IMPORTDOC refusal leaks the absolute path", arguments=command,
                          response={"status": status, "body": body})


# ---- sessions, statuses and the body cap ------------------------------------------------------

RULE_SESSIONS = ("spec/rest/endpoints.toml (auth = session: no live session is 401 unauthenticated; errors are the "
                 "envelope with their code's status); spec/okf/NOTES.md (REST bodies over 1 MiB: 413 resource_limit)")
LOGOUT, DOC_GET, HELP_SEARCH = "/ClientREST/Logout", "/ClientREST/DocGet", "/ClientREST/HelpSearch"
REST_BODY_CAP = 1024 * 1024
# The HTTP status of each envelope code these checks provoke (contract error table, REST family).
STATUS_OF = {"unauthenticated": 401, "not_found": 404, "resource_limit": 413}


def _expect_code(ctx: CheckContext, what: str, body: Any, status: int, code: str, request: Any) -> None:
    """An error answer: the envelope, with ``code`` and that code's HTTP status."""
    _expect_envelope(ctx, what, body, status, (STATUS_OF[code],), request)
    if body.get("code") != code:
        raise CheckFailed(f"{what}: envelope code {body.get('code')!r}, expected {code!r}", arguments=request,
                          response={"status": status, "body": body})


def post_oversized(base: str, path: str, size: int, timeout: float) -> tuple[int, Any]:
    """POST a JSON body of ``size`` bytes; the server may refuse it before reading it (the answer
    is read even when the server closed the connection mid-body)."""
    import http.client
    import urllib.parse

    url = urllib.parse.urlsplit(base.rstrip("/") + path)
    kind = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
    conn = kind(url.hostname or "127.0.0.1", url.port, timeout=timeout)
    head = b'{"user": "conform", "password": "'
    filler = size - len(head) - 2
    try:
        conn.putrequest("POST", url.path)
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(size))
        conn.endheaders()
        try:
            conn.send(head)
            chunk = b"x" * 65536
            while filler > 0:
                conn.send(chunk[:filler])
                filler -= len(chunk)
            conn.send(b'"}')
        except OSError:
            pass  # refused mid-body: the answer is already on the wire
        response = conn.getresponse()
        status, raw = response.status, response.read()
    except (OSError, http.client.HTTPException) as exc:
        raise CheckFailed(f"REST endpoint unreachable: {exc}") from None
    finally:
        conn.close()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


@check("rest_sessions", RULE_SESSIONS, scope="server", applies=_needs_rest)
def rest_sessions(ctx: CheckContext) -> None:
    """Help*/Doc* without a session, or with a logged-out one, are 401; a wrong password gets no
    session; a missing topic is 404 not_found; a REST body over 1 MiB is 413 resource_limit."""
    import secrets

    base, timeout = ctx.config.rest_url or "", ctx.config.call_timeout
    probes = ((DOC_GET, {"collection": "conform", "slug": "conform-absent"}), (HELP_SEARCH, {"query": "conform"}))
    for path, request in probes:
        status, body = post(base, path, request, timeout=timeout)
        _expect_code(ctx, f"{path} without a session", body, status, "unauthenticated", request)
    size = REST_BODY_CAP + 64 * 1024
    status, body = post_oversized(base, LOGIN, size, timeout)
    _expect_code(ctx, f"a {size}-byte body to {LOGIN}", body, status, "resource_limit", {"bytes": size})
    user, password = ctx.config.admin_user, ctx.config.admin_password
    if not (user and password):
        return
    wrong = {"user": user, "password": password + "-not-" + secrets.token_hex(4)}
    status, body = post(base, LOGIN, wrong, timeout=timeout)
    _expect_code(ctx, "login with a wrong password", body, status, "unauthenticated", {"user": user})
    status, body = post(base, LOGIN, {"user": user, "password": password}, timeout=timeout)
    if status != 200 or not isinstance(body, dict) or not body.get("token"):
        raise CheckFailed(f"admin login failed with HTTP {status}", arguments={"user": user},
                          response={"status": status, "body": body})
    token = body["token"]
    status, listing = post(base, "/ClientREST/DocCollections", {}, token, timeout)
    collections = listing.get("results") if status == 200 and isinstance(listing, dict) else None
    collection = next((c.get("id") for c in collections or () if isinstance(c, dict) and c.get("id")), None)
    if collection:
        request = {"collection": collection, "slug": f"conform-absent-{secrets.token_hex(4)}"}
        status, body = post(base, DOC_GET, request, token, timeout)
        _expect_code(ctx, f"{DOC_GET} of a missing topic", body, status, "not_found", request)
    status, body = post(base, LOGOUT, {}, token, timeout)
    if status != 200:
        raise CheckFailed(f"logout: HTTP {status}, expected 200", response={"status": status, "body": body})
    request = {"query": "conform"}
    status, body = post(base, HELP_SEARCH, request, token, timeout)
    _expect_code(ctx, f"{HELP_SEARCH} with a logged-out session", body, status, "unauthenticated", request)
