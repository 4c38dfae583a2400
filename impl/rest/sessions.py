"""Login sessions: an opaque token bound to a user, the user's roles and one database.

Sessions are rows of the catalog database (``auth$session``), not process memory, so every
server process that shares the catalog (the workers of ``serve --workers N``, or several servers)
honours a login made on any of them, and a logout anywhere ends it everywhere. Only a hash of
the token is stored. A session ends on whichever comes first: ``settings.session_ttl_seconds``
after login (the absolute life: use never extends it, so a stolen token has a bounded life) or
``settings.session_idle_seconds`` after its last recorded use (a forgotten session does not
linger). A use is recorded at most once per ``touch_seconds`` (at most one write a second per
busy session), so a session may end up to that much early, never late. The clock is injectable
so expiry is testable without sleeping. Without a catalog path (tests) the rows live in a private
in-memory database.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from knowspec.impl.context import Caller
from knowspec.impl.docpool.auth import SYSADMIN

MAX_TOUCH_SECONDS = 1.0  # the idle clock of a session is written at most this often

_SCHEMA = """
create table if not exists "auth$session" (
    token_hash text primary key,      -- sha256 of the bearer token; the token itself is never stored
    user_name  text not null,
    roles      text not null,         -- JSON list: the roles held at login
    database   text,
    expires_at real not null,         -- the absolute end
    last_used  real not null          -- the idle end is last_used + the idle life
);
create index if not exists "auth$session_expires" on "auth$session"(expires_at);
"""


@dataclass(frozen=True)
class Session:
    token: str
    user: str
    roles: tuple[str, ...]
    database: str | None
    expires_at: float  # absolute end; the idle end moves with each use and lives in the store

    @property
    def is_sysadmin(self) -> bool:
        return any(r.upper() == SYSADMIN for r in self.roles)

    def caller(self) -> Caller:
        """The tool caller for this session: restricted by the ACL, never a stdio caller."""
        return Caller(
            user=self.user, roles=self.roles, database=self.database, unrestricted=False
        )


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _connect(target: str) -> sqlite3.Connection:
    if target != ":memory:":
        Path(target).parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(target, isolation_level=None, check_same_thread=False, timeout=30)
    con.execute("pragma busy_timeout = 30000")
    con.executescript(_SCHEMA)
    return con


class SessionStore:
    """Token → session rows with an absolute and an idle expiry, shared through the catalog."""

    def __init__(
        self,
        ttl_seconds: float,
        clock: Callable[[], float] = time.time,
        idle_seconds: float | None = None,
        catalog_path: Path | str | None = None,
    ) -> None:
        self.ttl_seconds = ttl_seconds
        self.idle_seconds = idle_seconds  # None: no idle limit
        self.touch_seconds = MAX_TOUCH_SECONDS if idle_seconds is None else min(MAX_TOUCH_SECONDS, idle_seconds / 100)
        self._clock = clock
        self._path = None if catalog_path is None else str(Path(catalog_path).absolute())
        self._local = threading.local()   # one connection per thread for a catalog file
        self._lock = threading.Lock()     # the in-memory database: one connection, taken in turn
        self._memory = _connect(":memory:") if self._path is None else None

    @classmethod
    def from_settings(cls, settings, clock: Callable[[], float] = time.time) -> "SessionStore":
        return cls(settings.session_ttl_seconds, clock=clock, idle_seconds=settings.session_idle_seconds,
                   catalog_path=settings.catalog_path)

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        if self._memory is not None:
            with self._lock:
                yield self._memory
            return
        con = getattr(self._local, "con", None)
        if con is None:
            assert self._path is not None
            con = self._local.con = _connect(self._path)
        yield con

    def open(self, user: str, roles: tuple[str, ...], database: str | None) -> Session:
        now = self._clock()
        session = Session(
            token=secrets.token_urlsafe(32),
            user=user,
            roles=tuple(roles),
            database=database,
            expires_at=now + self.ttl_seconds,
        )
        with self._db() as con:
            self._drop_expired(con, now)
            con.execute('insert into "auth$session"(token_hash, user_name, roles, database, expires_at, last_used) '
                        "values (?, ?, ?, ?, ?, ?)",
                        (_token_hash(session.token), user, json.dumps(list(roles)), database,
                         session.expires_at, now))
        return session

    def get(self, token: str | None) -> Session | None:
        """The live session for ``token`` (its use counted); an expired one is removed: ``None``."""
        if not token:
            return None
        key = _token_hash(token)
        with self._db() as con:
            row = con.execute('select user_name, roles, database, expires_at, last_used from "auth$session" '
                              "where token_hash = ?", (key,)).fetchone()
            if row is None:
                return None
            user, roles, database, expires_at, last_used = row
            now = self._clock()
            if self._expired(expires_at, last_used, now):
                con.execute('delete from "auth$session" where token_hash = ?', (key,))
                return None
            if now - last_used >= self.touch_seconds:
                con.execute('update "auth$session" set last_used = max(last_used, ?) where token_hash = ?', (now, key))
        return Session(token=token, user=user, roles=tuple(json.loads(roles)), database=database,
                       expires_at=expires_at)

    def close(self, token: str) -> bool:
        with self._db() as con:
            return con.execute('delete from "auth$session" where token_hash = ?', (_token_hash(token),)).rowcount > 0

    def __len__(self) -> int:
        with self._db() as con:
            self._drop_expired(con, self._clock())
            return con.execute('select count(*) from "auth$session"').fetchone()[0]

    def _expired(self, expires_at: float, last_used: float, now: float) -> bool:
        if now >= expires_at:
            return True
        return self.idle_seconds is not None and now >= last_used + self.idle_seconds

    def _drop_expired(self, con: sqlite3.Connection, now: float) -> None:
        if self.idle_seconds is None:
            con.execute('delete from "auth$session" where expires_at <= ?', (now,))
        else:
            con.execute('delete from "auth$session" where expires_at <= ? or last_used + ? <= ?',
                        (now, self.idle_seconds, now))
