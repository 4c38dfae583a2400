"""schemathesis against the in-process REST app's /openapi.json, with the envelope check.

Every generated request runs with a SYSADMIN session (the built-in ``ignored_auth`` check also
replays it without one); every status >= 400 must carry the error envelope.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings as hyp_settings
from starlette.testclient import TestClient

from knowspec.impl.config import Settings
from knowspec.impl.docpool import auth, catalog
from knowspec.impl.docpool.importdoc import import_collection
from knowspec.impl.rest.routes import rest_app

from test_import_pools import make_pool, topics_of

ENVELOPE_KEYS = {"code", "message", "retryable", "diagnostics"}


@schemathesis.check
def knowspec_rest_error_envelope(ctx, response, case):
    """Project rule: every error body is exactly the envelope {code, message, retryable, diagnostics}."""
    if response.status_code < 400:
        return None
    try:
        body = response.json()
    except ValueError:
        raise AssertionError(f"{response.status_code} body is not JSON") from None
    if not isinstance(body, dict) or set(body) != ENVELOPE_KEYS:
        raise AssertionError(f"{response.status_code} body is not the error envelope: {body!r}")
    if not (isinstance(body["code"], str) and body["code"] and isinstance(body["retryable"], bool)
            and isinstance(body["diagnostics"], list) and body["message"]):
        raise AssertionError(f"malformed envelope: {body!r}")
    return None


def _app(tmp_path):
    # schemathesis takes a case's session (a login) when it makes the case, and makes a phase's
    # cases before it calls them: more than the default 100 live logins of one user, which would
    # end the earliest before their cases run
    s = Settings(appdir=tmp_path, session_ttl_seconds=3600, rest_sessions_per_user=100_000)
    make_pool(s.help_db_path, "netsim-help", topics_of(3, "help"))
    catalog.register_database(s.catalog_path, "sales", "SQLITE", str(tmp_path / "sales.db"))
    catalog.execute_alter(s.catalog_path, "ALTER DATABASE sales SET DOCUMENTS INTERNAL")
    import_collection(s, "sales", "manuals",
                      str(make_pool(tmp_path / "src.db", "manuals", topics_of(5))))
    cost, auth.SCRYPT_N = auth.SCRYPT_N, 2**8  # cheap hash: params are stored per hash
    try:
        auth.create_user(s.catalog_path, "admin", "admin-pw", ["SYSADMIN"])
    finally:
        auth.SCRYPT_N = cost
    return rest_app(s)


# schemathesis needs the schema at collection time (its from_fixture loader does not work with
# this pytest), so the app and its temporary state are built once per module import; the
# directory is removed when the interpreter exits.
_STATE = tempfile.TemporaryDirectory(prefix="knowspec-rest-")
APP = _app(Path(_STATE.name))
CLIENT = TestClient(APP)
# The sessions the cases use are opened from an address of their own: the generated logins fail
# by the dozen, and failed logins are throttled per address.
SESSION_CLIENT = TestClient(APP, client=("192.0.2.10", 50000))

schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


ISSUED: set[str] = set()


@schema.auth(refresh_interval=None)
class FreshSysadminSession:
    """A new SYSADMIN session per case (no caching): a generated Logout must not starve the
    cases after it. Declared as an auth provider so schemathesis' own auth checks still replay
    each case without it."""

    def get(self, case, ctx):
        token = SESSION_CLIENT.post(
            "/ClientREST/Login",
            json={"user": "admin", "password": "admin-pw", "database": "sales"},
        ).json()["token"]
        ISSUED.add(f"Bearer {token}")
        return token

    def set(self, case, data, ctx):
        if _negates_authorization(case):
            return  # the case is about a missing or bad Authorization header: keep it so
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}


def _negates_authorization(case) -> bool:
    """True for a negative case whose mutation is the Authorization header itself."""
    data = getattr(getattr(getattr(case, "meta", None), "phase", None), "data", None)
    return getattr(data, "parameter", None) == "Authorization"


@schema.parametrize()
@hyp_settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
def test_rest_conforms_to_its_openapi(case):
    response = case.call_and_validate()
    session_call = case.operation.path != "/ClientREST/Login"
    if session_call and (case.headers or {}).get("Authorization") in ISSUED:
        assert response.status_code != 401, "a fresh SYSADMIN session was refused"


class _Reply:
    def __init__(self, status_code, body):
        self.status_code, self._body = status_code, body

    def json(self):
        if isinstance(self._body, str):
            raise ValueError("not JSON")
        return self._body


def test_envelope_check_rejects_framework_text_and_partial_envelopes():
    good = {"code": "not_found", "message": "m", "retryable": False, "diagnostics": []}
    assert knowspec_rest_error_envelope(None, _Reply(404, good), None) is None
    assert knowspec_rest_error_envelope(None, _Reply(200, "plain ok"), None) is None
    for bad in ("Method Not Allowed", {"detail": "x"}, {**good, "extra": 1},
                {**good, "retryable": "no"}, {**good, "message": ""}):
        with pytest.raises(AssertionError):
            knowspec_rest_error_envelope(None, _Reply(405, bad), None)


def test_unmutated_app_answers_framework_errors_with_the_envelope():
    response = CLIENT.get("/ClientREST/Login")
    assert response.status_code == 405 and response.headers["allow"] == "POST"
    knowspec_rest_error_envelope(None, response, None)
