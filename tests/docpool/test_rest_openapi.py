"""The OpenAPI document built from spec/rest/endpoints.toml, and request-body validation rules."""

from __future__ import annotations

import json
import time
import tomllib

import pytest
from hypothesis import given, strategies as st
from jsonschema import Draft202012Validator
from starlette.testclient import TestClient

from knowspec.impl.config import Settings
from knowspec.impl.context import ToolOutput
from knowspec.impl.docpool import auth
from knowspec.impl.errors import ToolError
from pathlib import Path

from knowspec.impl.rest.openapi import cached_openapi
from knowspec.impl.rest.routes import rest_app
from knowspec.impl.server.pipeline import ToolRuntime
from knowspec.impl.rest.validation import integral_floats_to_int, validate_body

SPEC_DIR = Path(__file__).resolve().parents[2] / "spec"
TABLE = tomllib.loads((SPEC_DIR / "rest" / "endpoints.toml").read_text("utf-8"))["endpoint"]
DOC = cached_openapi()


def test_every_table_row_is_an_operation_with_its_auth():
    for row in TABLE:
        op = DOC["paths"][row["path"]][row["method"].lower()]
        assert op["operationId"] == row["operation_id"]
        assert op["security"] == ([] if row["auth"] == "none" else [{"session": []}])
    assert DOC["openapi"].startswith("3.1")


def test_every_tool_of_the_docpool_table_has_a_rest_mirror():
    tools_toml = SPEC_DIR / "docpool" / "tools.toml"
    if not tools_toml.exists():
        pytest.skip("spec/docpool/tools.toml not written yet")
    names = {t["name"] for t in tomllib.loads(tools_toml.read_text("utf-8"))["tool"]}
    assert names == {row["tool"] for row in TABLE if "tool" in row}


def test_document_is_self_contained_and_schemas_are_valid_2020_12():
    text = json.dumps(DOC)
    refs = {part.split('"')[0] for part in text.split('"$ref": "')[1:]}
    assert refs, "the document uses component refs"
    for ref in refs:
        assert ref.startswith("#/components/schemas/"), ref
        assert ref.split("/")[-1] in DOC["components"]["schemas"], ref
    for path_item in DOC["paths"].values():
        for op in path_item.values():
            body = op.get("requestBody", {}).get("content", {}).get("application/json")
            if body:
                Draft202012Validator.check_schema(body["schema"])


def test_session_owned_database_is_not_advertised_on_doc_endpoints():
    for row in TABLE:
        op = DOC["paths"][row["path"]][row["method"].lower()]
        schema = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
        if "database" in row.get("omit", []):
            assert "database" not in schema.get("properties", {})


def test_every_error_status_answers_the_envelope_schema():
    for path_item in DOC["paths"].values():
        for op in path_item.values():
            for status, response in op["responses"].items():
                if int(status) >= 400:
                    schema = response["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/ErrorEnvelope"}


LIMITED = {"type": "object", "additionalProperties": False,
           "properties": {"limit": {"type": "integer", "maximum": 50}, "q": {"type": "string"}}}


def test_limit_keyword_failure_is_resource_limit_other_failures_schema_validation():
    with pytest.raises(ToolError) as err:
        validate_body(LIMITED, {"limit": 51})
    assert err.value.code == "resource_limit"
    with pytest.raises(ToolError) as err:
        validate_body(LIMITED, {"limit": "x"})
    assert err.value.code == "schema_validation"
    assert err.value.diagnostics[0]["field"] == "limit"


@given(st.integers(min_value=-(2**40), max_value=2**40))
def test_integral_floats_are_integers(n):
    validate_body(LIMITED, {"limit": min(float(n), 50.0)})
    assert integral_floats_to_int({"a": [float(n)]}) == {"a": [n]}
    assert type(integral_floats_to_int(float(n))) is int


@given(st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer()))
def test_non_integral_floats_are_kept(x):
    assert integral_floats_to_int(x) == x


def _client_with(settings, tool, handler):
    """A REST app whose pipeline binds ``tool`` to ``handler`` (other tools: not implemented)."""
    runtime = ToolRuntime(settings, handlers={tool: handler})
    client = TestClient(rest_app(settings, runtime=runtime))
    token = client.post("/ClientREST/Login", json={"user": "u", "password": "pw"}).json()["token"]
    return client, {"Authorization": f"Bearer {token}"}


def test_slow_handler_is_cancelled_at_the_deadline(tmp_path):
    settings = Settings(appdir=tmp_path, call_timeout_seconds=0.2)
    auth.create_user(settings.catalog_path, "u", "pw")
    seen = {}

    def slow(args, ctx):
        seen["ctx"] = ctx
        time.sleep(0.6)
        return ToolOutput({"meta": {}, "collections": {}, "counts": {}})

    client, headers = _client_with(settings, "help_stats", slow)
    response = client.post("/ClientREST/HelpStats", json={}, headers=headers)
    assert response.status_code == 503
    assert response.json()["code"] == "operation_cancelled"
    assert response.json()["retryable"] is True
    assert seen["ctx"].cancel_event.is_set()


def test_handler_receives_schema_defaults_and_the_session_caller(tmp_path):
    settings = Settings(appdir=tmp_path)
    auth.create_user(settings.catalog_path, "u", "pw", ["Finance"])
    seen = {}

    def record(args, ctx):
        seen["args"], seen["caller"] = args, ctx.caller
        return ToolOutput({"results": []})

    client, headers = _client_with(settings, "doc_search", record)
    response = client.post("/ClientREST/DocSearch", json={"query": "fatura", "limit": 7.0},
                           headers=headers)
    assert response.status_code == 200, response.text
    args = seen["args"]
    assert (args.query, args.limit, args.mode, args.database) == ("fatura", 7, "fts", None)
    assert type(args.limit) is int
    assert seen["caller"].roles == ("Finance",) and not seen["caller"].unrestricted


def test_output_failing_its_schema_is_an_error_envelope(tmp_path):
    settings = Settings(appdir=tmp_path)
    auth.create_user(settings.catalog_path, "u", "pw")
    client, headers = _client_with(settings, "doc_search",
                                   lambda args, ctx: ToolOutput({"unexpected": 1}))
    response = client.post("/ClientREST/DocSearch", json={"query": "x"}, headers=headers)
    assert response.status_code == 400
    assert response.json()["code"] == "schema_validation"


def test_unbound_tool_is_501_not_implemented(tmp_path):
    settings = Settings(appdir=tmp_path)
    auth.create_user(settings.catalog_path, "u", "pw")
    client, headers = _client_with(settings, "doc_search", lambda args, ctx: None)
    response = client.post("/ClientREST/DocLinks", json={"kind": "form_class", "key": "X"},
                           headers=headers)
    assert response.status_code == 501
    assert response.json()["code"] == "not_implemented"
