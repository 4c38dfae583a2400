"""Where the catalog's rows live: a SQLite file or a PostgreSQL database, chosen by its target.

The catalog (the seed's MASTER: the ``db$`` database registry, the ``auth$`` users and roles,
the REST ``auth$session`` rows and failed-login counters) is read and written by ``catalog.py``,
``auth.py``, ``rest/sessions.py`` and ``rest/login_throttle.py``, which hold every rule (name
checks, password hashing, expiry, throttling, the seed's errors). A store only keeps rows:
``open_catalog(target)`` answers one for a file path (SQLite, ``catalog_sqlite.py``) or a
``postgresql://`` URL (``catalog_postgres.py``), and
``store.transaction(atomic=True)`` yields ``CatalogRows`` whose methods read or write rows in
one transaction, committed when the block ends and rolled back when it raises (without
``atomic`` each statement commits on its own).

Names of databases, users and roles compare ASCII case-insensitively in both stores (SQLite's
``collate nocase``; PostgreSQL keeps a key column of ``ascii_lower(name)``).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol, Sequence

from knowspec.impl.extras import missing_extra_message

URL_SCHEMES = ("postgresql://", "postgres://")

CatalogTarget = Path | str   # a SQLite file, or a postgresql:// URL

DatabaseRow = tuple[str, str, str, str, "str | None"]        # name, storage, dsn, documents, documents_db
UserRow = tuple[str, bytes, bytes, str]                      # name, salt, hash, params
SessionRow = tuple[str, str, "str | None", float, float]     # user, its roles now (JSON), database, expires_at, last_used
LoginCounterRow = tuple[int, float]                          # attempts, last_attempt


class CatalogUnavailable(RuntimeError):
    """The catalog's database cannot be reached or its library is missing (message names no secret)."""


class CatalogRows(Protocol):
    """The row operations of one catalog transaction."""

    # db$database
    def database(self, name: str) -> DatabaseRow | None: ...
    def databases(self) -> list[DatabaseRow]: ...
    def put_database(self, name: str, storage: str, dsn: str) -> None: ...
    def set_documents(self, name: str, documents: str, documents_db: str | None) -> None: ...
    # auth$user, auth$role, auth$user_role
    def user(self, name: str) -> UserRow | None: ...
    def user_names(self) -> list[str]: ...
    def add_user(self, name: str, salt: bytes, digest: bytes, params: str) -> bool: ...
    def roles_of(self, user: str) -> list[str]: ...
    def add_role(self, role: str) -> None: ...
    def add_user_role(self, user: str, role: str) -> None: ...
    def remove_user_role(self, user: str, role: str) -> bool: ...
    def set_password(self, user: str, salt: bytes, digest: bytes, params: str) -> None: ...
    def remove_user(self, user: str) -> None:
        """Remove the user and its roles' grants (``user``: its stored spelling)."""
    # auth$session
    def add_session(self, key: str, user: str, roles: str, database: str | None,
                    expires_at: float, now: float, credential: bytes | None = None) -> bool:
        """Add a session row; with ``credential``, only while ``user`` exists with that password
        hash (holding its row until the transaction ends): whether it was added."""
    def session(self, key: str) -> SessionRow | None:
        """The session's row with its user's roles as granted now (not as at login), in one read."""
    def touch_session(self, key: str, now: float) -> None: ...
    def remove_session(self, key: str) -> bool: ...
    def remove_sessions_of(self, user: str) -> None:
        """End every session of ``user`` (its name compared ASCII case-insensitively)."""
    def keep_recent_sessions_of(self, user: str, most: int) -> None:
        """End the sessions of ``user`` but the ``most`` last used (its name compared as above)."""
    def remove_session_if_ended(self, key: str, now: float, idle_seconds: float | None) -> bool: ...
    def remove_ended_sessions(self, now: float, idle_seconds: float | None) -> None: ...
    def session_count(self) -> int: ...
    # auth$login_counter (rest/login_throttle.py)
    def lock_login_counters(self, keys: Sequence[str]) -> dict[str, LoginCounterRow]:
        """Each key's counter (a zero row made where there was none), locked until the
        transaction ends; lock keys in one order (sorted) so that transactions never deadlock."""
    def put_login_counter(self, key: str, attempts: int, last_attempt: float) -> None: ...
    def remove_login_counter(self, key: str) -> None: ...
    def remove_idle_login_counters(self, before: float) -> None: ...


class CatalogStore(Protocol):
    """One catalog: its transactions, and whether it exists yet (reads of a missing one find nothing)."""

    target: str

    def exists(self) -> bool: ...
    def transaction(self, *, atomic: bool = False) -> AbstractContextManager[CatalogRows]:
        """``atomic``: the block's statements are one transaction (a store takes its write lock up
        front); otherwise each statement commits on its own, which is enough for any block whose
        statements are each right alone (the session writes)."""


def is_catalog_url(target: CatalogTarget) -> bool:
    """Whether ``target`` names a PostgreSQL catalog (a URL) rather than a SQLite file."""
    return isinstance(target, str) and target.lower().startswith(URL_SCHEMES)


def open_catalog(target: CatalogTarget) -> CatalogStore:
    """The store of the catalog at ``target``: PostgreSQL for a ``postgresql://`` URL, else SQLite."""
    if is_catalog_url(target):
        try:
            from knowspec.impl.docpool.catalog_postgres import postgres_catalog
        except ImportError as exc:
            raise CatalogUnavailable(missing_extra_message(exc) or "PostgreSQL catalog is not available") from exc
        return postgres_catalog(str(target))
    from knowspec.impl.docpool.catalog_sqlite import SqliteCatalog

    return SqliteCatalog(target)


def first(rows: Sequence[tuple]) -> tuple | None:
    return rows[0] if rows else None


def ended_condition(now: float, idle_seconds: float | None, mark: str) -> tuple[str, tuple]:
    """SQL for "this ``auth$session`` row has ended at ``now``" and its parameters (``mark``: the
    driver's placeholder): past its absolute end, or unused for ``idle_seconds`` when that is set.
    The same rule as ``SessionStore.ended``, which judges a row already read."""
    if idle_seconds is None:
        return f"expires_at <= {mark}", (now,)
    return f"(expires_at <= {mark} or last_used + {mark} <= {mark})", (now, idle_seconds, now)
