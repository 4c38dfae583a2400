"""A catalog in PostgreSQL (``--catalog postgresql://...``): the same rules as the SQLite file,
shared by separate processes.

- The same sequence of catalog commands gives the same answers and errors on both stores.
- A session's use and an ended session's removal never lose a concurrent update.
- Two server processes that share one PostgreSQL catalog (and a PostgreSQL pool in the same
  database) honour each other's logins, logouts, expiries, ALTER DATABASE and role changes,
  and an IMPORTDOC through one is searchable through the other.
"""

from __future__ import annotations

import itertools
import json
import random
import sys
import threading
import urllib.parse
from pathlib import Path

import httpx2
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st
from psycopg.conninfo import conninfo_to_dict

from knowspec.impl.docpool import auth, catalog, catalog_postgres
from knowspec.impl.docpool.catalog_store import CatalogUnavailable, open_catalog
from knowspec.impl.rest import login_throttle
from knowspec.impl.rest.sessions import SessionStore, _token_hash
from serving import free_port, serving
from storages import fresh_pg_database, pg_dsn  # noqa: F401
from test_import_pools import make_pool, topics_of

pytestmark = pytest.mark.postgres
_names = itertools.count()
SERVE = [sys.executable, "-m", "knowspec.impl.cli", "serve"]
ADMIN_PW, READER_PW = "admin-pw", "reader-pw"


def as_url(dsn: str) -> str:
    """A libpq key=value DSN as the ``postgresql://`` URL that ``--catalog`` takes."""
    parts = conninfo_to_dict(dsn)
    dbname = parts.pop("dbname", "")
    return f"postgresql:///{urllib.parse.quote(dbname)}?{urllib.parse.urlencode(parts)}"


@pytest.fixture(autouse=True)
def cheap_hashes(monkeypatch):
    """Hashing cost is not what these tests pin (params are stored with each hash)."""
    monkeypatch.setattr(auth, "SCRYPT_N", 2**8)


@pytest.fixture
def pg_db(pg_dsn):
    return fresh_pg_database(pg_dsn, f"knowspec_cat{next(_names)}")


@pytest.fixture
def url(pg_db):
    return as_url(pg_db)


# -- same rules on both stores ------------------------------------------------------------------

NAMES = st.sampled_from(["ali", "ALI", "Ali", "fatma", "root", "İlker", "ilker"])
ROLES = st.sampled_from(["SYSADMIN", "sysadmin", "Finance", "FINANCE", "writer", "İK"])
DBS = st.sampled_from(["sales", "SALES", "hr", "Hr", "docs"])
COMMANDS = st.lists(st.one_of(
    st.tuples(st.just("create"), NAMES, st.lists(ROLES, max_size=2)),
    st.tuples(st.just("grant"), NAMES, ROLES),
    st.tuples(st.just("revoke"), NAMES, ROLES),
    st.tuples(st.just("remove"), NAMES, st.none()),
    st.tuples(st.just("passwd"), NAMES, st.sampled_from(["pw", "new"])),
    st.tuples(st.just("register"), DBS, st.sampled_from(["SQLITE", "postgresql", "ORACLE"])),
    st.tuples(st.just("alter"), DBS, st.sampled_from(["INTERNAL", "OFF", "DATABASE hr", "DATABASE nope"])),
    st.tuples(st.just("login"), NAMES, st.sampled_from(["pw", "bad"])),
), max_size=12)


def _apply(target, command) -> object:
    kind, a, b = command
    try:
        if kind == "create":
            return auth.create_user(target, a, "pw", b)
        if kind == "grant":
            return auth.grant_role(target, a, b)
        if kind == "revoke":
            return auth.revoke_role(target, a, b)
        if kind == "remove":
            return auth.remove_user(target, a)
        if kind == "passwd":
            return auth.set_password(target, a, b)
        if kind == "register":
            return catalog.register_database(target, a, b, f"{a}.db")
        if kind == "alter":
            return catalog.execute_alter(target, f"ALTER DATABASE {a} SET DOCUMENTS {b}")
        return auth.authenticate(target, a, b)
    except (auth.AuthError, catalog.CatalogError) as exc:
        return (type(exc).__name__, str(exc))


def _state(target) -> tuple:
    return auth.list_users(target), catalog.list_databases(target)


@hsettings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(commands=COMMANDS)
def test_the_postgresql_catalog_answers_every_command_like_the_sqlite_file(pg_dsn, tmp_path_factory, commands):
    catalog_postgres.close_pools()  # the database is re-made: no connection may hold the old one
    url = as_url(fresh_pg_database(pg_dsn, "knowspec_cat_parity"))
    sqlite_file = tmp_path_factory.mktemp("cat") / "catalog.db"
    for command in commands:
        assert _apply(url, command) == _apply(sqlite_file, command), command
    assert _state(url) == _state(sqlite_file)


def test_an_unreachable_postgresql_catalog_is_a_clear_error_without_the_password(tmp_path):
    bad = f"postgresql://knowspec:s3cret@/none?host={urllib.parse.quote(str(tmp_path))}&port=1&connect_timeout=1"
    with pytest.raises(CatalogUnavailable) as caught:
        auth.get_user(bad, "ali")
    assert "s3cret" not in str(caught.value) and "PostgreSQL catalog is unavailable" in str(caught.value)


# -- a catalog that stops answering ---------------------------------------------------------------

def test_while_the_catalog_is_unreachable_one_request_waits_and_the_others_are_refused_at_once():
    outage = catalog_postgres.Outage()
    assert outage.may_wait() and outage.may_wait()  # reachable: everyone goes ahead
    outage.unreachable()
    assert outage.may_wait()  # the probe
    assert not outage.may_wait() and not outage.may_wait()
    outage.unreachable()  # the probe failed: the next request probes again
    assert outage.may_wait() and not outage.may_wait()
    outage.answered()
    assert outage.may_wait() and outage.may_wait()


class _StalledPool:
    """A pool whose connections never come: each request waits until ``release``, then times out."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.waiting = threading.Event()

    def connection(self, timeout: float):
        from psycopg_pool import PoolTimeout

        self.waiting.set()
        self.release.wait(10)
        raise PoolTimeout("couldn't get a connection")


def test_requests_beside_the_probe_of_an_unreachable_catalog_do_not_wait():
    pool = _StalledPool()
    store = catalog_postgres.PostgresCatalog("postgresql:///x", pool)
    store.outage.unreachable()
    failures: list[BaseException] = []

    def probe() -> None:
        try:
            with store.transaction():
                pass
        except CatalogUnavailable as exc:
            failures.append(exc)

    prober = threading.Thread(target=probe)
    prober.start()
    assert pool.waiting.wait(5)
    with pytest.raises(CatalogUnavailable, match="another request is waiting"):
        with store.transaction():
            pass
    pool.release.set()
    prober.join(10)
    assert len(failures) == 1 and store.outage.down


def test_a_url_keeps_its_own_peer_timeouts():
    assert catalog_postgres.peer_timeouts("postgresql:///db") == catalog_postgres.PEER_TIMEOUTS
    mine = catalog_postgres.peer_timeouts("postgresql:///db?keepalives_idle=60&tcp_user_timeout=1000")
    assert "keepalives_idle" not in mine and "tcp_user_timeout" not in mine and mine["keepalives"] == "1"


def test_a_catalog_answers_the_first_request_after_its_server_restarted(tmp_path):
    """Pooled connections die with a restart; they are checked before use (the first requests
    after a restart had answered 503 while the server was back)."""
    import engines

    cluster = engines.PgCluster()
    if not cluster.available:
        pytest.skip("PostgreSQL binaries (initdb, pg_ctl) are absent")
    target = as_url(cluster.start())
    try:
        auth.create_user(target, "ali", "pw", [])
        assert auth.get_user(target, "ali") is not None  # the pool now holds a live connection
        assert cluster.base is not None and cluster.bindir is not None
        import subprocess

        subprocess.run(engines.as_postgres([str(cluster.bindir / "pg_ctl"), "-D", str(cluster.base / "data"),
                                            "-l", str(cluster.base / "pg.log"), "-m", "fast", "-w", "restart"]),
                       check=True, capture_output=True)
        assert auth.get_user(target, "ali") is not None
        with open_catalog(target).transaction() as rows:  # a stuck statement ends in time, as a 503
            assert rows.con.execute("show statement_timeout").fetchone()[0] == catalog_postgres.STATEMENT_TIMEOUT
    finally:
        cluster.stop()


# -- sessions: no lost updates ---------------------------------------------------------------------

def _session_row(target, key):
    with open_catalog(target).transaction() as rows:
        return rows.session(key)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_session_holds_its_users_roles_as_granted_now(kind, url, tmp_path):
    """Read with the session's row, in the order the user's roles are listed, on both stores:
    a revoked role had stayed with a session for its whole life."""
    target = url if kind == "postgresql" else tmp_path / "catalog.db"
    user = auth.create_user(target, "İlker", "pw", ["Finance", "WRITER", "İK"])
    store = SessionStore(3600, catalog=target)
    session = store.open(user.name, user.roles, None)
    assert store.get(session.token).roles == user.roles
    auth.revoke_role(target, "İLKER", "finance")  # the name and role as typed: ASCII case aside
    auth.grant_role(target, "İlker", "Audit")
    assert store.get(session.token).roles == auth.get_user(target, "İlker").roles == ("Audit", "WRITER", "İK")


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
@pytest.mark.parametrize("meanwhile", ["passwd", "remove"])
def test_a_login_checked_before_a_new_password_or_a_removal_opens_no_session(kind, url, tmp_path, meanwhile):
    """The password is checked, then the session opened: a `user passwd` or `user remove` that
    commits between the two had left a session taken with the old password, or of no user."""
    target = url if kind == "postgresql" else tmp_path / "catalog.db"
    auth.create_user(target, "carol", "old pw", ["Finance"])
    checked = auth.authenticate(target, "CAROL", "old pw")
    assert checked is not None and checked.credential
    if meanwhile == "passwd":
        auth.set_password(target, "carol", "new pw")
    else:
        auth.remove_user(target, "carol")
    store = SessionStore(3600, catalog=target)
    assert store.open(checked.name, checked.roles, None, checked.credential) is None
    fresh = auth.authenticate(target, "carol", "new pw") if meanwhile == "passwd" else None
    if fresh is not None:
        assert store.open(fresh.name, fresh.roles, None, fresh.credential) is not None


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_login_past_the_cap_ends_the_users_least_recently_used_session(kind, url, tmp_path):
    """A user's logins without logouts had piled up without bound (a hostile review: 400 logins,
    400 live rows); now the next past the cap ends the one used least recently, of that user only."""
    target = url if kind == "postgresql" else tmp_path / "catalog.db"
    now = [1000.0]
    store = SessionStore(3600, clock=lambda: now[0], catalog=target, per_user=3)
    other = store.open("bob", (), None)
    opened = []
    for name in ("ali", "ALI", "Ali"):
        now[0] += 1
        opened.append(store.open(name, (), None))
    first, second, third = opened
    now[0] += 5
    assert store.get(first.token) is not None  # used again: the least recently used is now the second
    fourth = store.open("ali", (), None)
    assert store.get(second.token) is None
    assert all(store.get(s.token) is not None for s in (first, third, fourth, other))


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_new_user_never_inherits_a_removed_namesakes_session(kind, url, tmp_path):
    target = url if kind == "postgresql" else tmp_path / "catalog.db"
    store = SessionStore(3600, catalog=target)
    left = store.open("carol", (), None)  # a row no removal ended (an older release's)
    auth.create_user(target, "CAROL", "pw", ["SYSADMIN"])
    assert store.get(left.token) is None


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_concurrent_uses_keep_the_latest_one(kind, url, tmp_path):
    target = url if kind == "postgresql" else tmp_path / "catalog.db"
    session = SessionStore(3600, idle_seconds=600, catalog=target).open("ali", (), None)
    key = _token_hash(session.token)
    uses = [session.expires_at - 3600 + random.Random(i).uniform(1, 500) for i in range(40)]

    def touch(now: float) -> None:
        with open_catalog(target).transaction() as rows:
            rows.touch_session(key, now)

    threads = [threading.Thread(target=touch, args=(now,)) for now in uses]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert _session_row(target, key)[4] == max(uses)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_an_ended_session_used_meanwhile_elsewhere_is_not_deleted(kind, url, tmp_path):
    """Server A (clock 150) read the session as idle since 0; server B (clock 120) used it since:
    A's delete must not remove what is, at B's use, a live session."""
    target = url if kind == "postgresql" else tmp_path / "catalog.db"
    session = SessionStore(3600, clock=lambda: 0.0, idle_seconds=100, catalog=target).open("ali", (), None)
    key = _token_hash(session.token)
    with open_catalog(target).transaction() as rows:
        assert rows.session(key) is not None
        rows.touch_session(key, 120.0)   # B's use, after A read the row
        assert not rows.remove_session_if_ended(key, 150.0, 100)
        assert rows.remove_session_if_ended(key, 220.0, 100)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_parallel_login_attempts_on_two_servers_are_counted_one_after_another(kind, url, tmp_path):
    """Failed-login counters live in the catalog: two session stores (two servers) on one
    catalog, attempts racing from threads on both; each admitted attempt was counted before the
    next was judged, so exactly the free attempts plus one get through before the block."""
    target = url if kind == "postgresql" else tmp_path / "catalog.db"
    servers = [SessionStore(3600, catalog=target, clock=lambda: 5000.0) for _ in range(2)]
    admitted = []

    def guess(store: SessionStore) -> None:
        for _ in range(8):
            admitted.append(store.logins.admit("Ali", "10.0.0.1") == 0)

    threads = [threading.Thread(target=guess, args=(servers[i % 2],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert admitted.count(True) == login_throttle.FREE_ATTEMPTS_PER_USER + 1
    assert servers[1].logins.admit("ALI", "10.0.0.1") == 1
    servers[0].logins.succeeded("ali", "10.0.0.1")
    assert servers[1].logins.admit("ali", "10.0.0.1") == 0


def test_sessions_in_a_postgresql_catalog_expire_for_every_store(url):
    class Clock:
        now = 1000.0

        def __call__(self) -> float:
            return self.now

    clock = Clock()
    first = SessionStore(3600, clock=clock, idle_seconds=600, catalog=url)
    second = SessionStore(3600, clock=clock, idle_seconds=600, catalog=url)
    auth.create_user(url, "ali", "pw", ["Finance"])
    session = first.open("ali", ("Finance",), "sales")
    assert second.get(session.token).roles == ("Finance",)
    clock.now += 599
    assert second.get(session.token) is not None       # used on the second: the idle clock restarts
    clock.now += 599
    assert first.get(session.token) is not None
    clock.now += 600
    assert second.get(session.token) is None            # idle too long
    assert first.get(session.token) is None and len(first) == 0
    late = first.open("ali", (), None)
    clock.now += 3600
    assert second.get(late.token) is None               # the absolute life, whatever the use


# -- two servers, one PostgreSQL catalog and pool --------------------------------------------------

@pytest.fixture
def shared(url, pg_db, tmp_path):
    """The catalog (users, 'sales' whose pool is PostgreSQL in the same database) and two appdirs."""
    catalog.register_database(url, "sales", "POSTGRESQL", pg_db)
    catalog.execute_alter(url, "ALTER DATABASE sales SET DOCUMENTS INTERNAL")
    auth.create_user(url, "admin", ADMIN_PW, ["SYSADMIN"])
    auth.create_user(url, "fatma", READER_PW)
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        (d / "imports").mkdir(parents=True)
    return url, dirs


def _server(url: str, appdir: Path, port: int):
    return serving([*SERVE, "--http", f"127.0.0.1:{port}", "--appdir", str(appdir), "--catalog", url], port)


@pytest.fixture
def servers(shared):
    url, (dir_a, dir_b) = shared
    port_a, port_b = free_port(), free_port()
    with _server(url, dir_a, port_a) as a, _server(url, dir_b, port_b) as b:
        with httpx2.Client(base_url=a, timeout=30) as client_a, httpx2.Client(base_url=b, timeout=30) as client_b:
            yield client_a, client_b, url, dir_a


def _login(client, user, password, database="sales") -> dict:
    response = client.post("/ClientREST/Login", json={"user": user, "password": password, "database": database})
    assert response.status_code == 200, response.text
    return {"Authorization": f"Bearer {response.json()['token']}"}


def _search(client, headers) -> object:
    response = client.post("/ClientREST/DocSearch", headers=headers, json={"query": "invoices"})
    return response.status_code, response.json()


def test_two_servers_share_logins_logouts_and_expiry_through_the_postgresql_catalog(servers):
    a, b, url, _ = servers
    headers = _login(a, "fatma", READER_PW)
    assert b.post("/ClientREST/DocStats", headers=headers, json={}).status_code != 401
    assert a.post("/ClientREST/Logout", headers=headers).status_code == 200
    response = b.post("/ClientREST/DocStats", headers=headers, json={})
    assert response.status_code == 401 and response.json()["code"] == "unauthenticated"

    headers = _login(b, "fatma", READER_PW)
    token = headers["Authorization"].split()[1]
    with psycopg.connect(url) as con:  # the session's absolute end passes
        con.execute('update "knowspec$catalog"."auth$session" set expires_at = 0 where token_hash = %s',
                    [_token_hash(token)])
    assert a.post("/ClientREST/DocStats", headers=headers, json={}).status_code == 401
    assert _session_row(url, _token_hash(token)) is None   # and the ended row is gone


def test_importdoc_through_one_server_is_searchable_through_the_other(servers):
    a, b, url, dir_a = servers
    admin = _login(a, "admin", ADMIN_PW)
    source = make_pool(dir_a / "imports" / "src.db", "manuals", topics_of(3), erisim="acl",
                       acl={"topic-0": ["*"], "topic-1": ["FINANCE"]})
    response = a.post("/AdminREST/EXECCOMMAND", headers=admin,
                      json={"command": "IMPORTDOC", "params": {"database": "sales", "collection": "manuals",
                                                               "path": str(source)}})
    assert response.status_code == 200, response.text
    reader = _login(b, "fatma", READER_PW)
    status, body = _search(b, reader)
    assert status == 200 and sorted(hit["slug"] for hit in body["results"]) == ["topic-0"]

    auth.grant_role(url, "fatma", "Finance")          # an ACL principal granted in the catalog
    reader = _login(b, "fatma", READER_PW)
    status, body = _search(a, reader)
    assert status == 200 and sorted(hit["slug"] for hit in body["results"]) == ["topic-0", "topic-1"]


def test_an_alter_database_or_a_revoked_role_on_one_server_is_seen_by_the_other(servers):
    a, b, url, _ = servers
    admin = _login(a, "admin", ADMIN_PW)
    reader = _login(b, "fatma", READER_PW)
    response = a.post("/AdminREST/EXECCOMMAND", headers=admin,
                      json={"command": "SQL", "params": {"sql": "ALTER DATABASE sales SET DOCUMENTS OFF"}})
    assert response.status_code == 200, response.text
    status, body = _search(b, reader)
    assert status == 404 and body["code"] == "pool_unavailable" and "has no document pool" in body["message"]

    auth.revoke_role(url, "admin", "SYSADMIN")
    response = b.post("/AdminREST/EXECCOMMAND", headers=admin,
                      json={"command": "SQL", "params": {"sql": "ALTER DATABASE sales SET DOCUMENTS INTERNAL"}})
    assert response.status_code == 403 and response.json()["code"] == "forbidden"
    assert a.post("/ClientREST/DocStats", headers=admin, json={}).status_code == 404  # signed in still (pool off)
    auth.remove_user(url, "ADMIN")  # on one server: the session ends on every one
    assert a.post("/ClientREST/DocStats", headers=admin, json={}).status_code == 401
    assert catalog.get_database(url, "sales").documents == "OFF"


# -- the command line ---------------------------------------------------------------------------

def test_the_command_line_keeps_users_and_databases_in_a_postgresql_catalog(url, tmp_path, capsys, monkeypatch):
    from knowspec.impl.cli import main

    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("pw\n"))
    assert main(["user", "add", "ali", "--password-stdin", "--role", "Finance", "--catalog", url,
                 "--appdir", str(tmp_path)]) == 0
    assert main(["pool", "register", "shop", "--storage", "postgresql", "--dsn", "dbname=x",
                 "--catalog", url, "--appdir", str(tmp_path)]) == 0
    assert main(["pool", "alter", "ALTER DATABASE SHOP SET DOCUMENTS INTERNAL", "--catalog", url,
                 "--appdir", str(tmp_path)]) == 0
    capsys.readouterr()
    assert auth.get_user(url, "ALI").roles == ("Finance",)
    assert catalog.get_database(url, "shop").documents == "INTERNAL"
    assert not (tmp_path / "catalog.db").exists()   # nothing went to the default file


def test_a_login_while_the_postgresql_catalog_is_down_answers_503_naming_no_secret(tmp_path):
    from starlette.testclient import TestClient

    from knowspec.impl.config import Settings
    from knowspec.impl.rest.routes import rest_app

    settings = Settings(appdir=tmp_path)
    settings.catalog_url = (f"postgresql://knowspec:s3cret@/none?host={urllib.parse.quote(str(tmp_path))}"
                            "&port=1&connect_timeout=1")
    with TestClient(rest_app(settings), raise_server_exceptions=False) as client:
        response = client.post("/ClientREST/Login", json={"user": "ali", "password": "pw"})
    assert response.status_code == 503, response.text
    body = response.json()
    assert body["code"] == "storage_error" and body["retryable"] is True
    assert body["message"] == "the catalog database is unavailable" and "s3cret" not in response.text


def test_a_doc_tool_while_the_postgresql_catalog_is_down_answers_storage_error(tmp_path):
    from knowspec.impl.errors import ToolError

    bad = f"postgresql:///none?host={urllib.parse.quote(str(tmp_path))}&port=1&connect_timeout=1"
    with pytest.raises(ToolError) as caught:
        catalog.resolve_pool_location(bad, "sales")
    assert caught.value.code == "storage_error" and caught.value.retryable is True


@pytest.mark.parametrize("name", ["ali\x00", "\x00", "al\x00i"])
def test_a_user_name_holding_nul_is_a_wrong_login_in_a_postgresql_catalog(url, tmp_path, name):
    """PostgreSQL text cannot hold NUL: such a name is no user's, a 401 like any other, never a
    503 that calls the catalog unavailable."""
    from starlette.testclient import TestClient

    from knowspec.impl.config import Settings
    from knowspec.impl.rest.routes import rest_app

    auth.create_user(url, "ali", "pw")
    settings = Settings(appdir=tmp_path)
    settings.catalog_url = url
    with TestClient(rest_app(settings), raise_server_exceptions=False) as client:
        response = client.post("/ClientREST/Login", json={"user": name, "password": "pw"})
    assert response.status_code == 401, response.text
    assert response.json()["code"] == "unauthenticated"


def test_a_database_name_holding_nul_is_not_registered_in_a_postgresql_catalog(url, tmp_path):
    """Login and the doc tools name a database; one holding NUL is simply not registered (a
    PostgreSQL lookup with it would fail), and registering one is refused on every store."""
    from starlette.testclient import TestClient

    from knowspec.impl.config import Settings
    from knowspec.impl.rest.routes import rest_app

    auth.create_user(url, "ali", "pw")
    settings = Settings(appdir=tmp_path)
    settings.catalog_url = url
    with TestClient(rest_app(settings), raise_server_exceptions=False) as client:
        response = client.post("/ClientREST/Login", json={"user": "ali", "password": "pw", "database": "sa\x00les"})
    assert response.status_code == 404, response.text
    assert response.json()["message"] == "database is not registered"
    for target in (url, tmp_path / "catalog.db"):
        with pytest.raises(catalog.CatalogError, match="control characters"):
            catalog.register_database(target, "sa\x00les", "SQLITE", "x.db")
