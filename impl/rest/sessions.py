"""Login sessions: an opaque token bound to a user, the user's roles and one database.

Sessions live in process memory (a restart logs everyone out) and end on whichever comes first:
``settings.session_ttl_seconds`` after login (the absolute life: use never extends it, so a
stolen token has a bounded life) or ``settings.session_idle_seconds`` after their last use (a
forgotten session does not linger). The clock is injectable so expiry is testable without sleeping.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass
from typing import Callable

from knowspec.impl.context import Caller
from knowspec.impl.docpool.auth import SYSADMIN


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


class SessionStore:
    """Thread-safe token → session map with an absolute and an idle expiry."""

    def __init__(
        self,
        ttl_seconds: float,
        clock: Callable[[], float] = time.time,
        idle_seconds: float | None = None,
    ) -> None:
        self.ttl_seconds = ttl_seconds
        self.idle_seconds = idle_seconds  # None: no idle limit
        self._clock = clock
        self._sessions: dict[str, Session] = {}
        self._last_used: dict[str, float] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings, clock: Callable[[], float] = time.time) -> "SessionStore":
        return cls(settings.session_ttl_seconds, clock=clock, idle_seconds=settings.session_idle_seconds)

    def open(self, user: str, roles: tuple[str, ...], database: str | None) -> Session:
        now = self._clock()
        session = Session(
            token=secrets.token_urlsafe(32),
            user=user,
            roles=tuple(roles),
            database=database,
            expires_at=now + self.ttl_seconds,
        )
        with self._lock:
            self._drop_expired(now)
            self._sessions[session.token] = session
            self._last_used[session.token] = now
        return session

    def get(self, token: str | None) -> Session | None:
        """The live session for ``token`` (its use counted); an expired one is removed: ``None``."""
        if not token:
            return None
        with self._lock:
            session = self._sessions.get(token)
            if session is None:
                return None
            now = self._clock()
            if self._expired(token, session, now):
                self._forget(token)
                return None
            self._last_used[token] = now
            return session

    def close(self, token: str) -> bool:
        with self._lock:
            return self._forget(token)

    def __len__(self) -> int:
        with self._lock:
            self._drop_expired(self._clock())
            return len(self._sessions)

    def _expired(self, token: str, session: Session, now: float) -> bool:
        if now >= session.expires_at:
            return True
        return self.idle_seconds is not None and now >= self._last_used.get(token, now) + self.idle_seconds

    def _forget(self, token: str) -> bool:
        self._last_used.pop(token, None)
        return self._sessions.pop(token, None) is not None

    def _drop_expired(self, now: float) -> None:
        for token in [t for t, s in self._sessions.items() if self._expired(t, s, now)]:
            self._forget(token)
