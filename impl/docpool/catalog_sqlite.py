"""The catalog's rows in one SQLite file (the default: ``APPDIR/catalog.db``).

Every process that opens the same file shares the rows (the workers of ``serve --workers N``,
or several servers on one machine). Tables are created idempotently on every connection. A
block that is not ``atomic`` runs its statements in autocommit (each sees the latest commit); an
atomic one takes the write lock first (``begin immediate``) so two processes never deadlock
upgrading a read lock.
``":memory:"`` is a private database behind one lock (tests without a catalog file).

The file holds password hashes and session digests, so only its owner may read it: it is made
with mode 0600, and a catalog made earlier with a wider mode is narrowed when opened. A file that
cannot be opened or written (no descriptor left, a lock held past the busy timeout, a full disk)
is ``CatalogUnavailable``: a caller is told to retry, as with a PostgreSQL catalog that is down.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from knowspec.impl.docpool.catalog_store import (
    CatalogUnavailable, DatabaseRow, LoginCounterRow, SessionRow, UserRow, ended_condition, first,
)

BUSY_TIMEOUT_MS = 30_000

SCHEMA = """
create table if not exists "db$database" (
    name         text primary key collate nocase,
    storage      text not null,                -- SQLITE | POSTGRESQL | FIREBIRD | (anything else: unsupported)
    dsn          text not null default '',     -- SQLite: the database file; others: connection string
    documents    text not null default '',     -- '' (never set) | INTERNAL | DATABASE | OFF
    documents_db text                          -- the other database when documents = DATABASE
);
create table if not exists "auth$user" (
    name       text primary key collate nocase,
    salt       blob not null,
    hash       blob not null,
    params     text not null,
    created_at text not null default (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);
create table if not exists "auth$role" (
    name        text primary key collate nocase,
    description text not null default ''
);
create table if not exists "auth$user_role" (
    user_name text not null collate nocase references "auth$user"(name) on delete cascade,
    role_name text not null collate nocase references "auth$role"(name) on delete cascade,
    primary key (user_name, role_name)
);
create table if not exists "auth$session" (
    token_hash text primary key,      -- sha256 of the bearer token; the token itself is never stored
    user_name  text not null,
    roles      text not null,         -- JSON list: the roles held at login (each use reads them afresh)
    database   text,
    expires_at real not null,         -- the absolute end
    last_used  real not null          -- the idle end is last_used + the idle life
);
create index if not exists "auth$session_expires" on "auth$session"(expires_at);
create table if not exists "auth$login_counter" (
    key          text primary key,    -- a digest of a user name and an address, or of an address (login_throttle.keys_for)
    attempts     integer not null,
    last_attempt real not null
);
create index if not exists "auth$login_counter_last" on "auth$login_counter"(last_attempt);
"""

SEED_ROLES = """
insert or ignore into "auth$role"(name, description)
    values ('SYSADMIN', 'may run administrative commands (IMPORTDOC, ALTER DATABASE) and write OKF bundles');
insert or ignore into "auth$role"(name, description)
    values ('WRITER', 'may call the OKF write and apply tools over HTTP');
"""



def owner_only(path: Path) -> None:
    """Make ``path`` an empty file readable by its owner alone, or narrow an existing one of
    this user's to that (SQLite gives its journal and WAL files the database file's mode)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        return
    except FileExistsError:
        pass
    try:
        info = path.stat()
        if stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) & 0o077 and info.st_uid == os.getuid():
            path.chmod(stat.S_IMODE(info.st_mode) & 0o700)
    except (OSError, AttributeError):  # not ours to change, or no owners here (Windows)
        pass


def connect(target: Path | str, *, any_thread: bool = False) -> sqlite3.Connection:
    """An autocommit connection with the catalog's tables in place; ``any_thread`` for one that
    several threads use in turn (under their own lock)."""
    if str(target) != ":memory:":
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        owner_only(Path(target))
    con = sqlite3.connect(str(target), isolation_level=None, check_same_thread=not any_thread,
                          timeout=BUSY_TIMEOUT_MS / 1000)
    con.execute(f"pragma busy_timeout = {BUSY_TIMEOUT_MS}")
    con.execute("pragma foreign_keys = on")
    con.executescript(SCHEMA)
    if con.execute('select count(*) from "auth$role" where name in (\'SYSADMIN\', \'WRITER\')').fetchone()[0] < 2:
        con.executescript(SEED_ROLES)  # only then: an opened catalog is not written to
    return con


class SqliteRows:
    """``CatalogRows`` over one SQLite connection."""

    def __init__(self, con: sqlite3.Connection) -> None:
        self.con = con

    def _all(self, sql: str, params: tuple = ()) -> list[tuple]:
        return self.con.execute(sql, params).fetchall()

    # db$database
    def database(self, name: str) -> DatabaseRow | None:
        return first(self._all('select name, storage, dsn, documents, documents_db from "db$database" '
                               "where name = ?", (name,)))

    def databases(self) -> list[DatabaseRow]:
        return self._all('select name, storage, dsn, documents, documents_db from "db$database" order by name')

    def put_database(self, name: str, storage: str, dsn: str) -> None:
        self.con.execute('insert into "db$database"(name, storage, dsn) values (?, ?, ?) '
                         "on conflict(name) do update set storage = excluded.storage, dsn = excluded.dsn",
                         (name, storage, dsn))

    def set_documents(self, name: str, documents: str, documents_db: str | None) -> None:
        self.con.execute('update "db$database" set documents = ?, documents_db = ? where name = ?',
                         (documents, documents_db, name))

    # auth$
    def user(self, name: str) -> UserRow | None:
        return first(self._all('select name, salt, hash, params from "auth$user" where name = ?',
                               (name,)))

    def user_names(self) -> list[str]:
        return [r[0] for r in self._all('select name from "auth$user" order by name')]

    def add_user(self, name: str, salt: bytes, digest: bytes, params: str) -> bool:
        try:
            self.con.execute('insert into "auth$user"(name, salt, hash, params) values (?, ?, ?, ?)',
                             (name, salt, digest, params))
        except sqlite3.IntegrityError:
            return False
        return True

    def roles_of(self, user: str) -> list[str]:
        return [r[0] for r in self._all('select role_name from "auth$user_role" where user_name = ? '
                                        "order by role_name", (user,))]

    def add_role(self, role: str) -> None:
        self.con.execute('insert or ignore into "auth$role"(name) values (?)', (role,))

    def add_user_role(self, user: str, role: str) -> None:
        self.con.execute('insert or ignore into "auth$user_role"(user_name, role_name) values (?, ?)', (user, role))

    def remove_user_role(self, user: str, role: str) -> bool:
        return self.con.execute('delete from "auth$user_role" where user_name = ? and role_name = ?',
                                (user, role)).rowcount > 0

    def set_password(self, user: str, salt: bytes, digest: bytes, params: str) -> None:
        self.con.execute('update "auth$user" set salt = ?, hash = ?, params = ? where name = ?',
                         (salt, digest, params, user))

    def remove_user(self, user: str) -> None:
        self.con.execute('delete from "auth$user_role" where user_name = ?', (user,))
        self.con.execute('delete from "auth$user" where name = ?', (user,))

    # auth$session
    def add_session(self, key: str, user: str, roles: str, database: str | None,
                    expires_at: float, now: float, credential: bytes | None = None) -> bool:
        if credential is None:
            self.con.execute('insert into "auth$session"(token_hash, user_name, roles, database, expires_at, '
                             "last_used) values (?, ?, ?, ?, ?, ?)", (key, user, roles, database, expires_at, now))
            return True
        return self.con.execute(
            'insert into "auth$session"(token_hash, user_name, roles, database, expires_at, last_used) '
            'select ?, ?, ?, ?, ?, ? from "auth$user" where name = ? and hash = ?',
            (key, user, roles, database, expires_at, now, user, credential)).rowcount > 0

    def session(self, key: str) -> SessionRow | None:
        return first(self._all(
            'select s.user_name, (select json_group_array(role_name) from (select role_name from "auth$user_role" '
            "where user_name = s.user_name order by role_name)), s.database, s.expires_at, s.last_used "
            'from "auth$session" s where s.token_hash = ?', (key,)))

    def touch_session(self, key: str, now: float) -> None:
        self.con.execute('update "auth$session" set last_used = max(last_used, ?) where token_hash = ?', (now, key))

    def remove_session(self, key: str) -> bool:
        return self.con.execute('delete from "auth$session" where token_hash = ?', (key,)).rowcount > 0

    def remove_sessions_of(self, user: str) -> None:
        self.con.execute('delete from "auth$session" where user_name = ? collate nocase', (user,))

    def keep_recent_sessions_of(self, user: str, most: int) -> None:
        self.con.execute('delete from "auth$session" where user_name = ? collate nocase and token_hash not in '
                         '(select token_hash from "auth$session" where user_name = ? collate nocase '
                         "order by last_used desc, expires_at desc, token_hash limit ?)", (user, user, most))

    def remove_session_if_ended(self, key: str, now: float, idle_seconds: float | None) -> bool:
        ended, params = ended_condition(now, idle_seconds, "?")
        return self.con.execute(f'delete from "auth$session" where token_hash = ? and {ended}',
                                (key, *params)).rowcount > 0

    def remove_ended_sessions(self, now: float, idle_seconds: float | None) -> None:
        ended, params = ended_condition(now, idle_seconds, "?")
        self.con.execute(f'delete from "auth$session" where {ended}', params)

    def session_count(self) -> int:
        return self.con.execute('select count(*) from "auth$session"').fetchone()[0]

    # auth$login_counter (an atomic block already holds the file's write lock)
    def lock_login_counters(self, keys: Sequence[str]) -> dict[str, LoginCounterRow]:
        out = {}
        for key in keys:
            self.con.execute('insert or ignore into "auth$login_counter"(key, attempts, last_attempt) values (?, 0, 0)',
                             (key,))
            out[key] = self.con.execute('select attempts, last_attempt from "auth$login_counter" where key = ?',
                                        (key,)).fetchone()
        return out

    def put_login_counter(self, key: str, attempts: int, last_attempt: float) -> None:
        self.con.execute('update "auth$login_counter" set attempts = ?, last_attempt = ? where key = ?',
                         (attempts, last_attempt, key))

    def remove_login_counter(self, key: str) -> None:
        self.con.execute('delete from "auth$login_counter" where key = ?', (key,))

    def remove_idle_login_counters(self, before: float) -> None:
        self.con.execute('delete from "auth$login_counter" where last_attempt < ?', (before,))


class SqliteCatalog:
    """A catalog file. ``keep_connections``: one connection per thread stays open (the session
    store, asked on every request); otherwise each transaction opens and closes its own."""

    def __init__(self, target: Path | str, *, keep_connections: bool = False) -> None:
        self.memory = str(target) == ":memory:"
        self.target = ":memory:" if self.memory else str(Path(target).absolute())
        self._keep = keep_connections
        self._local = threading.local()
        self._lock = threading.Lock()
        self._shared = connect(":memory:", any_thread=True) if self.memory else None

    def exists(self) -> bool:
        return self.memory or Path(self.target).is_file()

    @contextmanager
    def transaction(self, *, atomic: bool = False) -> Iterator[SqliteRows]:
        try:
            yield from self._transaction(atomic)
        except sqlite3.OperationalError as exc:  # the file's path stays in the server's log
            raise CatalogUnavailable(f"the SQLite catalog is unavailable (OperationalError: {exc})") from exc

    def _connect(self) -> sqlite3.Connection:
        try:
            return connect(self.target)
        except OSError as exc:  # its folder cannot be made, or no descriptor is left
            raise CatalogUnavailable(f"the SQLite catalog is unavailable ({type(exc).__name__}: {exc.strerror})") from exc

    def _transaction(self, atomic: bool) -> Iterator[SqliteRows]:
        if self._shared is not None:
            with self._lock:
                yield from _run(self._shared, atomic)
            return
        if self._keep:
            con = getattr(self._local, "con", None)
            if con is None:
                con = self._local.con = self._connect()
            yield from _run(con, atomic)
            return
        con = self._connect()
        try:
            yield from _run(con, atomic)
        finally:
            con.close()


def _run(con: sqlite3.Connection, atomic: bool) -> Iterator[SqliteRows]:
    if not atomic:
        yield SqliteRows(con)
        return
    con.execute("begin immediate")
    try:
        yield SqliteRows(con)
    except BaseException:
        con.execute("rollback")
        raise
    con.execute("commit")
