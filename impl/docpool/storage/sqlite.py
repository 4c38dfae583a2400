"""SQLite pool storage: a pool file in schema v2 with an FTS5 index over folded text.

Readers open the file read-only (``mode=ro`` URI) for one request; the server keeps idle reader
connections per file identity (``docpool.pools``), so a package update that replaces ``help.db``
between calls is seen by the next call. Writers (``open_for_write``: the builder and IMPORTDOC)
switch the file to WAL. Every connection has the SQL function ``doc_fold`` (``rules.fold``) so
recipes can fold text the same way as queries.
"""

from __future__ import annotations

import os
import sqlite3
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from knowspec.impl.docpool.fulltext.reader import SNAPSHOT_TABLE, FtsIndex, fts_arrays_cache, persisted_in
from knowspec.impl.docpool.storage._sqlpool import SqlPool
from knowspec.impl.rules.fold import fold

class NotAPool(Exception):
    """The file exists but holds no doc$ schema (the pool was never imported)."""


def _generated_sql(name: str) -> str:
    """A file codegen ships from ``spec/docpool/sql/`` (the only source of the pool DDL)."""
    return (resources.files("knowspec.generated") / "docpool" / name).read_text("utf-8")


def schema_sql() -> str:
    """The pool schema v2 DDL (idempotent)."""
    return _generated_sql("sqlite_schema.sql")


def import_recipe_sql() -> str:
    """The IMPORTDOC recipe (``doc_import.sql``)."""
    return _generated_sql("doc_import.sql")


def register_functions(con: sqlite3.Connection) -> None:
    """SQL functions every pool connection needs (``doc_fold``)."""
    con.create_function("doc_fold", 1, fold, deterministic=True)


def read_only_connection(path: Path | str) -> sqlite3.Connection:
    """A read-only connection (``mode=ro``) with rows by name and ``doc_fold``; any thread may use
    it, one at a time."""
    con = sqlite3.connect(Path(path).absolute().as_uri() + "?mode=ro", uri=True, check_same_thread=False)
    con.row_factory = sqlite3.Row
    register_functions(con)
    return con


WRITER_WAIT_SECONDS = 600.0  # a writer waits this long for the one before it (SQLite's default: 5 s)


def open_for_write(path: Path | str) -> sqlite3.Connection:
    """A read-write connection in WAL mode with the schema ensured (builder, IMPORTDOC, removal,
    reindex). Writers take turns, as they do on PostgreSQL and Firebird: with SQLite's default
    wait, an import started while another ran for more than 5 s failed with "database is locked"."""
    con = sqlite3.connect(Path(path).absolute().as_uri(), uri=True, isolation_level=None,
                          timeout=WRITER_WAIT_SECONDS)
    register_functions(con)
    con.execute("pragma journal_mode = wal")
    con.execute("pragma foreign_keys = off")
    con.executescript(schema_sql())
    return con


class SqlitePool(SqlPool):
    """``PoolStorage`` over one SQLite pool file, read-only: the SQLite dialect of ``SqlPool``
    (keys are ``collate nocase`` columns, ``doc_fold`` folds, ``limit`` cuts) plus its FTS5
    index handed over as postings (the search layer ranks them)."""

    driver_errors: tuple[type[Exception], ...] = (sqlite3.Error,)

    def __init__(self, path: Path | str, *, location: str | None = None,
                 connection: sqlite3.Connection | None = None,
                 release: Callable[[sqlite3.Connection], None] | None = None) -> None:
        """``connection``: a read-only connection to ``path`` that an earlier pool opened
        (``read_only_connection``); ``release``: what ``close`` hands the connection to instead
        of closing it (``pools`` keeps idle readers that way)."""
        self.path = Path(path)
        self.location = location or str(path)
        self._con = connection or read_only_connection(self.path)
        self._release = release
        self._closed = False
        try:
            found = self._con.execute(
                "select count(*) from sqlite_master where name in ('doc$topic', 'doc$chunk_fts', 'doc$collection')"
            ).fetchone()[0]
        except sqlite3.DatabaseError as exc:
            self._con.close()
            raise NotAPool(str(exc)) from exc
        if found < 3:
            self._con.close()
            raise NotAPool(f"{self.location} has no doc$ tables")
        # One read transaction for the pool's life (a call): its change stamp, rows and full-text
        # arrays from one snapshot. Statement by statement, a search while an import committed
        # had ranked one import's index with the other's titles and snippets.
        if not self._con.in_transaction:
            self._con.execute("begin")

    # -- lifetime ------------------------------------------------------------------------
    def close(self) -> None:
        """Close the connection, or hand it to ``release``; a second close does nothing (the
        connection may already serve another pool)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._con.in_transaction:
                self._con.execute("rollback")  # a reader's: nothing written, the snapshot let go
        except sqlite3.Error:
            self._con.close()
            return
        if self._release is not None:
            self._release(self._con)
        else:
            self._con.close()

    # -- the dialect ---------------------------------------------------------------------
    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        return self._con.execute(sql, params).fetchall()

    def _stream(self, sql: str, params: Sequence[Any] = ()) -> Iterator[sqlite3.Row]:
        cursor = self._con.execute(sql, params)  # sqlite steps row by row
        try:
            yield from cursor
        finally:
            cursor.close()

    def _ci(self, column: str) -> str:
        return f"{column} collate nocase"

    def _text_order(self, expr: str) -> str:
        return f"{expr} collate binary"  # a column declared nocase (an entity's key) still orders by bytes

    def _folded(self, column: str) -> str:
        return f"doc_fold({column})"

    def _contains(self, text: str) -> str:
        return f"instr({text}, ?) > 0"

    def _first(self, n: str) -> str:
        return f"limit {n}"

    # -- full text -----------------------------------------------------------------------
    def fulltext_index(self, stamp: tuple) -> FtsIndex:
        """The pool's FTS5 index read into arrays (``fulltext.reader``), once per change stamp;
        a search waits for them when they are still being read (FTS5 never ranks here)."""
        arrays = fts_arrays_cache().get(self.path, stamp, mode="sync",
                                        load=lambda: persisted_in(self._con, lazy=True))
        if arrays is None:
            raise sqlite3.DatabaseError("the full-text index could not be read")  # no path in messages
        return FtsIndex(stamp, arrays).with_reader(self._snapshot_parts)  # persisted postings: read when sliced

    def change_stamp(self) -> tuple:
        """The tag of the full-text snapshot the last import (or build) wrote, which no other write
        repeats (sizes and times do: two imports of equally sized content a clock tick apart had
        left the same stamp), with the identity, size and modification time of the file and of its
        WAL file, for a file changed or replaced another way (to the file system's clock tick: a
        same-sized write by another program within a few milliseconds of the last goes unseen;
        every knowspec writer moves the tag). Not the change time: SQLite gives the WAL file its
        database's owner each time a connection opens it (as root), which moves its change time
        on every read.

        Only ``stat``: this process must never open and close the pool's files itself. Closing any
        descriptor of a file drops every POSIX lock the process holds on it, SQLite's included
        (sqlite.org/howtocorrupt.html §2.2), and a ``pool import`` in another process then took the
        file whole, deleted the WAL this server was reading and left it on stale pages."""
        try:
            tag = self._con.execute(f'select revision from "{SNAPSHOT_TABLE}" where part = 0').fetchone()
        except sqlite3.OperationalError:  # a pool made before snapshots were persisted
            tag = None
        stamp: list[Any] = [str(self.path.absolute()), tag[0] if tag else None]
        for suffix in ("", "-wal"):
            try:
                st = os.stat(str(self.path) + suffix)
                stamp += [st.st_ino, st.st_size, st.st_mtime_ns]
            except OSError:
                stamp += [0, 0, 0]
        return tuple(stamp)

