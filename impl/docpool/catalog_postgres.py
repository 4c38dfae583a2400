"""The catalog's rows in a PostgreSQL database (``--catalog postgresql://...``), schema ``knowspec$catalog``.

Several servers on several machines that name the same database share users, roles, the
database registry and REST sessions: a login on one is honoured by all, a logout or a revoked
role is seen by the next request anywhere. The schema may sit in the same database as a
PostgreSQL document pool (``ivd$docs``); they never touch each other's tables.

Connections come from one ``psycopg_pool.ConnectionPool`` per URL in the runtime's
``docpool.catalog_pools`` cache; values are always bound, never formatted into SQL. An
``atomic`` block is one PostgreSQL transaction (READ COMMITTED), committed when it ends; any
other block runs each statement in autocommit.
A session's use is recorded with ``greatest(last_used, now)`` in one UPDATE and an ended
session is deleted only while it is still ended, so concurrent requests on several servers
never lose a newer use. Names compare ASCII case-insensitively, like SQLite's ``nocase``: each
table keys its rows by ``ascii_lower(name)`` and keeps the spelling it was given. The tables are
created the first time a process opens the catalog, under an advisory lock so that servers
starting together do not race.

A catalog that stops answering is a 503, soon: a statement may run ``STATEMENT_TIMEOUT``, TCP
keepalives and ``tcp_user_timeout`` end a connection whose peer vanished (unless the URL sets
them), a pooled connection is checked before use (a restarted server had failed the first
requests after it came back), and while the catalog is unreachable one request at a time waits
for it (``Outage``) while the others are refused at once (each had waited ``CONNECT_TIMEOUT``).
A server that is reachable but frozen (stopped, not dead) is still waited for.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator, Sequence

from knowspec.impl import runtime as process
from knowspec.impl.docpool.catalog_store import (
    CatalogUnavailable, DatabaseRow, LoginCounterRow, SessionRow, UserRow, ended_condition, first,
)
from knowspec.impl.extras import require
from knowspec.impl.rules.fold import ascii_lower

ASCII_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

SCHEMA = "knowspec$catalog"
CONNECT_TIMEOUT = 10.0  # seconds a transaction waits for a connection
MAX_CONNECTIONS = 4
STATEMENT_TIMEOUT = "15s"  # catalog statements are single-row: longer means a stuck lock or server
# libpq's settings for a peer that vanishes without closing (a partition), unless the URL has its own
PEER_TIMEOUTS = {"keepalives": "1", "keepalives_idle": "10", "keepalives_interval": "5", "keepalives_count": "3",
                 "tcp_user_timeout": "15000"}
SCHEMA_LOCK = 7_315_420_118  # pg_advisory_xact_lock key held while the tables are created

SCHEMA_SQL = f"""
create schema if not exists "{SCHEMA}";
set local search_path to "{SCHEMA}";
create table if not exists "db$database" (
    name_key     text primary key,             -- ascii_lower(name)
    name         text not null,
    storage      text not null,
    dsn          text not null default '',
    documents    text not null default '',
    documents_db text
);
create table if not exists "auth$user" (
    name_key   text primary key,
    name       text not null,
    salt       bytea not null,
    hash       bytea not null,
    params     text not null,
    created_at timestamptz not null default now()
);
create table if not exists "auth$role" (
    name_key    text primary key,
    name        text not null,
    description text not null default ''
);
create table if not exists "auth$user_role" (
    user_key  text not null references "auth$user"(name_key) on delete cascade,
    role_key  text not null references "auth$role"(name_key) on delete cascade,
    role_name text not null,                   -- the spelling granted
    primary key (user_key, role_key)
);
create table if not exists "auth$session" (
    token_hash text primary key,
    user_name  text not null,
    roles      text not null,
    database   text,
    expires_at double precision not null,
    last_used  double precision not null
);
create index if not exists "auth$session_expires" on "auth$session"(expires_at);
create table if not exists "auth$login_counter" (
    key          text primary key,
    attempts     integer not null,
    last_attempt double precision not null
);
create index if not exists "auth$login_counter_last" on "auth$login_counter"(last_attempt);
insert into "auth$role"(name_key, name, description) values
    ('sysadmin', 'SYSADMIN', 'may run administrative commands (IMPORTDOC, ALTER DATABASE) and write OKF bundles'),
    ('writer', 'WRITER', 'may call the OKF write and apply tools over HTTP')
    on conflict do nothing;
"""


class PostgresRows:
    """``CatalogRows`` over one connection inside its transaction."""

    def __init__(self, con) -> None:
        self.con = con

    def _all(self, sql: str, params: tuple = ()) -> list[tuple]:
        return [tuple(r) for r in self.con.execute(sql, params).fetchall()]

    def _run(self, sql: str, params: tuple = ()) -> int:
        return self.con.execute(sql, params).rowcount

    # db$database
    def database(self, name: str) -> DatabaseRow | None:
        if "\x00" in name:  # PostgreSQL text cannot hold a NUL: no row has this name
            return None
        return first(self._all('select name, storage, dsn, documents, documents_db from "db$database" '
                               "where name_key = %s", (ascii_lower(name),)))

    def databases(self) -> list[DatabaseRow]:
        return self._all('select name, storage, dsn, documents, documents_db from "db$database" '
                         "order by name_key collate \"C\", name collate \"C\"")

    def put_database(self, name: str, storage: str, dsn: str) -> None:
        self._run('insert into "db$database"(name_key, name, storage, dsn) values (%s, %s, %s, %s) '
                  "on conflict (name_key) do update set storage = excluded.storage, dsn = excluded.dsn",
                  (ascii_lower(name), name, storage, dsn))

    def set_documents(self, name: str, documents: str, documents_db: str | None) -> None:
        self._run('update "db$database" set documents = %s, documents_db = %s where name_key = %s',
                  (documents, documents_db, ascii_lower(name)))

    # auth$
    def user(self, name: str) -> UserRow | None:
        row = first(self._all('select name, salt, hash, params from "auth$user" where name_key = %s',
                              (ascii_lower(name),)))
        return None if row is None else (row[0], bytes(row[1]), bytes(row[2]), row[3])

    def user_names(self) -> list[str]:
        return [r[0] for r in self._all('select name from "auth$user" order by name_key collate "C", name collate "C"')]

    def add_user(self, name: str, salt: bytes, digest: bytes, params: str) -> bool:
        return self._run('insert into "auth$user"(name_key, name, salt, hash, params) values (%s, %s, %s, %s, %s) '
                         "on conflict do nothing", (ascii_lower(name), name, salt, digest, params)) > 0

    def roles_of(self, user: str) -> list[str]:
        return [r[0] for r in self._all('select role_name from "auth$user_role" where user_key = %s '
                                        'order by role_key collate "C"', (ascii_lower(user),))]

    def add_role(self, role: str) -> None:
        self._run('insert into "auth$role"(name_key, name) values (%s, %s) on conflict do nothing',
                  (ascii_lower(role), role))

    def add_user_role(self, user: str, role: str) -> None:
        self._run('insert into "auth$user_role"(user_key, role_key, role_name) values (%s, %s, %s) '
                  "on conflict do nothing", (ascii_lower(user), ascii_lower(role), role))

    def remove_user_role(self, user: str, role: str) -> bool:
        return self._run('delete from "auth$user_role" where user_key = %s and role_key = %s',
                         (ascii_lower(user), ascii_lower(role))) > 0

    def set_password(self, user: str, salt: bytes, digest: bytes, params: str) -> None:
        self._run('update "auth$user" set salt = %s, hash = %s, params = %s where name_key = %s',
                  (salt, digest, params, ascii_lower(user)))

    def remove_user(self, user: str) -> None:
        self._run('delete from "auth$user_role" where user_key = %s', (ascii_lower(user),))
        self._run('delete from "auth$user" where name_key = %s', (ascii_lower(user),))

    # auth$session
    def add_session(self, key: str, user: str, roles: str, database: str | None,
                    expires_at: float, now: float, credential: bytes | None = None) -> bool:
        if credential is None:
            self._run('insert into "auth$session"(token_hash, user_name, roles, database, expires_at, last_used) '
                      "values (%s, %s, %s, %s, %s, %s)", (key, user, roles, database, expires_at, now))
            return True
        # FOR SHARE: a removal or a new password waits for this login's commit, then ends its session
        return self._run(
            'insert into "auth$session"(token_hash, user_name, roles, database, expires_at, last_used) '
            'select %s, %s, %s, %s, %s, %s from "auth$user" where name_key = %s and hash = %s for share',
            (key, user, roles, database, expires_at, now, ascii_lower(user), credential)) > 0

    def session(self, key: str) -> SessionRow | None:
        # the user's key is its name lower-cased in ASCII only (``ascii_lower``), as translate() does
        return first(self._all(
            "select s.user_name, coalesce((select json_agg(r.role_name order by r.role_key collate \"C\")::text "
            'from "auth$user_role" r where r.user_key = translate(s.user_name, %s, %s)), \'[]\'), '
            's.database, s.expires_at, s.last_used from "auth$session" s where s.token_hash = %s',
            (ASCII_UPPER, ASCII_UPPER.lower(), key)))

    def touch_session(self, key: str, now: float) -> None:
        self._run('update "auth$session" set last_used = greatest(last_used, %s) where token_hash = %s', (now, key))

    def remove_session(self, key: str) -> bool:
        return self._run('delete from "auth$session" where token_hash = %s', (key,)) > 0

    def remove_sessions_of(self, user: str) -> None:
        self._run('delete from "auth$session" where translate(user_name, %s, %s) = %s',
                  (ASCII_UPPER, ASCII_UPPER.lower(), ascii_lower(user)))

    def keep_recent_sessions_of(self, user: str, most: int) -> None:
        same_user = "translate(user_name, %s, %s) = %s"
        who = (ASCII_UPPER, ASCII_UPPER.lower(), ascii_lower(user))
        self._run(f'delete from "auth$session" where {same_user} and token_hash not in (select token_hash '
                  f'from "auth$session" where {same_user} order by last_used desc, expires_at desc, token_hash '
                  "limit %s)", (*who, *who, most))

    def remove_session_if_ended(self, key: str, now: float, idle_seconds: float | None) -> bool:
        ended, params = ended_condition(now, idle_seconds, "%s")
        return self._run(f'delete from "auth$session" where token_hash = %s and {ended}', (key, *params)) > 0

    def remove_ended_sessions(self, now: float, idle_seconds: float | None) -> None:
        ended, params = ended_condition(now, idle_seconds, "%s")
        self._run(f'delete from "auth$session" where {ended}', params)

    def session_count(self) -> int:
        return self._all('select count(*) from "auth$session"')[0][0]

    # auth$login_counter: rows made first, then locked (FOR UPDATE) for the rest of the transaction
    def lock_login_counters(self, keys: Sequence[str]) -> dict[str, LoginCounterRow]:
        out = {}
        for key in keys:
            self._run('insert into "auth$login_counter"(key, attempts, last_attempt) values (%s, 0, 0) '
                      "on conflict do nothing", (key,))
            attempts, last_attempt = self._all('select attempts, last_attempt from "auth$login_counter" '
                                               "where key = %s for update", (key,))[0]
            out[key] = (attempts, last_attempt)
        return out

    def put_login_counter(self, key: str, attempts: int, last_attempt: float) -> None:
        self._run('update "auth$login_counter" set attempts = %s, last_attempt = %s where key = %s',
                  (attempts, last_attempt, key))

    def remove_login_counter(self, key: str) -> None:
        self._run('delete from "auth$login_counter" where key = %s', (key,))

    def remove_idle_login_counters(self, before: float) -> None:
        self._run('delete from "auth$login_counter" where last_attempt < %s', (before,))


class Outage:
    """Whether the catalog is known to be unreachable. While it is, one request at a time (the
    probe) waits for a connection; the others are refused at once."""

    def __init__(self) -> None:
        self.down = False
        self._probing = False
        self._lock = threading.Lock()

    def may_wait(self) -> bool:
        """Go ahead (while down: as the probe), or False: refuse without waiting."""
        with self._lock:
            if not self.down:
                return True
            if self._probing:
                return False
            self._probing = True
            return True

    def answered(self) -> None:
        with self._lock:
            self.down = self._probing = False

    def unreachable(self) -> None:
        with self._lock:
            self.down, self._probing = True, False


class PostgresCatalog:
    """The catalog in the PostgreSQL database named by ``url``, over its connection pool."""

    def __init__(self, url: str, pool) -> None:
        self.target = url
        self.pool = pool
        self.outage = Outage()
        self._errors = (require("psycopg").Error, require("psycopg_pool").PoolTimeout)
        self._unreachable = (require("psycopg").OperationalError, require("psycopg_pool").PoolTimeout)

    def exists(self) -> bool:
        return True  # the tables were made when the pool opened

    @contextmanager
    def transaction(self, *, atomic: bool = False) -> Iterator[PostgresRows]:
        """An atomic block is one transaction; any other runs each statement on its own
        (autocommit: one round trip each, as in the SQLite store), which the session rules allow
        because each of their writes is a single statement; nor do two logins' sweeps of ended
        sessions hold each other's row locks for longer than one statement."""
        if not self.outage.may_wait():
            raise CatalogUnavailable("the PostgreSQL catalog is unavailable (unreachable; another request is "
                                     "waiting for it)")
        try:
            with self.pool.connection(timeout=CONNECT_TIMEOUT) as con:
                con.autocommit = not atomic
                try:
                    yield PostgresRows(con)
                finally:
                    if con.autocommit and not con.closed:
                        con.autocommit = False
        except self._errors as exc:
            (self.outage.unreachable if isinstance(exc, self._unreachable) else self.outage.answered)()
            raise _unavailable(exc) from exc
        except BaseException:
            self.outage.answered()
            raise
        self.outage.answered()

    def close(self) -> None:
        self.pool.close()


def _unavailable(exc: BaseException) -> CatalogUnavailable:
    """The driver's words, never the URL (it may carry a password)."""
    return CatalogUnavailable(f"the PostgreSQL catalog is unavailable ({type(exc).__name__}: {_first_line(exc)})")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0]


def _configure(con) -> None:
    con.execute(f'set search_path to "{SCHEMA}"')
    con.execute(f"set statement_timeout to '{STATEMENT_TIMEOUT}'")
    con.commit()


def peer_timeouts(url: str) -> dict[str, str]:
    """``PEER_TIMEOUTS`` the URL does not set itself."""
    present = require("psycopg").conninfo.conninfo_to_dict(url)
    return {k: v for k, v in PEER_TIMEOUTS.items() if k not in present}


def _open(url: str) -> PostgresCatalog:
    psycopg = require("psycopg")
    ConnectionPool = require("psycopg_pool").ConnectionPool

    try:
        timeouts = peer_timeouts(url)
        with psycopg.connect(url, connect_timeout=int(CONNECT_TIMEOUT), **timeouts) as con:  # commits at the end
            con.execute("select pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            con.execute(SCHEMA_SQL, prepare=False)
    except psycopg.Error as exc:
        raise _unavailable(exc) from exc
    return PostgresCatalog(url, ConnectionPool(url, min_size=0, max_size=MAX_CONNECTIONS, configure=_configure,
                                               kwargs=timeouts, check=ConnectionPool.check_connection, open=True))


def _catalogs(runtime: process.Runtime):
    """Open catalogs per URL (the runtime's ``docpool.catalog_pools``), their pools closed when dropped."""
    return runtime.cache("docpool.catalog_pools", max_entries=4, dispose=PostgresCatalog.close)


def postgres_catalog(url: str) -> PostgresCatalog:
    """The catalog at ``url``, over this process's connection pool for it (opened on first use)."""
    catalogs = _catalogs(process.current())
    found = catalogs.get(url, None, lambda: _open(url))
    if found.pool.closed:
        catalogs.pop(url)
        found = catalogs.get(url, None, lambda: _open(url))
    return found


def close_pools() -> None:
    """Close every catalog connection pool (tests, shutdown)."""
    _catalogs(process.current()).clear()
