"""Open the pool a call reads: the help pool ``netsim-help`` or a database's document pool.

Pools are opened per request and closed when the call ends (``with help_pool(ctx) as pool``).
A SQLite reader's connection then waits in the runtime's ``docpool.sqlite_readers`` cache for
the next call to the same file (opening one cost ~0.6 ms a call); it is only reused while the path still names the same file
(device and inode), so a replaced file is seen by the next call. Storage kinds other than SQLite
plug in through ``STORAGE_OPENERS`` (``storage/postgres.py``, ``storage/firebird.py`` each
expose ``open_pool(location) -> PoolStorage``).
"""

from __future__ import annotations

import importlib
import sqlite3
from pathlib import Path
from typing import Callable

from knowspec.impl import runtime as process
from knowspec.impl.context import CallContext
from knowspec.impl.docpool.catalog import PoolLocation, resolve_pool_location
from knowspec.impl.docpool.storage.base import PoolStorage
from knowspec.impl.docpool.storage.sqlite import NotAPool, SqlitePool
from knowspec.impl.errors import ToolError
from knowspec.impl.extras import missing_extra_message

HELP_COLLECTION = "netsim-help"

#: storage kind -> module with ``open_pool(location: PoolLocation) -> PoolStorage``
STORAGE_OPENERS: dict[str, str] = {
    "POSTGRESQL": "knowspec.impl.docpool.storage.postgres",
    "FIREBIRD": "knowspec.impl.docpool.storage.firebird",
}


class _IdleReaders:
    """Read-only SQLite connections between calls: the runtime's ``docpool.sqlite_readers`` cache,
    keyed by pool file and stamped with its identity (device, inode); at most ``IDLE_PER_FILE``
    per file and ``MAX_IDLE_FILES`` files (the least recently used go first)."""

    MAX_IDLE_FILES = 8
    IDLE_PER_FILE = 4

    def __init__(self, runtime: process.Runtime) -> None:
        self.cache = runtime.cache("docpool.sqlite_readers", max_entries=self.MAX_IDLE_FILES, dispose=_close_all)

    def open(self, path: Path, location: str) -> SqlitePool:
        """A pool over an idle connection to this very file, else over a new one."""
        key = str(path.absolute())
        st = path.stat()
        identity = (st.st_dev, st.st_ino)
        connection = self.cache.take(key, identity)  # a replaced file's connections are closed

        def release(con: sqlite3.Connection) -> None:
            self._give_back(key, identity, con)

        return SqlitePool(path, location=location, connection=connection, release=release)

    def _give_back(self, key: str, identity: tuple[int, int], con: sqlite3.Connection) -> None:
        if con.in_transaction:  # readers never write; anything else is closed, not reused
            con.close()
            return
        if not self.cache.give(key, identity, con, self.IDLE_PER_FILE):
            con.close()


def _close_all(connections: list[sqlite3.Connection]) -> None:
    for con in connections:
        con.close()


def _idle_readers() -> _IdleReaders:
    return _IdleReaders(process.current())


def help_pool(ctx: CallContext) -> PoolStorage:
    """The help pool (``settings.help_db_path``), read-only; ``help pool not found (...)`` if absent."""
    path = Path(ctx.settings.help_db_path)
    if not path.is_file():
        # Name the pool, not the file: a message with a path would be redacted whole.
        raise ToolError("pool_unavailable", f"help pool not found ({HELP_COLLECTION})")
    try:
        return _IdleReaders(process.of(ctx)).open(path, str(path))
    except OSError:  # gone since the check
        raise ToolError("pool_unavailable", f"help pool not found ({HELP_COLLECTION})") from None
    except (NotAPool, sqlite3.Error) as exc:
        raise ToolError("pool_unavailable", f"help pool not found ({HELP_COLLECTION}: {exc})") from exc


def requested_database(ctx: CallContext, database: str | None) -> str | None:
    """The database a doc_* call reads: its argument, else the session's, else the server's -DATABASE."""
    return database or ctx.caller.database or getattr(ctx.settings, "default_database", None)


def _open_sqlite(location: PoolLocation) -> PoolStorage:
    path = Path(location.dsn)
    if not path.is_file():
        raise ToolError("pool_unavailable", f"document pool not imported ({location.docs_database})")
    try:
        return _idle_readers().open(path, location.docs_database)
    except OSError:  # gone since the check
        raise ToolError("pool_unavailable", f"document pool not imported ({location.docs_database})") from None
    except (NotAPool, sqlite3.Error) as exc:
        raise ToolError("pool_unavailable",
                        f"document pool not imported ({location.docs_database}: {exc})") from exc


def open_location(location: PoolLocation) -> PoolStorage:
    """Open the storage at ``location`` (SQLite here; other kinds via ``STORAGE_OPENERS``)."""
    if location.storage == "SQLITE":
        return _open_sqlite(location)
    module_name = STORAGE_OPENERS.get(location.storage)
    try:
        opener: Callable[[PoolLocation], PoolStorage] = importlib.import_module(module_name).open_pool  # type: ignore[arg-type]
    except (ImportError, AttributeError, TypeError) as exc:
        reason = missing_extra_message(exc) or f"{location.storage} storage is not available in this server"
        raise ToolError("pool_unavailable",
                        f"document pool not imported ({location.docs_database}: {reason})") from exc
    return opener(location)


def document_pool(ctx: CallContext, database: str | None) -> PoolStorage:
    """The document pool of ``database`` (or the default one), with the seed's errors."""
    location = resolve_pool_location(ctx.settings.catalog, requested_database(ctx, database))
    return open_location(location)
