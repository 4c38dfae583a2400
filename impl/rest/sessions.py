"""Login sessions: an opaque token bound to a user, the user's roles and one database.

Sessions are rows of the catalog database (``auth$session``), not process memory, so every
server process that shares the catalog (the workers of ``serve --workers N``, or several servers)
honours a login made on any of them, and a logout anywhere ends it everywhere. Only a hash of
the token is stored. A session's roles are read from the catalog at each use, not kept from the
login: a role revoked, or a user removed (``user remove`` ends its sessions), counts at once. A
session ends on whichever comes first: ``settings.session_ttl_seconds`` after login (the
absolute life: use never extends it, so a stolen token has a bounded life) or
``settings.session_idle_seconds`` after its last recorded use (a forgotten session does not
linger). A use is recorded at most once per ``touch_seconds`` (at most one write a second per
busy session), so a session may end up to that much early, never late. The clock is injectable
so expiry is testable without sleeping. Without a catalog (tests) the rows live in a private
in-memory database. The rules (tokens, expiry, when a use is recorded) are here; the rows live in
the catalog's store (``docpool/catalog_store.py``: a SQLite file or a PostgreSQL database), whose
writes are single statements that cannot lose a concurrent use: a touch keeps the later of two
uses, and an ended session is deleted only while it is still ended.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from dataclasses import dataclass
from typing import Callable

from knowspec.impl.context import Caller
from knowspec.impl.docpool.auth import holds_sysadmin
from knowspec.impl.docpool.catalog_sqlite import SqliteCatalog
from knowspec.impl.docpool.catalog_store import CatalogStore, CatalogTarget, is_catalog_url, open_catalog
from knowspec.impl.rest.login_throttle import LoginThrottle

MAX_TOUCH_SECONDS = 1.0  # the idle clock of a session is written at most this often
DEFAULT_SESSIONS_PER_USER = 100  # live sessions one user holds (Settings.rest_sessions_per_user)

@dataclass(frozen=True)
class Session:
    token: str
    user: str
    roles: tuple[str, ...]
    database: str | None
    expires_at: float  # absolute end; the idle end moves with each use and lives in the store

    @property
    def is_sysadmin(self) -> bool:
        return holds_sysadmin(self.roles)

    def caller(self) -> Caller:
        """The tool caller for this session: restricted by the ACL, never a stdio caller."""
        return Caller(
            user=self.user, roles=self.roles, database=self.database, unrestricted=False
        )


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class SessionStore:
    """Token → session rows with an absolute and an idle expiry, shared through the catalog."""

    def __init__(
        self,
        ttl_seconds: float,
        clock: Callable[[], float] = time.time,
        idle_seconds: float | None = None,
        catalog: CatalogTarget | None = None,
        per_user: int = DEFAULT_SESSIONS_PER_USER,
    ) -> None:
        self.ttl_seconds = ttl_seconds
        self.per_user = per_user  # a login past it ends the user's least recently used session
        self.idle_seconds = idle_seconds  # None: no idle limit
        self.touch_seconds = MAX_TOUCH_SECONDS if idle_seconds is None else min(MAX_TOUCH_SECONDS, idle_seconds / 100)
        self._clock = clock
        self._catalog = catalog
        # A SQLite file keeps one connection per thread (asked on every request); a PostgreSQL
        # catalog draws from the process's connection pool, found again per use (it may be replaced).
        self._sqlite = (SqliteCatalog(":memory:") if catalog is None else
                        None if is_catalog_url(catalog) else SqliteCatalog(catalog, keep_connections=True))
        self.logins = LoginThrottle(self._store, clock)  # failed-login counters, in the same catalog

    @classmethod
    def from_settings(cls, settings, clock: Callable[[], float] = time.time) -> "SessionStore":
        return cls(settings.session_ttl_seconds, clock=clock, idle_seconds=settings.session_idle_seconds,
                   catalog=settings.catalog, per_user=settings.rest_sessions_per_user)

    def _store(self) -> CatalogStore:
        if self._sqlite is not None:
            return self._sqlite
        assert self._catalog is not None
        return open_catalog(self._catalog)

    def open(self, user: str, roles: tuple[str, ...], database: str | None,
             credential: bytes | None = None) -> Session | None:
        """A new session; with ``credential`` (the password hash a login checked) only while the
        user still exists with it, else ``None`` (changed or removed since the check)."""
        now = self._clock()
        session = Session(
            token=secrets.token_urlsafe(32),
            user=user,
            roles=tuple(roles),
            database=database,
            expires_at=now + self.ttl_seconds,
        )
        with self._store().transaction() as rows:
            rows.remove_ended_sessions(now, self.idle_seconds)
            added = rows.add_session(_token_hash(session.token), user, json.dumps(list(roles)), database,
                                     session.expires_at, now, credential)
            if added:  # a user logging in without ever logging out holds a bounded number of rows
                rows.keep_recent_sessions_of(user, self.per_user)
        return session if added else None

    def get(self, token: str | None) -> Session | None:
        """The live session for ``token`` (its use counted); an expired one is removed: ``None``."""
        if not token:
            return None
        key = _token_hash(token)
        with self._store().transaction() as rows:
            row = rows.session(key)
            if row is None:
                return None
            user, roles, database, expires_at, last_used = row
            now = self._clock()
            if self.ended(expires_at, last_used, now):
                rows.remove_session_if_ended(key, now, self.idle_seconds)
                return None
            if now - last_used >= self.touch_seconds:
                rows.touch_session(key, now)
        # the roles as granted now (the store reads them with the row): a revoked role is gone at once
        return Session(token=token, user=user, roles=tuple(json.loads(roles)), database=database,
                       expires_at=expires_at)

    def close(self, token: str) -> bool:
        with self._store().transaction() as rows:
            return rows.remove_session(_token_hash(token))

    def __len__(self) -> int:
        with self._store().transaction() as rows:
            rows.remove_ended_sessions(self._clock(), self.idle_seconds)
            return rows.session_count()

    def ended(self, expires_at: float, last_used: float, now: float) -> bool:
        """Whether a session row has ended at ``now`` (``catalog_store.ended_condition`` is the
        same rule in SQL, for the rows not read)."""
        if now >= expires_at:
            return True
        return self.idle_seconds is not None and now >= last_used + self.idle_seconds
