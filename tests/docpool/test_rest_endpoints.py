"""REST surface: login sessions, the 401/403 gates, envelopes, IMPORTDOC and identity filtering."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from knowspec.impl.config import Settings
from knowspec.impl.docpool import auth, catalog
from knowspec.impl.rest.endpoint_table import load_table
from knowspec.impl.rest.routes import rest_app
from knowspec.impl.rest.sessions import SessionStore

from test_import_pools import file_digest, make_pool, topics_of

ENVELOPE_KEYS = {"code", "message", "retryable", "diagnostics"}
ADMIN_PW, READER_PW = "admin-pw", "reader-pw"


class Clock:
    def __init__(self) -> None:
        self.now = 10_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def cheap_hashes(monkeypatch):
    """Hashing cost is not what these tests pin: keep scrypt cheap (params are per hash)."""
    monkeypatch.setattr(auth, "SCRYPT_N", 2**8)


@pytest.fixture()
def settings(tmp_path):
    s = Settings(appdir=tmp_path, session_ttl_seconds=600)
    s.import_path.mkdir()  # IMPORTDOC reads sources only from the import folder
    catalog.register_database(s.catalog_path, "sales", "SQLITE", str(tmp_path / "sales.db"))
    catalog.register_database(s.catalog_path, "hr", "SQLITE", str(tmp_path / "hr.db"))
    catalog.execute_alter(s.catalog_path, "ALTER DATABASE sales SET DOCUMENTS INTERNAL")
    auth.create_user(s.catalog_path, "admin", ADMIN_PW, ["SYSADMIN"])
    auth.create_user(s.catalog_path, "fatma", READER_PW, ["Finance"])
    auth.create_user(s.catalog_path, "ali", READER_PW)
    return s


@pytest.fixture()
def clock():
    return Clock()


@pytest.fixture()
def client(settings, clock):
    return TestClient(rest_app(settings, SessionStore(settings.session_ttl_seconds, clock=clock,
                                                       catalog=settings.catalog)))


def login(client, user, password, database="sales"):
    response = client.post("/ClientREST/Login",
                           json={"user": user, "password": password, "database": database})
    assert response.status_code == 200, response.text
    return {"Authorization": f"Bearer {response.json()['token']}"}


def assert_envelope(response, status, code):
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == ENVELOPE_KEYS
    assert body["code"] == code and body["message"]


# -- sessions ---------------------------------------------------------------------------------

def test_login_answers_token_user_roles_and_database(client):
    body = client.post("/ClientREST/Login",
                       json={"user": "fatma", "password": READER_PW, "database": "sales"}).json()
    assert (body["user"], body["roles"], body["database"]) == ("fatma", ["Finance"], "sales")
    assert body["expiresIn"] == 600 and len(body["token"]) >= 40


def test_wrong_password_is_401_envelope(client):
    response = client.post("/ClientREST/Login", json={"user": "fatma", "password": "nope"})
    assert_envelope(response, 401, "unauthenticated")


def test_login_to_unregistered_database_is_refused(client):
    response = client.post("/ClientREST/Login",
                           json={"user": "fatma", "password": READER_PW, "database": "nosuch"})
    assert_envelope(response, 404, "pool_unavailable")


def test_session_expires_after_ttl(client, clock):
    headers = login(client, "admin", ADMIN_PW)
    clock.now += 599
    assert client.post("/ClientREST/Logout", headers=headers).status_code == 200
    headers = login(client, "admin", ADMIN_PW)
    clock.now += 600
    assert_envelope(client.post("/ClientREST/Logout", headers=headers), 401, "unauthenticated")


def test_a_401_says_where_to_log_in_instead_of_a_redaction_notice(client):
    response = client.post("/ClientREST/DocStats", json={})
    assert response.headers["www-authenticate"].startswith("Bearer")
    body = response.json()
    assert body["code"] == "unauthenticated"
    assert "log in at POST /ClientREST/Login" in body["message"]
    assert "redacted" not in body["message"]


def test_logout_ends_the_session(client):
    headers = login(client, "fatma", READER_PW)
    assert client.post("/ClientREST/Logout", headers=headers).json() == {"result": True}
    assert_envelope(client.post("/ClientREST/DocStats", headers=headers, json={}),
                    401, "unauthenticated")


# -- gates and framework errors ---------------------------------------------------------------

PROTECTED = [(ep.method, ep.path) for ep in load_table()[1] if ep.auth != "none"]


@pytest.mark.parametrize("method, path", PROTECTED)
def test_every_protected_endpoint_is_401_without_a_session(client, method, path):
    assert_envelope(client.request(method, path, json={}), 401, "unauthenticated")
    bad = {"Authorization": "Bearer not-a-token"}
    assert_envelope(client.request(method, path, json={}, headers=bad), 401, "unauthenticated")


def test_admin_command_is_403_for_a_non_sysadmin(client, tmp_path):
    headers = login(client, "fatma", READER_PW)
    body = {"command": "IMPORTDOC",
            "params": {"database": "sales", "collection": "x", "path": str(tmp_path / "imports" / "s.db")}}
    assert_envelope(client.post("/AdminREST/EXECCOMMAND", headers=headers, json=body),
                    403, "forbidden")


def test_unknown_path_is_404_envelope(client):
    assert_envelope(client.get("/ClientREST/Nope"), 404, "not_found")


def test_wrong_method_is_405_envelope_with_allow(client):
    response = client.get("/ClientREST/DocSearch")
    assert_envelope(response, 405, "method_not_allowed")
    assert response.headers["allow"] == "POST"


def _on_event_loop() -> bool:
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def test_a_rest_call_is_decoded_checked_and_encoded_off_the_event_loop(client, monkeypatch):
    """Issue #19: no part of a REST tool call runs on the event loop, as over MCP."""
    from knowspec.impl.rest import tool_endpoints

    seen = []

    def recorded(step, function):
        def wrapped(*args, **kwargs):
            seen.append((step, _on_event_loop()))
            return function(*args, **kwargs)
        return wrapped

    for step, name in (("decode", "parse_json_body"), ("check", "validate_body"), ("encode", "encoded")):
        monkeypatch.setattr(tool_endpoints, name, recorded(step, getattr(tool_endpoints, name)))
    headers = login(client, "fatma", READER_PW)
    response = client.post("/ClientREST/DocStats", headers=headers, json={})
    assert response.headers["content-type"] == "application/json" and response.json()
    assert seen == [("decode", False), ("check", False), ("encode", False)]


def test_malformed_json_is_400_envelope(client):
    headers = {**login(client, "fatma", READER_PW), "content-type": "application/json"}
    response = client.post("/ClientREST/DocStats", headers=headers, content=b"{not json")
    assert_envelope(response, 400, "invalid_request")


# -- admin commands ---------------------------------------------------------------------------

def _import(client, headers, **params):
    return client.post("/AdminREST/EXECCOMMAND", headers=headers,
                       json={"command": "IMPORTDOC", "params": params})


def test_importdoc_over_rest_returns_200_with_counts(client, tmp_path):
    headers = login(client, "admin", ADMIN_PW)
    source = make_pool(tmp_path / "imports" / "src.db", "manuals", topics_of(3))
    response = _import(client, headers, database="sales", collection="manuals", path=str(source))
    assert response.status_code == 200
    assert response.json() == {"result": True, "collection": "manuals", "topics": 3,
                               "chunks": 6, "docsDb": "sales", "source": str(source)}


@pytest.mark.parametrize("missing", ["database", "collection", "path"])
def test_importdoc_missing_param_is_400_naming_it(client, tmp_path, missing):
    headers = login(client, "admin", ADMIN_PW)
    params = {"database": "sales", "collection": "manuals", "path": str(tmp_path / "imports" / "s.db")}
    del params[missing]
    response = _import(client, headers, **params)
    assert_envelope(response, 400, "invalid_request")
    assert missing in response.json()["message"]


def test_importdoc_refusal_is_202_and_target_untouched(client, tmp_path):
    headers = login(client, "admin", ADMIN_PW)
    _import(client, headers, database="sales", collection="manuals",
            path=str(make_pool(tmp_path / "imports" / "src.db", "manuals", topics_of(2))))
    before = file_digest(tmp_path / "sales.db")
    response = _import(client, headers, database="sales", collection="Not_Valid",
                       path=str(tmp_path / "imports" / "src.db"))
    assert response.status_code == 202
    assert response.json()["result"] is False
    assert file_digest(tmp_path / "sales.db") == before


def test_alter_database_statement_sets_documents(client, settings):
    headers = login(client, "admin", ADMIN_PW)
    response = client.post("/AdminREST/EXECCOMMAND", headers=headers, json={
        "command": "SQL", "params": {"sql": "ALTER DATABASE hr SET DOCUMENTS DATABASE sales"}})
    assert response.status_code == 200, response.text
    assert response.json()["documentsDb"] == "sales"
    assert catalog.get_database(settings.catalog_path, "hr").documents == "DATABASE"
    response = client.post("/AdminREST/EXECCOMMAND", headers=headers, json={
        "command": "ALTERDATABASE", "params": {"database": "hr", "documents": "OFF"}})
    assert response.json()["documents"] == "OFF"


def test_other_sql_is_rejected(client):
    headers = login(client, "admin", ADMIN_PW)
    response = client.post("/AdminREST/EXECCOMMAND", headers=headers, json={
        "command": "SQL", "params": {"sql": "DROP TABLE users"}})
    assert_envelope(response, 400, "schema_validation")


# -- tools under the session's identity -------------------------------------------------------

@pytest.fixture()
def restricted_pool(client, tmp_path):
    """'manuals' is ACL-only: topic-1 for Finance, the others for nobody but '*' on topic-0."""
    headers = login(client, "admin", ADMIN_PW)
    source = make_pool(tmp_path / "imports" / "src.db", "manuals", topics_of(3), erisim="acl",
                       acl={"topic-0": ["*"], "topic-1": ["FINANCE"]})
    assert _import(client, headers, database="sales", collection="manuals",
                   path=str(source)).status_code == 200


def _slugs(response):
    assert response.status_code == 200, response.text
    return sorted(hit["slug"] for hit in response.json()["results"])


def test_doc_search_is_filtered_by_the_session_identity(client, restricted_pool):
    query = {"query": "invoices"}
    finance = login(client, "fatma", READER_PW)
    other = login(client, "ali", READER_PW)
    assert _slugs(client.post("/ClientREST/DocSearch", headers=finance, json=query)) == [
        "topic-0", "topic-1"]
    assert _slugs(client.post("/ClientREST/DocSearch", headers=other, json=query)) == ["topic-0"]


def test_restricted_topic_answers_not_found_without_the_principal(client, restricted_pool):
    finance = login(client, "fatma", READER_PW)
    other = login(client, "ali", READER_PW)
    body = {"collection": "manuals", "slug": "topic-1"}
    assert client.post("/ClientREST/DocGet", headers=finance, json=body).status_code == 200
    assert_envelope(client.post("/ClientREST/DocGet", headers=other, json=body), 404, "not_found")


def test_a_revoked_role_stops_reading_its_topics_with_the_same_token(client, settings, restricted_pool):
    """A session had kept the roles of its login until it ended (12 hours by default)."""
    finance = login(client, "fatma", READER_PW)
    body = {"collection": "manuals", "slug": "topic-1"}
    assert client.post("/ClientREST/DocGet", headers=finance, json=body).status_code == 200
    auth.revoke_role(settings.catalog, "fatma", "finance")
    assert_envelope(client.post("/ClientREST/DocGet", headers=finance, json=body), 404, "not_found")
    auth.grant_role(settings.catalog, "fatma", "Finance")
    assert client.post("/ClientREST/DocGet", headers=finance, json=body).status_code == 200


@pytest.mark.parametrize("end", [lambda catalog: auth.set_password(catalog, "fatma", "another password"),
                                 lambda catalog: auth.remove_user(catalog, "FATMA")], ids=["passwd", "remove"])
def test_removing_a_user_or_setting_its_password_ends_its_sessions(client, settings, end):
    headers, others = login(client, "fatma", READER_PW), login(client, "ali", READER_PW)
    assert client.post("/ClientREST/DocStats", headers=headers, json={}).status_code != 401
    end(settings.catalog)
    assert_envelope(client.post("/ClientREST/DocStats", headers=headers, json={}), 401, "unauthenticated")
    assert client.post("/ClientREST/DocStats", headers=others, json={}).status_code != 401


def test_doc_tools_read_the_session_database_not_the_body(client, restricted_pool):
    headers = login(client, "ali", READER_PW, database="hr")
    response = client.post("/ClientREST/DocStats", headers=headers, json={})
    assert_envelope(response, 404, "pool_unavailable")
    response = client.post("/ClientREST/DocStats", headers=headers, json={"database": "sales"})
    assert_envelope(response, 400, "schema_validation")


def test_non_json_body_is_415_envelope(client):
    headers = {**login(client, "fatma", READER_PW), "content-type": "text/plain"}
    response = client.post("/ClientREST/DocStats", headers=headers, content=b"hello")
    assert_envelope(response, 415, "unsupported_media_type")


def test_collection_and_stats_counts_follow_the_session_identity(client, restricted_pool):
    finance = login(client, "fatma", READER_PW)
    other = login(client, "ali", READER_PW)

    def topics(headers):
        rows = client.post("/ClientREST/DocCollections", headers=headers, json={}).json()["results"]
        return {r["id"]: r["topics"] for r in rows}

    assert topics(finance)["manuals"] == 2 and topics(other)["manuals"] == 1
    stats = [client.post("/ClientREST/DocStats", headers=h, json={}).json() for h in (finance, other)]
    assert stats[0]["counts"]["topic"] == 2 and stats[1]["counts"]["topic"] == 1
