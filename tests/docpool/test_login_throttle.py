"""Failed-login throttling (spec/security.md "Authentication"): the rule, its counters in the
catalog (shared by every process that opens it), and ``POST /ClientREST/Login`` answering 429."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, strategies as st
from starlette.testclient import TestClient

from knowspec.impl.config import Settings
from knowspec.impl.docpool import auth, catalog
from knowspec.impl.docpool.catalog_sqlite import SqliteCatalog
from knowspec.impl.rest import login_throttle as rule
from knowspec.impl.rest.login_throttle import Counter, LoginThrottle
from knowspec.impl.rest.routes import rest_app
from knowspec.impl.rest.sessions import SessionStore
from test_rest_endpoints import cheap_hashes  # noqa: F401  (autouse: scrypt kept cheap)

PASSWORD = "right-pw"
FREE = rule.FREE_ATTEMPTS_PER_USER


class Clock:
    def __init__(self) -> None:
        self.now = 50_000.0

    def __call__(self) -> float:
        return self.now


# -- the rule ---------------------------------------------------------------------------------

@given(st.integers(0, 200), st.integers(0, 30))
def test_a_block_is_nothing_within_the_free_attempts_then_doubles_up_to_the_cap(attempts, free):
    seconds = rule.block_seconds(attempts, free)
    if attempts <= free:
        assert seconds == 0
    else:
        assert rule.FIRST_BLOCK_SECONDS <= seconds <= rule.MAX_BLOCK_SECONDS
        assert rule.block_seconds(attempts + 1, free) == min(rule.MAX_BLOCK_SECONDS, 2 * seconds)


@given(st.integers(0, 100), st.floats(0, 10_000), st.floats(0, 10_000), st.integers(0, 30))
def test_the_wait_is_never_negative_and_ends_with_the_block(attempts, last, later, free):
    counter = Counter(attempts, last)
    now = last + later
    wait = rule.wait_seconds(counter, free, now)
    assert wait >= 0
    assert wait == pytest.approx(max(0.0, rule.block_seconds(attempts, free) - later), abs=1e-6)


def test_an_idle_counter_starts_again_from_zero():
    counter = Counter(40, 1000.0)
    assert rule.current(counter, 1000.0 + rule.FORGET_AFTER_SECONDS - 1) == counter
    assert rule.current(counter, 1000.0 + rule.FORGET_AFTER_SECONDS) == Counter()


def test_a_success_takes_back_one_attempt_never_below_zero():
    assert rule.taken_back(Counter(3, 7.0)) == Counter(2, 7.0)
    assert rule.taken_back(Counter(0, 7.0)) == Counter(0, 7.0)


def test_user_names_count_case_insensitively_and_per_address():
    assert rule.keys_for("Ali", "10.0.0.1") == rule.keys_for("ALI", "10.0.0.1")
    assert rule.keys_for("ali", "10.0.0.1")[0] != rule.keys_for("ali", "10.0.0.2")[0]
    assert rule.keys_for("ali", "10.0.0.1")[1] == rule.keys_for("veli", "10.0.0.1")[1]


# -- the counters in a catalog ----------------------------------------------------------------

def _throttle(target, clock) -> LoginThrottle:
    store = SqliteCatalog(target, keep_connections=True)
    return LoginThrottle(lambda: store, clock)


def test_the_attempt_past_the_free_ones_blocks_its_user_from_that_address_only(tmp_path):
    clock = Clock()
    throttle = _throttle(tmp_path / "catalog.db", clock)
    for _ in range(FREE + 1):
        assert throttle.admit("ali", "10.0.0.1") == 0
    assert throttle.admit("ali", "10.0.0.1") == 1  # blocked for FIRST_BLOCK_SECONDS
    assert throttle.admit("ALI", "10.0.0.1") == 1
    assert throttle.admit("ali", "10.0.0.2") == 0  # another address guesses on its own count
    assert throttle.admit("veli", "10.0.0.1") == 0  # another user from the same address
    clock.now += 1
    assert throttle.admit("ali", "10.0.0.1") == 0
    assert throttle.admit("ali", "10.0.0.1") == 2  # the next block is twice as long


def test_a_refused_attempt_is_not_counted(tmp_path):
    clock = Clock()
    throttle = _throttle(tmp_path / "catalog.db", clock)
    for _ in range(FREE + 1):
        throttle.admit("ali", "a")
    for _ in range(50):
        assert throttle.admit("ali", "a") == 1
    clock.now += 1
    assert throttle.admit("ali", "a") == 0


def test_a_success_clears_its_user_and_gives_the_address_its_attempt_back(tmp_path):
    clock = Clock()
    throttle = _throttle(tmp_path / "catalog.db", clock)
    for _ in range(FREE):
        throttle.admit("ali", "a")
    throttle.admit("ali", "a")
    throttle.succeeded("ali", "a")
    for _ in range(FREE):
        assert throttle.admit("ali", "a") == 0
    # The address counted every attempt but the successful one: FREE * 2 so far.
    for n in range(rule.FREE_ATTEMPTS_PER_ADDRESS - 2 * FREE):
        assert throttle.admit(f"user{n}", "a") == 0
    assert throttle.admit("someone-else", "a") == 0  # the first attempt past the free ones goes in ...
    assert throttle.admit("another", "a") == 1       # ... and blocks the address for every user name


def test_an_address_guessing_many_user_names_is_blocked_for_all_of_them(tmp_path):
    clock = Clock()
    throttle = _throttle(tmp_path / "catalog.db", clock)
    for n in range(rule.FREE_ATTEMPTS_PER_ADDRESS + 1):
        assert throttle.admit(f"user{n}", "10.9.9.9") == 0
    assert throttle.admit("admin", "10.9.9.9") == 1
    assert throttle.admit("admin", "10.9.9.8") == 0


def test_counters_idle_for_an_hour_are_swept(tmp_path):
    clock = Clock()
    target = tmp_path / "catalog.db"
    throttle = _throttle(target, clock)
    for n in range(5):
        throttle.admit(f"user{n}", "a")
    clock.now += rule.FORGET_AFTER_SECONDS + 1
    throttle.admit("late", "b")
    with SqliteCatalog(target).transaction() as rows:
        left = rows.con.execute('select key from "auth$login_counter"').fetchall()
    assert sorted(k for (k,) in left) == sorted(rule.keys_for("late", "b"))


def test_processes_sharing_a_catalog_count_together_and_in_parallel(tmp_path):
    """Two stores on one file stand for two workers; attempts race from threads on both. Every
    admitted attempt was counted, so exactly FREE + 1 of them get through before the block."""
    clock = Clock()
    target = tmp_path / "catalog.db"
    workers = [_throttle(target, clock), _throttle(target, clock)]
    admitted = []

    def guess(worker: LoginThrottle) -> None:
        for _ in range(10):
            admitted.append(worker.admit("ali", "10.0.0.1") == 0)

    threads = [threading.Thread(target=guess, args=(workers[i % 2],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert admitted.count(True) == FREE + 1
    assert len(admitted) == 40


# -- POST /ClientREST/Login -------------------------------------------------------------------

@pytest.fixture()
def settings(tmp_path):
    s = Settings(appdir=tmp_path, session_ttl_seconds=600)
    catalog.register_database(s.catalog_path, "sales", "SQLITE", str(tmp_path / "sales.db"))
    auth.create_user(s.catalog_path, "ali", PASSWORD)
    return s


def _clients(settings, clock, *addresses):
    app = rest_app(settings, SessionStore(settings.session_ttl_seconds, clock=clock, catalog=settings.catalog))
    return [TestClient(app, client=(address, 40000)) for address in addresses]


def _login(client, password, user="ali"):
    return client.post("/ClientREST/Login", json={"user": user, "password": password, "database": "sales"})


def test_login_answers_429_with_retry_after_once_a_user_is_blocked_even_with_the_right_password(settings, monkeypatch):
    clock = Clock()
    guesser, owner = _clients(settings, clock, "203.0.113.7", "198.51.100.2")
    checked = []
    real = auth.authenticate
    monkeypatch.setattr(auth, "authenticate", lambda *a: checked.append(a) or real(*a))
    for _ in range(FREE + 1):
        assert _login(guesser, "wrong").status_code == 401
    refused = _login(guesser, PASSWORD)
    assert refused.status_code == 429
    assert refused.headers["Retry-After"] == "1"
    body = refused.json()
    assert body["code"] == "rate_limited" and body["retryable"] is True
    assert "try again in 1 s" in body["message"]
    assert len(checked) == FREE + 1  # the refused attempt never reached the password check
    assert _login(owner, PASSWORD).status_code == 200  # the user logs in from elsewhere
    clock.now += 1
    assert _login(guesser, PASSWORD).status_code == 200


def test_a_successful_login_resets_the_count_for_its_user(settings):
    clock = Clock()
    (client,) = _clients(settings, clock, "192.0.2.1")
    for _ in range(3):
        for _ in range(FREE):
            assert _login(client, "wrong").status_code == 401
        assert _login(client, PASSWORD).status_code == 200


def test_the_429_is_an_advertised_login_answer():
    from knowspec.impl.rest.endpoint_table import load_table

    _, endpoints = load_table()
    login = next(ep for ep in endpoints if ep.operation_id == "login")
    assert 429 in login.errors


def _slow_passwords(monkeypatch, checked: list) -> None:
    """A password check that takes as long as a real scrypt hash, so that parallel logins overlap."""
    import time

    real = auth.authenticate

    def slowly(*args):
        checked.append(args)
        time.sleep(0.05)
        return real(*args)

    monkeypatch.setattr(auth, "authenticate", slowly)


def _in_parallel(client, password: str, n: int) -> list[int]:
    statuses: list[int] = []
    threads = [threading.Thread(target=lambda: statuses.append(_login(client, password).status_code))
               for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return statuses


def test_parallel_logins_with_the_right_password_all_log_in(settings, monkeypatch):
    """Counted before their passwords were checked, 12 at once had been refused past the free five
    as "too many failed logins" (none had failed); they take turns now."""
    _slow_passwords(monkeypatch, [])
    (client,) = _clients(settings, Clock(), "192.0.2.50")
    assert _in_parallel(client, PASSWORD, 2 * FREE + 2) == [200] * (2 * FREE + 2)


def test_parallel_guesses_are_still_counted_one_after_another(settings, monkeypatch):
    checked: list = []
    _slow_passwords(monkeypatch, checked)
    (client,) = _clients(settings, Clock(), "192.0.2.51")
    statuses = _in_parallel(client, "wrong", 3 * FREE)
    assert len(checked) == FREE + 1  # the one past the free ones is checked, then the counter blocks
    assert sorted(statuses) == [401] * (FREE + 1) + [429] * (2 * FREE - 1)


def test_a_login_that_waits_too_long_for_its_turn_is_refused():
    import itertools

    import anyio

    ticks = itertools.count()  # a second passes each time the clock is read
    turns = rule.LoginTurns(lambda: float(next(ticks)))

    async def main() -> None:
        async with turns.turn("ali", "192.0.2.52"):
            async with turns.turn("ALI", "192.0.2.53"):  # another address: its own turn
                pass
            with pytest.raises(rule.TurnNotTaken):
                async with turns.turn("Ali", "192.0.2.52"):  # the same user, compared case-insensitively
                    pass
        async with turns.turn("ali", "192.0.2.52"):  # given back
            pass

    anyio.run(main)
