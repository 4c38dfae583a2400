"""``POST /AdminREST/EXECCOMMAND``: SYSADMIN commands.

``IMPORTDOC`` imports one collection into a database's document pool (200 on success, 202 with
``result: false`` when nothing was changed) from a pool file in the operator's import folder; ``SQL`` and ``ALTERDATABASE`` run the one admin
statement the server knows, ``ALTER DATABASE <db> SET DOCUMENTS INTERNAL | DATABASE <db> | OFF``,
through the catalog's executor.
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from knowspec.impl.docpool import auth, importdoc
from knowspec.impl.errors import ToolError
from knowspec.impl.rest import catalog_bridge
from knowspec.impl.rest.endpoint_table import Endpoint
from knowspec.impl.rest.session_endpoints import require_session
from knowspec.impl.rest.sessions import SessionStore
from knowspec.impl.rest.validation import parse_json_body, validate_body
from knowspec.impl.rules.redaction import redact_message


def documents_setting(params: dict[str, Any]) -> tuple[str, str, str | None]:
    """``(database, documents, related)`` of ALTERDATABASE params; related only with DATABASE."""
    documents, related = params["documents"], params.get("related")
    if documents == "DATABASE" and not related:
        raise ToolError("invalid_request", "documents = DATABASE needs related")
    if documents != "DATABASE" and related:
        raise ToolError("invalid_request", "related is only allowed with documents = DATABASE")
    return params["database"], documents, related


def _still_sysadmin(settings, sessions: SessionStore, session) -> None:
    """Roles are read again for every admin command: a revoked SYSADMIN or a deleted user loses
    the power at once, not when the session expires."""
    user = auth.get_user(settings.catalog, session.user)
    if user is None or not auth.holds_sysadmin(user.roles):
        sessions.close(session.token)
        raise ToolError("forbidden", "the session's user no longer holds the SYSADMIN role")


async def exec_command(
    request: Request, endpoint: Endpoint, settings, sessions: SessionStore
) -> JSONResponse:
    session = await require_session(request, sessions, sysadmin=True)
    await run_in_threadpool(_still_sysadmin, settings, sessions, session)
    body = await run_in_threadpool(parse_json_body, await request.body(), request.headers.get("content-type"))
    # The seed's own rule first: a missing IMPORTDOC parameter answers 400 by name.
    if isinstance(body, dict) and body.get("command") == "IMPORTDOC":
        importdoc.require_params(body.get("params"))
    assert endpoint.request is not None
    validate_body(endpoint.request, body)
    command, params = body["command"], body["params"]
    if command == "IMPORTDOC":
        outcome = await run_in_threadpool(
            lambda: importdoc.import_collection(
                settings, params["database"], params["collection"], params["path"], confine=True
            )
        )
        if not outcome["result"]:  # a refusal is said in words: its paths redacted like any message
            outcome = {**outcome, "message": redact_message(outcome["message"])}
        return JSONResponse(outcome, status_code=200 if outcome["result"] else 202)
    if command == "SQL":
        result = await run_in_threadpool(catalog_bridge.execute_admin_sql, settings, params["sql"])
    else:
        result = await run_in_threadpool(
            catalog_bridge.set_documents, settings, *documents_setting(params)
        )
    return JSONResponse({"result": True, "command": command, **result})
