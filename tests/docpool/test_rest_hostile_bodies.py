"""Hostile REST bodies answer 4xx envelopes, never 500, and never echo what was sent."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from knowspec.impl.config import Settings
from knowspec.impl.docpool import auth
from knowspec.impl.rest.routes import rest_app
from knowspec.impl.server.pipeline import ToolRuntime


@pytest.fixture()
def client(tmp_path):
    settings = Settings(appdir=tmp_path)
    auth.create_user(settings.catalog_path, "u", "pw")
    return TestClient(rest_app(settings, runtime=ToolRuntime(settings)), raise_server_exceptions=False)


def post(client, path, raw: bytes, content_type="application/json"):
    return client.post(path, content=raw, headers={"Content-Type": content_type})


def test_deeply_nested_login_body_is_refused_not_crashed(client):
    response = post(client, "/ClientREST/Login", b"[" * 100_000 + b"]" * 100_000)
    assert 400 <= response.status_code < 500
    assert response.json()["code"] in ("invalid_request", "resource_limit")


def test_lone_surrogate_in_login_is_invalid_utf8(client):
    response = post(client, "/ClientREST/Login", b'{"user": "a\\ud800", "password": "x"}')
    assert response.status_code == 400
    assert response.json()["message"] == "request body contains invalid UTF-8"


def test_media_type_is_not_echoed(client):
    response = post(client, "/ClientREST/Login", b"x", content_type="text/x-/etc/passwd")
    assert response.status_code == 415
    assert "passwd" not in response.text


def test_unknown_path_is_not_echoed(client):
    response = client.get("/ClientREST/../../etc/passwd-probe")
    assert response.status_code == 404
    assert "passwd" not in response.text


def test_revoked_sysadmin_loses_admin_at_once(tmp_path):
    settings = Settings(appdir=tmp_path)
    auth.create_user(settings.catalog_path, "root", "pw", ["SYSADMIN"])
    app = TestClient(rest_app(settings, runtime=ToolRuntime(settings)), raise_server_exceptions=False)
    token = app.post("/ClientREST/Login", json={"user": "root", "password": "pw"}).json()["token"]
    headers = {"Authorization": f"Bearer {token}"}
    body = {"command": "IMPORTDOC", "params": {"database": "db", "collection": "c"}}
    assert app.post("/AdminREST/EXECCOMMAND", json=body, headers=headers).status_code == 400  # admitted
    auth.revoke_role(settings.catalog_path, "root", "SYSADMIN")
    assert app.post("/AdminREST/EXECCOMMAND", json=body, headers=headers).status_code == 403


def test_a_bug_answers_internal_error_without_naming_what_failed(client, monkeypatch):
    def broken(*args, **kwargs):
        raise KeyError("/srv/knowspec/secret-catalog.db")

    monkeypatch.setattr(auth, "authenticate", broken)
    response = post(client, "/ClientREST/Login", b'{"user": "u", "password": "pw"}')
    assert response.status_code == 500
    assert response.json()["code"] == "internal_error"
    assert response.json()["message"] == "internal error"
    assert "KeyError" not in response.text and "secret" not in response.text
