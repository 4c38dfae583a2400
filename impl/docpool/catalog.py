"""The MASTER catalog's database registry and each database's documents setting.

The catalog is one SQLite file (``settings.catalog_path``) shared with other modules (users,
roles, sessions add their own tables); this module owns the ``db$`` tables and creates them
idempotently. A registered database has a storage kind and a DSN (a file path for SQLite);
``ALTER DATABASE <db> SET DOCUMENTS INTERNAL | DATABASE <other> | OFF`` says where its document
pool lives. Resolving a database to a pool location raises the seed's error texts.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from knowspec.impl import runtime as process
from knowspec.impl.errors import ToolError, diagnostic

STORAGE_KINDS = ("SQLITE", "POSTGRESQL", "FIREBIRD")
MAX_OPEN_CATALOGS = 4   # catalogs whose database answers are kept (a server has one)

_SCHEMA = """
create table if not exists "db$database" (
    name         text primary key collate nocase,
    storage      text not null,                -- SQLITE | POSTGRESQL | FIREBIRD | (anything else: unsupported)
    dsn          text not null default '',     -- SQLite: the database file; others: connection string
    documents    text not null default '',     -- '' (never set) | INTERNAL | DATABASE | OFF
    documents_db text                          -- the other database when documents = DATABASE
);
"""

_SELECT_DATABASE = 'select name, storage, dsn, documents, documents_db from "db$database" where name = ?'

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


def connect(catalog_path: Path | str, *, any_thread: bool = False) -> sqlite3.Connection:
    """Open (creating if needed) the catalog with the ``db$`` tables in place; ``any_thread``
    for a connection that several threads use in turn (under their own lock)."""
    path = Path(catalog_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(str(path), isolation_level=None, check_same_thread=not any_thread)
    con.execute("pragma busy_timeout = 5000")
    con.executescript(_SCHEMA)
    return con


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


def register_database(catalog_path: Path | str, name: str, storage: str, dsn: str) -> DatabaseEntry:
    """Register (or re-point) a database; its documents setting is kept."""
    if not name:
        raise CatalogError("database is required")
    with closing(connect(catalog_path)) as con:
        con.execute('insert into "db$database"(name, storage, dsn) values (?, ?, ?) '
                    "on conflict(name) do update set storage = excluded.storage, dsn = excluded.dsn",
                    [name, storage.upper(), str(dsn)])
    entry = get_database(catalog_path, name)
    assert entry is not None
    return entry


def get_database(catalog_path: Path | str, name: str) -> DatabaseEntry | None:
    """The registered database ``name`` (case-insensitive), or None."""
    if not Path(catalog_path).is_file():
        return None
    with closing(connect(catalog_path)) as con:
        row = con.execute(_SELECT_DATABASE, [name]).fetchone()
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
                row = self.con.execute(_SELECT_DATABASE, [name]).fetchone()
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


def _cached_database(catalog_path: Path | str, name: str) -> DatabaseEntry | None:
    key = str(Path(catalog_path).absolute())
    cache = _database_reads(process.current())
    try:
        st = Path(key).stat()
    except OSError:
        cache.pop(key)
        return None
    held = cache.get(key, (st.st_dev, st.st_ino), lambda: _HeldCatalog(key))
    try:
        return held.get(name)
    except sqlite3.Error:
        cache.pop(key)
        raise


def list_databases(catalog_path: Path | str) -> list[DatabaseEntry]:
    if not Path(catalog_path).is_file():
        return []
    with closing(connect(catalog_path)) as con:
        rows = con.execute('select name, storage, dsn, documents, documents_db from "db$database" order by name').fetchall()
    return [DatabaseEntry(*r) for r in rows]


def set_documents(catalog_path: Path | str, alter: AlterDocuments) -> DatabaseEntry:
    """Apply a parsed documents setting; both databases must be registered."""
    if get_database(catalog_path, alter.database) is None:
        raise CatalogError(f"database is not registered ({alter.database})")
    other = None
    if alter.mode == "DATABASE":
        target = get_database(catalog_path, alter.other or "")
        if target is None:
            raise CatalogError(f"database is not registered ({alter.other})")
        other = target.name
    with closing(connect(catalog_path)) as con:
        con.execute('update "db$database" set documents = ?, documents_db = ? where name = ?',
                    [alter.mode, other, alter.database])
    entry = get_database(catalog_path, alter.database)
    assert entry is not None
    return entry


def execute_alter(catalog_path: Path | str, command: str) -> DatabaseEntry:
    """Parse and apply an ``ALTER DATABASE ... SET DOCUMENTS ...`` command."""
    return set_documents(catalog_path, parse_alter_documents(command))


def _unavailable(message: str, name: str = "") -> ToolError:
    return ToolError("pool_unavailable", message,
                     diagnostics=[diagnostic("pool_unavailable", message, field="database",
                                             spec_ref="seeds/001_doc_pools#document-pool")]
                     if name else ())


def resolve_pool_location(catalog_path: Path | str, database: str | None) -> PoolLocation:
    """Where ``database``'s document pool lives, or the seed's error for why there is none."""
    if not database:
        raise ToolError("invalid_request", "database is required",
                        diagnostics=[diagnostic("invalid_request", "database is required", field="database")])
    entry = _cached_database(catalog_path, database)
    if entry is None:
        raise _unavailable("database is not registered", database)
    if entry.documents not in ("INTERNAL", "DATABASE"):
        raise _unavailable("has no document pool", entry.name)
    holder = entry
    if entry.documents == "DATABASE":
        documents = _cached_database(catalog_path, entry.documents_db or "")
        if documents is None:
            raise _unavailable("database is not registered", entry.documents_db or "")
        holder = documents
    if holder.storage.upper() not in STORAGE_KINDS:
        raise _unavailable("only SQLITE, POSTGRESQL and FIREBIRD storage are supported", holder.name)
    return PoolLocation(entry.name, holder.name, holder.storage.upper(), holder.dsn)
