"""Login sessions: an opaque token bound to a user, the user's roles and one database.

Sessions live in process memory (a restart logs everyone out) and expire
``settings.session_ttl_seconds`` after login; each use does not extend them, so a stolen token
has a bounded life. The clock is injectable so expiry is testable without sleeping.
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
    expires_at: float

    @property
    def is_sysadmin(self) -> bool:
        return any(r.upper() == SYSADMIN for r in self.roles)

    def caller(self) -> Caller:
        """The tool caller for this session: restricted by the ACL, never a stdio caller."""
        return Caller(
            user=self.user, roles=self.roles, database=self.database, unrestricted=False
        )


class SessionStore:
    """Thread-safe token → session map with expiry."""

    def __init__(self, ttl_seconds: float, clock: Callable[[], float] = time.time) -> None:
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    def open(self, user: str, roles: tuple[str, ...], database: str | None) -> Session:
        session = Session(
            token=secrets.token_urlsafe(32),
            user=user,
            roles=tuple(roles),
            database=database,
            expires_at=self._clock() + self.ttl_seconds,
        )
        with self._lock:
            self._drop_expired()
            self._sessions[session.token] = session
        return session

    def get(self, token: str | None) -> Session | None:
        """The live session for ``token``; an expired one is removed and answers ``None``."""
        if not token:
            return None
        with self._lock:
            session = self._sessions.get(token)
            if session is None:
                return None
            if self._clock() >= session.expires_at:
                del self._sessions[token]
                return None
            return session

    def close(self, token: str) -> bool:
        with self._lock:
            return self._sessions.pop(token, None) is not None

    def __len__(self) -> int:
        with self._lock:
            self._drop_expired()
            return len(self._sessions)

    def _drop_expired(self) -> None:
        now = self._clock()
        for token in [t for t, s in self._sessions.items() if now >= s.expires_at]:
            del self._sessions[token]
