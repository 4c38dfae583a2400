"""SQLite pool storage: a pool file in schema v2 with an FTS5 index over folded text.

Readers open the file read-only (``mode=ro`` URI) for one request; the server keeps idle reader
connections per file identity (``docpool.pools``), so a package update that replaces ``help.db``
between calls is seen by the next call. Writers (``open_for_write``: the builder and IMPORTDOC)
switch the file to WAL. Every connection has the SQL function ``doc_fold`` (``rules.fold``) so
recipes can fold text the same way as queries.
"""

from __future__ import annotations

import sqlite3
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from knowspec.impl.docpool.fulltext.reader import FtsIndex, fts_arrays_cache
from knowspec.impl.docpool.storage._sqlpool import SqlPool
from knowspec.impl.docpool.storage.base import SearchHit
from knowspec.impl.rules.fold import fold

FTS_COLUMNS = ("title", "heading", "body")
SNIPPET_OPEN, SNIPPET_CLOSE, SNIPPET_ELLIPSIS, SNIPPET_TOKENS = "[", "]", "…", 16

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


def open_for_write(path: Path | str) -> sqlite3.Connection:
    """A read-write connection in WAL mode with the schema ensured (builder, IMPORTDOC)."""
    con = sqlite3.connect(Path(path).absolute().as_uri(), uri=True, isolation_level=None)
    register_functions(con)
    con.execute("pragma journal_mode = wal")
    con.execute("pragma foreign_keys = off")
    con.executescript(schema_sql())
    return con


class SqlitePool(SqlPool):
    """``PoolStorage`` over one SQLite pool file, read-only: the SQLite dialect of ``SqlPool``
    (keys are ``collate nocase`` columns, ``doc_fold`` folds, ``limit`` cuts) plus FTS5."""

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

    # -- lifetime ------------------------------------------------------------------------
    def close(self) -> None:
        """Close the connection, or hand it to ``release``; a second close does nothing (the
        connection may already serve another pool)."""
        if self._closed:
            return
        self._closed = True
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

    def _folded(self, column: str) -> str:
        return f"doc_fold({column})"

    def _contains(self, text: str) -> str:
        return f"instr({text}, ?) > 0"

    def _first(self, n: str) -> str:
        return f"limit {n}"

    # -- full text -----------------------------------------------------------------------
    def search_fts(self, match, access, *, limit, weights, snippet_column,
                   collection=None, linked_to=None) -> list[SearchHit]:
        """Best chunk per allowed topic, topics by (score, collection, slug), at most ``limit``.

        FTS5 hands rows over in ``rank`` order (its bm25 with the recipe's weights), so rows are
        read only until ``limit`` topics are known and the score has moved past the last of
        them: equal scores are all seen, so ties break exactly as a full sort would (best chunk
        by chunk id, topics by collection and slug).
        """
        params: list[Any] = [match, f"bm25({self._weights_sql(weights)})"]
        where = ['"doc$chunk_fts" match ?', "rank match ?"]
        if collection is not None:
            where.append("t.collection = ?")
            params.append(collection)
        if linked_to is not None:
            where.append('exists (select 1 from "doc$link" l where l.topic_id = t.id '
                         f"and l.kind = ? and {self._ci('l.key')} = ?)")
            params.extend(linked_to)
        where.append(self._acl(access, params))
        cursor = self._con.execute(
            f"""select ch.topic_id, ch.id as chunk_id, rank as score, t.collection, t.slug, t.title, t.breadcrumb
                from "doc$chunk_fts" join "doc$chunk" ch on ch.id = "doc$chunk_fts".rowid
                join "doc$topic" t on t.id = ch.topic_id
                join "doc$collection" c on c.id = t.collection
                where {' and '.join(where)} order by rank""", params)
        best: dict[int, sqlite3.Row] = {}
        cutoff: float | None = None
        while True:
            rows = cursor.fetchmany(256)
            if not rows:
                break
            for r in rows:
                if cutoff is not None and r["score"] > cutoff:
                    break
                known = best.get(r["topic_id"])
                if known is None or (r["score"], r["chunk_id"]) < (known["score"], known["chunk_id"]):
                    best[r["topic_id"]] = r
                if cutoff is None and len(best) >= limit:
                    cutoff = r["score"]
            else:
                continue
            break
        cursor.close()
        ranked = sorted(best.values(), key=lambda r: (r["score"], r["collection"], r["slug"]))[:limit]
        snippets = self._snippets(match, [r["chunk_id"] for r in ranked], snippet_column)
        return [SearchHit(r["topic_id"], r["chunk_id"], r["collection"], r["slug"], r["title"],
                          r["breadcrumb"], r["score"], snippets.get(r["chunk_id"], ""))
                for r in ranked]

    def fulltext_index(self, stamp: tuple) -> FtsIndex | None:
        """The pool's FTS5 index read into arrays (``fulltext.reader``), once per change stamp;
        ``None`` while they are being read (``KNOWSPEC_FTS_ARRAYS``): FTS5 answers meanwhile."""
        arrays = fts_arrays_cache().get(self.path, stamp)
        return None if arrays is None else FtsIndex(stamp, arrays)

    @staticmethod
    def _weights_sql(weights) -> str:
        return ", ".join(repr(float(w)) for w in list(weights)[: len(FTS_COLUMNS)]) or "1.0"

    def _snippets(self, match: str, chunk_ids: list[int], column: str) -> dict[int, str]:
        if not chunk_ids:
            return {}
        col = FTS_COLUMNS.index(column) if column in FTS_COLUMNS else -1
        marks = ",".join("?" * len(chunk_ids))
        rows = self._rows(
            f"""select rowid, snippet("doc$chunk_fts", {col}, ?1, ?2, ?3, {SNIPPET_TOKENS}) as s,
                       snippet("doc$chunk_fts", -1, ?1, ?2, ?3, {SNIPPET_TOKENS}) as any_column
                from "doc$chunk_fts" where "doc$chunk_fts" match ?4 and rowid in ({marks})""",
            [SNIPPET_OPEN, SNIPPET_CLOSE, SNIPPET_ELLIPSIS, match, *chunk_ids])
        # An empty snippet column (a heading-only section) falls back to the best column.
        return {r["rowid"]: r["s"] or r["any_column"] or "" for r in rows}

    def change_stamp(self) -> tuple:
        """The file's identity, size and modification time, and its WAL file's."""
        stamp: list[Any] = [str(self.path.absolute())]
        for suffix in ("", "-wal"):
            try:
                st = Path(str(self.path) + suffix).stat()
                stamp += [st.st_ino, st.st_size, st.st_mtime_ns]
            except OSError:
                stamp += [0, 0, 0]
        return tuple(stamp)

