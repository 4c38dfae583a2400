"""Open the pool a call reads: the help pool ``netsim-help`` or a database's document pool.

Pools are opened per request and closed when the call ends (``with help_pool(ctx) as pool``),
so a replaced file is seen by the next call and no handle outlives the request. Storage kinds
other than SQLite plug in through ``STORAGE_OPENERS`` (``storage/postgres.py``,
``storage/firebird.py`` each expose ``open_pool(location) -> PoolStorage``).
"""

from __future__ import annotations

import importlib
import sqlite3
from pathlib import Path
from typing import Callable

from knowspec.impl.context import CallContext
from knowspec.impl.docpool.catalog import PoolLocation, resolve_pool_location
from knowspec.impl.docpool.storage.base import PoolStorage
from knowspec.impl.docpool.storage.sqlite import NotAPool, SqlitePool
from knowspec.impl.errors import ToolError

HELP_COLLECTION = "netsim-help"

#: storage kind -> module with ``open_pool(location: PoolLocation) -> PoolStorage``
STORAGE_OPENERS: dict[str, str] = {
    "POSTGRESQL": "knowspec.impl.docpool.storage.postgres",
    "FIREBIRD": "knowspec.impl.docpool.storage.firebird",
}


def help_pool(ctx: CallContext) -> PoolStorage:
    """The help pool (``settings.help_db_path``), read-only; ``help pool not found (...)`` if absent."""
    path = Path(ctx.settings.help_db_path)
    if not path.is_file():
        # Name the pool, not the file: a message with a path would be redacted whole.
        raise ToolError("pool_unavailable", f"help pool not found ({HELP_COLLECTION})")
    try:
        return SqlitePool(path, location=str(path))
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
        return SqlitePool(path, location=location.docs_database)
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
        raise ToolError("pool_unavailable",
                        f"document pool not imported ({location.docs_database}: "
                        f"{location.storage} storage is not available in this server)") from exc
    return opener(location)


def document_pool(ctx: CallContext, database: str | None) -> PoolStorage:
    """The document pool of ``database`` (or the default one), with the seed's errors."""
    location = resolve_pool_location(ctx.settings.catalog_path, requested_database(ctx, database))
    return open_location(location)
