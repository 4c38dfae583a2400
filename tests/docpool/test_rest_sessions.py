"""Session tokens: expiry after the TTL, logout, and the caller a session becomes."""

from __future__ import annotations

from hypothesis import given, strategies as st

from knowspec.impl.docpool import auth
from knowspec.impl.rest.sessions import SessionStore
from fake_clock import Clock


def test_session_is_valid_until_its_ttl_then_gone():
    clock = Clock(1000.0)
    store = SessionStore(60, clock=clock)
    session = store.open("ayse", (), "sales")
    clock.now += 59.9
    assert store.get(session.token) == session
    clock.now += 0.1
    assert store.get(session.token) is None
    assert len(store) == 0


def test_closed_session_no_longer_resolves():
    store = SessionStore(60)
    session = store.open("ayse", (), None)
    assert store.close(session.token)
    assert store.get(session.token) is None
    assert not store.close(session.token)


def test_tokens_are_unique_and_unguessable_length():
    store = SessionStore(60)
    tokens = {store.open("u", (), None).token for _ in range(50)}
    assert len(tokens) == 50
    assert all(len(t) >= 40 for t in tokens)


def test_session_caller_is_restricted_with_user_roles_and_database():
    session = SessionStore(60).open("Ayse", ("Editors", "SYSADMIN"), "sales")
    caller = session.caller()
    assert not caller.unrestricted
    assert caller.database == "sales"
    assert caller.principals() == frozenset({"ayse", "editors", "sysadmin", "*"})
    assert session.is_sysadmin


@given(st.lists(st.text(min_size=0, max_size=50), max_size=5))
def test_unknown_or_empty_tokens_never_resolve(tokens):
    store = SessionStore(60)
    store.open("u", (), None)
    for token in tokens:
        assert store.get(token) is None


def test_an_unused_session_ends_after_the_idle_ttl():
    clock = Clock(1000.0)
    store = SessionStore(12 * 3600, clock=clock, idle_seconds=1800)
    session = store.open("ayse", (), None)
    clock.now += 1799.9
    assert store.get(session.token) == session
    clock.now += 1800  # idle again since the last use
    assert store.get(session.token) is None
    assert len(store) == 0


def test_use_extends_the_idle_ttl_but_never_the_absolute_one():
    clock = Clock(1000.0)
    store = SessionStore(3600, clock=clock, idle_seconds=600)
    session = store.open("ayse", (), None)
    for _ in range(5):  # used every 500 s: never idle for 600 s
        clock.now += 500
        assert store.get(session.token) == session
    clock.now += 500  # 3000 s: still within the absolute life
    assert store.get(session.token) == session
    clock.now += 600  # 3600 s after login: the absolute life is over although it was just used
    assert store.get(session.token) is None


def test_store_from_settings_takes_both_ttls():
    from knowspec.impl.config import Settings

    store = SessionStore.from_settings(Settings(session_ttl_seconds=100, session_idle_seconds=10))
    assert (store.ttl_seconds, store.idle_seconds) == (100, 10)
    defaults = SessionStore.from_settings(Settings())
    assert (defaults.ttl_seconds, defaults.idle_seconds) == (12 * 3600, 30 * 60)


# --- sessions shared through the catalog (every worker of `serve --workers N`, or several servers) ---


def test_a_session_opened_by_one_store_is_live_in_another_on_the_same_catalog(tmp_path):
    clock = Clock(1000.0)
    first = SessionStore(3600, clock=clock, idle_seconds=600, catalog=tmp_path / "catalog.db")
    second = SessionStore(3600, clock=clock, idle_seconds=600, catalog=tmp_path / "catalog.db")
    auth.create_user(tmp_path / "catalog.db", "ayse", "pw", ["editors", "SYSADMIN"])
    session = first.open("ayse", ("editors", "SYSADMIN"), "sales")
    assert second.get(session.token) == session
    assert second.get(session.token).caller() == session.caller()


def test_a_logout_through_one_store_ends_the_session_for_every_store(tmp_path):
    first = SessionStore(3600, catalog=tmp_path / "catalog.db")
    second = SessionStore(3600, catalog=tmp_path / "catalog.db")
    session = first.open("ayse", (), None)
    assert second.close(session.token)
    assert first.get(session.token) is None


def test_use_seen_by_one_store_keeps_the_session_alive_for_another(tmp_path):
    clock = Clock(1000.0)
    first = SessionStore(12 * 3600, clock=clock, idle_seconds=600, catalog=tmp_path / "catalog.db")
    second = SessionStore(12 * 3600, clock=clock, idle_seconds=600, catalog=tmp_path / "catalog.db")
    session = first.open("ayse", (), None)
    for _ in range(4):  # used every 500 s, alternately through each store: never idle for 600 s
        clock.now += 500
        assert second.get(session.token) == session
        clock.now += 500
        assert first.get(session.token) == session
    clock.now += 600
    assert second.get(session.token) is None
    assert first.get(session.token) is None


def test_an_expired_session_is_gone_for_every_store_and_the_ttl_is_absolute(tmp_path):
    clock = Clock(1000.0)
    first = SessionStore(60, clock=clock, catalog=tmp_path / "catalog.db")
    second = SessionStore(60, clock=clock, catalog=tmp_path / "catalog.db")
    session = first.open("ayse", (), None)
    clock.now += 59.9
    assert second.get(session.token) == session
    clock.now += 0.1
    assert first.get(session.token) is None
    assert len(second) == 0


def test_the_catalog_keeps_no_token_in_clear(tmp_path):
    catalog = tmp_path / "catalog.db"
    session = SessionStore(60, catalog=catalog).open("ayse", (), None)
    import sqlite3

    with sqlite3.connect(catalog) as con:
        rows = con.execute('select * from "auth$session"').fetchall()
    assert len(rows) == 1
    assert not any(session.token in str(value) for value in rows[0])


def test_the_server_store_lives_in_the_catalog(tmp_path):
    from knowspec.impl.config import Settings

    settings = Settings(appdir=tmp_path)
    session = SessionStore.from_settings(settings).open("ayse", (), None)
    assert SessionStore.from_settings(settings).get(session.token) == session
