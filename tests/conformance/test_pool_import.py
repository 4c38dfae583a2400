"""The document-pool fixture: generated from the seed, imported through REST IMPORTDOC into our
real HTTP server, and judged by the docpool_import checks, which also fail on a broken target."""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from knowspec.conformance.checks.docpool_import import POOL_CHECKS
from knowspec.conformance.config import RunConfig
from knowspec.conformance.pool_fixture import fold, generate, schema_ddl
from knowspec.conformance.runner import run_to_end
from serving import free_port, serving

REPO = Path(__file__).resolve().parents[2]
ADMIN = {"admin_user": "admin", "admin_password": "admin-pw"}
READER = {"reader_user": "okur", "reader_password": "okur-pw"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """Our server over HTTP: the demo pools, a SYSADMIN and a reader with another role."""
    from knowspec.impl.config import Settings
    from knowspec.impl.demo import prepare
    from knowspec.impl.docpool import auth

    appdir = tmp_path_factory.mktemp("appdir")
    settings = Settings(appdir=appdir)
    prepare(settings)
    cost, auth.SCRYPT_N = auth.SCRYPT_N, 2**8  # the hash keeps its own parameters
    try:
        auth.create_user(settings.catalog_path, ADMIN["admin_user"], ADMIN["admin_password"], ["SYSADMIN"])
        auth.create_user(settings.catalog_path, READER["reader_user"], READER["reader_password"], ["Muhasebe"])
    finally:
        auth.SCRYPT_N = cost
    port = free_port()
    # Each test writes its pool under its own tmp_path: the import folder is their common parent.
    # Anonymous MCP is allowed for the runs without (valid) admin credentials.
    with serving([sys.executable, "-m", "knowspec.impl.cli", "serve", "--http", f"127.0.0.1:{port}",
                  "--appdir", str(appdir), "--database", "demo", "--allow-anonymous",
                  "--import-dir", str(tmp_path_factory.getbasetemp())], port) as base:
        yield {"base": base, "appdir": appdir}


def _run(target: str, rest_url: str | None, tmp_path: Path, **options) -> dict:
    config = RunConfig(target=target, rest_url=rest_url, checks=options.pop("checks", POOL_CHECKS),
                       seed=options.pop("seed", 20261130), pool_dir=tmp_path, **options)
    finished = run_to_end(config)
    return {r.check_id: r for r in finished.results}


def _problems(results: dict) -> list:
    return [(r.check_id, r.status, r.failure.message if r.failure else r.reason)
            for r in results.values() if r.status != "passed"]


# ---- the fixture itself ------------------------------------------------------------------------

def test_the_shipped_ddl_is_the_spec_ddl():
    """The suite writes pools with the DDL codegen ships in generated/: the spec's, byte for byte."""
    spec = (REPO / "spec" / "docpool" / "sql" / "sqlite_schema.sql").read_text(encoding="utf-8")
    assert schema_ddl() == spec


def test_fixture_is_a_function_of_seed_and_token(tmp_path):
    a, b = generate(3, "abcd1234"), generate(3, "abcd1234")
    assert a == b and [e.attrs for e in a.entities] == [e.attrs for e in b.entities]
    other = generate(4, "abcd1234")
    assert [t.title for t in other.topics] != [t.title for t in a.topics]
    renamed = generate(3, "ffff0000")
    assert renamed.open_id == "conform-ffff0000" and all("FFFF0000" in e.key for e in renamed.entities)
    with pytest.raises(ValueError):
        generate(3, "Not A Token")


def test_written_pool_holds_the_facts_and_folded_fts(tmp_path):
    fx = generate(9, "c0ffee42", {"search_bm25_weights": "9.0, 3.0, 1.0"})
    con = sqlite3.connect(fx.write(tmp_path / "pool.db"))
    count = lambda table: con.execute(f'select count(*) from "{table}"').fetchone()[0]  # noqa: E731
    assert count("doc$topic") == len(fx.topics) and count("doc$collection") == 2
    assert count("doc$chunk") == sum(len(t.chunks) for t in fx.topics)
    assert count("doc$link") == sum(len(t.links) for t in fx.topics)
    assert count("doc$acl") == sum(len(t.acl) for t in fx.topics) > 0
    assert (count("doc$entity"), count("doc$entity_rel"), count("doc$alias")) == \
        (len(fx.entities), len(fx.relations), len(fx.aliases))
    assert dict(con.execute("select name, value from \"doc$meta\" where collection = ''")) == \
        {"schema_version": "2", "search_bm25_weights": "9.0, 3.0, 1.0"}
    erisim = dict(con.execute('select id, erisim from "doc$collection"'))
    assert erisim == {fx.open_id: "herkes", fx.restricted_id: "kisitli"}
    assert any(set(t.title) & set("ıİşğçöü") for t in fx.topics)
    for topic in fx.topics:  # each topic's word is found, folded, in that topic only
        rows = con.execute('select distinct t.slug from "doc$chunk_fts" f join "doc$chunk" c on c.id = f.rowid '
                           'join "doc$topic" t on t.id = c.topic_id where "doc$chunk_fts" match ?',
                           [f'"{fold(topic.word)}"']).fetchall()
        assert rows == [(topic.slug,)], topic.word


# ---- against our server --------------------------------------------------------------------------

def test_import_and_checks_pass_on_our_http_server(server, tmp_path):
    results = _run(server["base"] + "/mcp", server["base"], tmp_path, pool_token="feed0001", **ADMIN, **READER)
    assert set(results) == set(POOL_CHECKS)
    assert _problems(results) == []
    assert not list(tmp_path.iterdir())  # the source pool the suite wrote went when the run ended
    fx = generate(20261130, "feed0001")
    with sqlite3.connect(server["appdir"] / "demo-docs.db") as con:
        stored = dict(con.execute('select collection, count(*) from "doc$topic" where collection like ? '
                                  "group by collection", ["conform-feed0001%"]))
    assert stored == {c.id: len(fx.topics_in(c.id)) for c in fx.collections}


def test_without_admin_credentials_nothing_is_imported_and_the_report_says_so(server, tmp_path):
    results = _run(server["base"] + "/mcp", server["base"], tmp_path)
    assert {r.status for r in results.values()} == {"skipped"}
    assert all("discovered" in r.reason and "--admin-user" in r.reason for r in results.values())
    assert not list(tmp_path.iterdir())


def test_a_wrong_admin_password_fails_the_import_check(server, tmp_path):
    results = _run(server["base"] + "/mcp", server["base"], tmp_path, admin_user="admin", admin_password="nope")
    assert results["docpool_import"].status == "failed"
    assert "login" in results["docpool_import"].failure.message
    assert results["docpool_import_answers"].status == "skipped"


def test_non_admin_check_skips_without_a_reader(server, tmp_path):
    results = _run(server["base"] + "/mcp", server["base"], tmp_path, **ADMIN)
    assert results["docpool_import_non_admin"].status == "skipped"
    assert "--reader-user" in results["docpool_import_non_admin"].reason
    assert results["docpool_import"].status == "passed"


# ---- broken targets -------------------------------------------------------------------------------

class _RestProxy(BaseHTTPRequestHandler):
    """Forwards REST to our server and breaks one answer (``variant``)."""

    upstream = ""
    variant = ""

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "content-type")}
        request = urllib.request.Request(self.upstream + self.path, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        status, raw = self.mutate(body, status, raw)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def mutate(self, request: bytes, status: int, raw: bytes) -> tuple[int, bytes]:
        answer = json.loads(raw or b"null")
        if self.variant == "wrong_counts" and self.path.endswith("EXECCOMMAND") and status == 200:
            answer["topics"] += 1
        elif self.variant == "leak_forbidden" and self.path.endswith("DocGet") and status == 404:
            status, answer = 200, {"slug": json.loads(request)["slug"], "title": "?"}
        elif self.variant == "import_by_anyone" and self.path.endswith("EXECCOMMAND") and status == 403:
            status, answer = 202, {"result": False, "message": "no"}
        elif self.variant == "login_any_password" and self.path.endswith("Login") and status == 401:
            status, answer = 200, {"token": "forged", "user": "admin", "roles": ["SYSADMIN"], "database": "demo"}
        elif self.variant == "not_found_as_400" and self.path.endswith("DocGet") and status == 404:
            status = 400
        elif self.variant == "refusal_names_path" and self.path.endswith("EXECCOMMAND") and status == 202:
            answer["message"] += f" ({Path(json.loads(request)['params']['path']).parent})"
        return status, json.dumps(answer).encode()


@pytest.fixture
def broken_rest(server):
    started = []

    def start(variant: str) -> str:
        handler = type("Proxy", (_RestProxy,), {"upstream": server["base"], "variant": variant})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        started.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    yield start
    for httpd in started:
        httpd.shutdown()


@pytest.mark.parametrize("variant,check_id", [("wrong_counts", "docpool_import"),
                                              ("leak_forbidden", "docpool_import_acl"),
                                              ("import_by_anyone", "docpool_import_non_admin")])
def test_a_broken_rest_surface_fails_its_check(server, broken_rest, tmp_path, variant, check_id):
    results = _run(server["base"] + "/mcp", broken_rest(variant), tmp_path, **ADMIN, **READER)
    assert results[check_id].status == "failed", results[check_id]
    assert [c for c, status, _ in _problems(results) if status != "skipped"] == [check_id]


def test_rest_sessions_passes_on_our_http_server(server, tmp_path):
    results = _run(server["base"] + "/mcp", server["base"], tmp_path, checks=("rest_sessions",), **ADMIN)
    assert _problems(results) == []


@pytest.mark.parametrize("variant,check_id", [("login_any_password", "rest_sessions"),
                                              ("not_found_as_400", "rest_sessions"),
                                              ("refusal_names_path", "docpool_import_refusals")])
def test_a_broken_session_gate_or_refusal_fails_its_check(server, broken_rest, tmp_path, variant, check_id):
    results = _run(server["base"] + "/mcp", broken_rest(variant), tmp_path, checks=(check_id,), **ADMIN)
    assert results[check_id].status == "failed", results[check_id]


@pytest.mark.parametrize("mutant", ["identity", "doc_links_reverse"])
def test_over_stdio_a_doc_links_mutant_fails_the_answers_check(server, tmp_path, mutant):
    """A stdio caller sees every topic; the import goes through our REST into the same pool files."""
    serve = f"{sys.executable} -m knowspec.impl.cli serve --stdio --appdir {server['appdir']} --database demo"
    target = f"stdio:{sys.executable} -m knowspec.conformance.mutants.proxy --mutant {mutant} -- {serve}"
    results = _run(target, server["base"], tmp_path, seed=7, checks=("docpool_import_answers", "docpool_import_acl"),
                   **ADMIN)
    if mutant == "identity":
        assert _problems(results) == []
    else:
        assert results["docpool_import_answers"].status == "failed"
        assert "doc_links" in results["docpool_import_answers"].failure.message


def test_a_second_run_passes_beside_the_collections_the_first_left(server, tmp_path):
    """Imports keep earlier runs' collections; a search across collections, as oracle_doc_search
    makes, must still find the run's own topics only (a rerun had failed on a correct server)."""
    for token in ("rerun001", "rerun002"):
        (tmp_path / token).mkdir()
        results = _run(server["base"] + "/mcp", server["base"], tmp_path / token, pool_token=token,
                       checks=("oracle_doc_search",), **ADMIN, **READER)
        assert _problems(results) == [] and results["oracle_doc_search"].status == "passed"
