"""The MASTER catalog's database registry and each database's documents setting.

The catalog is a SQLite file (``settings.catalog_path``) or a PostgreSQL database
(``settings.catalog_url``), shared with the users, roles and sessions (``auth.py``,
``rest/sessions.py``); its rows live in a store (``catalog_store.py``), the rules live here. A
registered database has a storage kind and a DSN (a file path for SQLite);
``ALTER DATABASE <db> SET DOCUMENTS INTERNAL | DATABASE <other> | OFF`` says where its document
pool lives. Resolving a database to a pool location raises the seed's error texts.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

from knowspec.impl import runtime as process
from knowspec.impl.docpool.catalog_sqlite import SqliteRows, connect
from knowspec.impl.docpool.catalog_store import CatalogTarget, CatalogUnavailable, is_catalog_url, open_catalog
from knowspec.impl.errors import ToolError, diagnostic

STORAGE_KINDS = ("SQLITE", "POSTGRESQL", "FIREBIRD")
MAX_OPEN_CATALOGS = 4   # catalogs whose database answers are kept (a server has one)


_ALTER = re.compile(
    r"^\s*ALTER\s+DATABASE\s+(?P<db>\"[^\"]+\"|[A-Za-z0-9_$.\-]+)\s+SET\s+DOCUMENTS\s+"
    r"(?:(?P<internal>INTERNAL)|(?P<off>OFF)|DATABASE\s+(?P<other>\"[^\"]+\"|[A-Za-z0-9_$.\-]+))\s*;?\s*$",
    re.I,
)


class CatalogError(ValueError):
    """A catalog command that cannot be applied (syntax, unknown database)."""


@dataclass(frozen=True)
class DatabaseEntry:
    name: str
    storage: str
    dsn: str
    documents: str
    documents_db: str | None


@dataclass(frozen=True)
class AlterDocuments:
    """A parsed ``ALTER DATABASE <db> SET DOCUMENTS ...`` command."""

    database: str
    mode: str  # INTERNAL | DATABASE | OFF
    other: str | None = None


@dataclass(frozen=True)
class PoolLocation:
    """Where a database's document pool lives."""

    database: str       # the database the caller named
    docs_database: str  # the database whose storage holds the doc$ tables
    storage: str        # SQLITE | POSTGRESQL | FIREBIRD
    dsn: str


def _unquote(name: str) -> str:
    return name[1:-1] if name.startswith('"') and name.endswith('"') else name


def parse_alter_documents(command: str) -> AlterDocuments:
    """Parse ``ALTER DATABASE <db> SET DOCUMENTS INTERNAL | DATABASE <other> | OFF``."""
    m = _ALTER.match(command or "")
    if not m:
        raise CatalogError("expected ALTER DATABASE <db> SET DOCUMENTS INTERNAL | DATABASE <other> | OFF")
    db = _unquote(m.group("db"))
    if m.group("internal"):
        return AlterDocuments(db, "INTERNAL")
    if m.group("off"):
        return AlterDocuments(db, "OFF")
    return AlterDocuments(db, "DATABASE", _unquote(m.group("other")))


def register_database(catalog: CatalogTarget, name: str, storage: str, dsn: str) -> DatabaseEntry:
    """Register (or re-point) a database; its documents setting is kept."""
    if not name:
        raise CatalogError("database is required")
    if any(ord(ch) < 32 for ch in name):
        raise CatalogError(f"invalid database name {name!r}: control characters are not allowed")
    with open_catalog(catalog).transaction(atomic=True) as rows:
        rows.put_database(name, storage.upper(), str(dsn))
        entry = rows.database(name)
    assert entry is not None
    return DatabaseEntry(*entry)


def get_database(catalog: CatalogTarget, name: str) -> DatabaseEntry | None:
    """The registered database ``name`` (case-insensitive), or None."""
    store = open_catalog(catalog)
    if not store.exists():
        return None
    with store.transaction() as rows:
        row = rows.database(name)
    return DatabaseEntry(*row) if row else None


class _HeldCatalog:
    """One open catalog connection and the answers read at its current ``data_version``."""

    def __init__(self, key: str) -> None:
        self.lock = threading.Lock()
        self.con = connect(key, any_thread=True)
        self.version = -1
        self.answers: dict[str, DatabaseEntry | None] = {}

    def get(self, name: str) -> DatabaseEntry | None:
        with self.lock:
            version = self.con.execute("pragma data_version").fetchone()[0]
            if version != self.version:
                self.version, self.answers = version, {}
            if name not in self.answers:
                row = SqliteRows(self.con).database(name)
                self.answers[name] = DatabaseEntry(*row) if row else None
            return self.answers[name]

    def close(self) -> None:
        with self.lock:
            self.con.close()


def _database_reads(runtime: process.Runtime) -> process.Cache:
    """``get_database`` answers per catalog file, kept while SQLite's ``data_version`` holds still.

    Every doc_* call resolves its database; opening the catalog for that cost about 0.4 ms. One
    connection per catalog stays open in the runtime's ``docpool.catalogs`` cache (stamp: the
    file's identity) and asks ``pragma data_version``, which changes when any other connection
    (any process) commits, so a registration or an ``ALTER DATABASE`` is seen by the next call.
    A catalog file replaced by another (new inode) gets a new connection.
    """
    return runtime.cache("docpool.catalogs", max_entries=MAX_OPEN_CATALOGS, dispose=_HeldCatalog.close)


def _cached_database(catalog: CatalogTarget, name: str) -> DatabaseEntry | None:
    """A SQLite catalog's answer from the held connection; a PostgreSQL catalog is asked each time
    (one round trip on a pooled connection: it has no cheap change counter to stamp answers with)."""
    if is_catalog_url(catalog):
        try:
            return get_database(catalog, name)
        except CatalogUnavailable as exc:  # a tool answers with the contract's code, the cause stays chained
            raise ToolError("storage_error", "the catalog database is unavailable") from exc
    key = str(Path(catalog).absolute())
    cache = _database_reads(process.current())
    try:
        st = Path(key).stat()
    except OSError:
        cache.pop(key)
        return None
    try:
        return cache.get(key, (st.st_dev, st.st_ino), lambda: _HeldCatalog(key)).get(name)
    except (sqlite3.Error, OSError) as exc:
        cache.pop(key)
        if isinstance(exc, sqlite3.OperationalError | OSError):  # cannot be opened or read now: worth a retry
            raise ToolError("storage_error", "the catalog database is unavailable") from exc
        raise


def list_databases(catalog: CatalogTarget) -> list[DatabaseEntry]:
    store = open_catalog(catalog)
    if not store.exists():
        return []
    with store.transaction() as rows:
        return [DatabaseEntry(*r) for r in rows.databases()]


def set_documents(catalog: CatalogTarget, alter: AlterDocuments) -> DatabaseEntry:
    """Apply a parsed documents setting; both databases must be registered (checked in the same
    transaction as the change, so a concurrent re-registration cannot slip between)."""
    store = open_catalog(catalog)
    if not store.exists():
        raise CatalogError(f"database is not registered ({alter.database})")
    with store.transaction(atomic=True) as rows:
        if rows.database(alter.database) is None:
            raise CatalogError(f"database is not registered ({alter.database})")
        other = None
        if alter.mode == "DATABASE":
            target = rows.database(alter.other or "")
            if target is None:
                raise CatalogError(f"database is not registered ({alter.other})")
            other = target[0]
        rows.set_documents(alter.database, alter.mode, other)
        entry = rows.database(alter.database)
    assert entry is not None
    return DatabaseEntry(*entry)


def execute_alter(catalog: CatalogTarget, command: str) -> DatabaseEntry:
    """Parse and apply an ``ALTER DATABASE ... SET DOCUMENTS ...`` command."""
    return set_documents(catalog, parse_alter_documents(command))


def _unavailable(message: str, name: str = "") -> ToolError:
    return ToolError("pool_unavailable", message,
                     diagnostics=[diagnostic("pool_unavailable", message, field="database",
                                             spec_ref="seeds/001_doc_pools#document-pool")]
                     if name else ())


def resolve_pool_location(catalog: CatalogTarget, database: str | None) -> PoolLocation:
    """Where ``database``'s document pool lives, or the seed's error for why there is none."""
    if not database:
        raise ToolError("invalid_request", "database is required", diagnostics=[diagnostic(
            "invalid_request", "Pass the database argument, or start the server with --database NAME "
            "(the databases are listed by `knowspec pool databases`).", field="database")])
    entry = _cached_database(catalog, database)
    if entry is None:
        raise _unavailable("database is not registered", database)
    if entry.documents not in ("INTERNAL", "DATABASE"):
        raise _unavailable("has no document pool", entry.name)
    holder = entry
    if entry.documents == "DATABASE":
        documents = _cached_database(catalog, entry.documents_db or "")
        if documents is None:
            raise _unavailable("database is not registered", entry.documents_db or "")
        holder = documents
    if holder.storage.upper() not in STORAGE_KINDS:
        raise _unavailable("only SQLITE, POSTGRESQL and FIREBIRD storage are supported", holder.name)
    return PoolLocation(entry.name, holder.name, holder.storage.upper(), holder.dsn)
