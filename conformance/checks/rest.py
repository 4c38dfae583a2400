"""The doc-pool REST IMPORTDOC path: SYSADMIN-only, params checked first, refusals as envelopes."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from knowspec.conformance.checks.common import schema_errors
from knowspec.conformance.checks.registry import CheckContext, check
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


@check("rest_importdoc", RULE, scope="server", applies=_needs_rest)
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
