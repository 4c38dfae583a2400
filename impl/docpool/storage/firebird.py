"""Firebird (4 or newer) pool storage: schemaless ``doc$`` tables, full text in process memory.

The DSN is a database file (the embedded engine of the ``firebird-embedded`` wheel, loaded
through ``firebird-driver``) or a server DSN (``host[/port]:path``); ``user`` / ``password``
come from ``firebird://user:password@host[:port]/path`` or ISC_USER / ISC_PASSWORD (SYSDBA).

Firebird has no FTS5, so its full text is an in-memory index (``fulltext.reader.FtsIndex``:
numpy postings, the chunks' original texts, the topics' titles). Every import builds it in its
own transaction and persists it (``doc$fts_snapshot``, tagged with the new ``doc$pool_state.stamp``);
the first search of a process loads it while the stamp still matches, else builds it from the
chunk texts read in one ``list()`` (``chunk_texts``). The storage only hands the index over (``fulltext_index``); the
search layer (``fulltext.search``) ranks it with FTS5's ``bm25()`` and ``snippet()`` rules, so
results equal a SQLite pool's (same topics, order, scores, snippets), and a warm search sends no
full-text SQL (only ``topic_ids`` for ACLs and links). Every request reads one snapshot (a
read-only SNAPSHOT transaction), so a reader never sees half an import; the index is checked
against the stamp inside that snapshot.

A pool the storage creates has 32 KB pages (``POOL_PAGE_SIZE``): each page an import writes is a
forced (synchronous) write, and larger pages make fewer of them; a pool made before keeps its
pages.

Statements are prepared once per kept connection and run through their message layout
(``firebird_messages``: values packed and rows unpacked without the driver's per-call describe
work); an import inserts the same way.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import threading
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence
from urllib.parse import unquote, urlsplit

from knowspec.impl import runtime as process
from knowspec.impl.docpool.catalog import PoolLocation
from knowspec.impl.docpool.recipe import (ImportRefused, ImportResult, RemovedCollection, absent_collection,
                                          removal_counts_sql)
from knowspec.impl.docpool.storage import _source
from knowspec.impl.docpool.storage import firebird_messages as messages
from knowspec.impl.docpool.fulltext.reader import SNAPSHOT_TABLE, FtsIndex, dump, parts
from knowspec.impl.docpool.storage._sqlpool import SqlPool
from knowspec.impl.errors import ToolError
from knowspec.impl.extras import require

_API_LOCK = threading.Lock()
_API_LOADED = False
IDLE_PER_POOL = 4  # attaching to an embedded database costs ~30 ms, detaching the last one as much


ImportFailed = _source.ImportFailed  # raised by import_collection: rolled back, nothing changed


# -- engine and connections -------------------------------------------------------------------

def load_engine() -> None:
    """Load the Firebird client: the embedded wheel's runtime (with its native dependencies
    ``libtommath.so.1`` from the system and the wheel's ``libtomcrypt.so.1``), else the system's."""
    global _API_LOADED
    with _API_LOCK:
        if _API_LOADED:
            return
        load_api = require("firebird.driver").load_api

        try:
            from firebird.embedded.provider import FirebirdProvider
        except ImportError:  # no wheel: the system's libfbclient
            load_api()
        else:
            provider = FirebirdProvider()
            for lib in ("libtommath.so.1", str(provider.root / "libtomcrypt.so.1")):
                try:
                    ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
                except OSError:
                    pass  # the loader reports what is really missing
            load_api(provider)
        # After the driver's own exit hook (which shuts the engine down), so this one runs first.
        atexit.register(close_connections)
        _API_LOADED = True


def parse_dsn(dsn: str) -> tuple[str, str, str, str]:
    """(database, user, password, display): a file path, ``host:path`` or a firebird:// URL."""
    user = os.environ.get("ISC_USER", "SYSDBA")
    password = os.environ.get("ISC_PASSWORD", "")
    if dsn.startswith("firebird://"):
        u = urlsplit(dsn)
        user = unquote(u.username or user)
        password = unquote(u.password or password)
        host = u.hostname or ""
        port = f"/{u.port}" if u.port else ""
        database = f"{host}{port}:{unquote(u.path)}" if host else unquote(u.path)
        return database, user, password, f"firebird://{user}@{u.hostname or ''}{unquote(u.path)}"
    return dsn, user, password, dsn


def is_local_file(database: str) -> bool:
    return ":" not in database or (len(database) > 1 and database[1] == ":")


# A new pool's pages: an import writes each page once, each write a forced (synchronous) one, so
# 32 KB pages cut an import's synchronous writes to a quarter of the default 8 KB's (14.4k -> 4.3k
# for the 50k-chunk databricks pool: the wait that made its import time swing with the disk's
# load). The page cache keeps its default size in bytes (2048 pages of 8 KB = 512 of 32 KB).
POOL_PAGE_SIZE = 32768
POOL_PAGE_BUFFERS = 512


def connect(dsn: str, *, create: bool = False):
    """A UTF8 connection (the embedded engine for a file path); ``create`` makes the database
    first (``POOL_PAGE_SIZE`` pages)."""
    load_engine()
    database, user, password, _ = parse_dsn(dsn)
    kwargs: dict[str, Any] = {"user": user, "charset": "UTF8"}
    if password:
        kwargs["password"] = password
    if create:
        _create_database(database, user, password)
    return require("firebird.driver").connect(database, **kwargs)


def _create_database(database: str, user: str, password: str) -> None:
    """Create an empty UTF8 database with the pool's page size and page cache (the driver's
    ``create_database`` takes those only from its process-wide configuration)."""
    core = require("firebird.driver.core")
    dpb = core.DPB(user=user, password=password or None, charset="UTF8", page_size=POOL_PAGE_SIZE,
                   db_cache_size=POOL_PAGE_BUFFERS)
    with core.a.get_api().master.get_dispatcher() as provider:
        attachment = provider.create_database(database, dpb.get_buffer(for_create=True), core.FS_ENCODING)
    attachment.detach()


def acquire(dsn: str):
    """A connection to ``dsn``: an idle one kept from an earlier request, else a new one."""
    con = _idle(process.current()).take(dsn, None)
    return con if con is not None else connect(dsn)


def release(dsn: str, con) -> None:
    """End the request's transaction and keep the connection for the next request."""
    try:
        if con.main_transaction.is_active():
            con.rollback()
    except Exception:
        _close_quietly([con])
        return
    if not _idle(process.current()).give(dsn, None, con, IDLE_PER_POOL):
        _close_quietly([con])


def close_connections() -> None:
    """Close every kept connection (tests, shutdown; also at exit)."""
    _idle(process.current()).clear()


def _idle(runtime: process.Runtime):
    """Connections kept between requests per DSN (the runtime's ``docpool.firebird_idle``)."""
    return runtime.cache("docpool.firebird_idle", max_entries=16, dispose=_close_quietly)


def _close_quietly(cons: list[Any]) -> None:
    for con in cons:
        try:
            for stmt, _ in getattr(con, "_knowspec_prepared", {}).values():
                stmt.free()  # before the attachment goes (a later free would fail)
            con.close()
        except Exception:
            pass



def schema_statements() -> list[str]:
    text = resources.files("knowspec.impl.docpool.sql").joinpath("firebird_schema.sql").read_text("utf-8")
    out = []
    for raw in text.split(";;"):
        sql = "\n".join(l for l in raw.splitlines() if not l.lstrip().startswith("--")).strip()
        if sql:
            out.append(sql)
    return out


SLUG_KEY = "cast(left({}, 200) as varchar(200))"  # doc$topic_slug's expression (firebird_schema.sql)
HAS_SCHEMA = "select count(*) from rdb$relations where rdb$relation_name in ('DOC$TOPIC', 'DOC$POOL_STATE')"
PREPARED_PER_CONNECTION = 64


def _has_schema(cur) -> bool:
    cur.execute(HAS_SCHEMA)
    return cur.fetchone()[0] == 2


def _has_table(cur, name: str) -> bool:
    cur.execute("select count(*) from rdb$relations where rdb$relation_name = ?", [name.upper()])
    return cur.fetchone()[0] > 0


def _value(v: Any) -> Any:
    """BLOBs above the driver's stream threshold arrive as readers."""
    return v.read() if hasattr(v, "read") else v


_READ_SNAPSHOT: bytes | None = None


def _read_snapshot() -> bytes:
    """The parameter block of a read-only SNAPSHOT transaction (built once: ~65 us a request)."""
    global _READ_SNAPSHOT
    if _READ_SNAPSHOT is None:
        driver = require("firebird.driver")
        _READ_SNAPSHOT = driver.tpb(driver.Isolation.SNAPSHOT, access_mode=driver.TraAccessMode.READ)
    return _READ_SNAPSHOT


# -- the storage ------------------------------------------------------------------------------

class FirebirdPool(SqlPool):
    """``PoolStorage`` over a Firebird pool: one read-only snapshot per request."""

    def __init__(self, dsn: str, *, location: str | None = None) -> None:
        driver = require("firebird.driver")

        self.dsn = dsn
        self.location = location or parse_dsn(dsn)[3]
        self.driver_errors = (driver.Error,)
        self._con = acquire(dsn)
        try:
            try:
                self._con.begin(_read_snapshot())
            except Exception:  # a kept connection that went stale: attach afresh
                _close_quietly([self._con])
                self._con = connect(dsn)
                self._con.begin(_read_snapshot())
            self._cur = self._con.cursor()
            if not getattr(self._con, "_knowspec_schema_seen", False):  # once per kept connection
                if not self._rows(HAS_SCHEMA)[0][0] == 2:
                    raise LookupError(f"{self.location} has no doc$ tables")
                self._con._knowspec_schema_seen = True
        except BaseException:
            _close_quietly([self._con])
            raise

    def close(self) -> None:
        if self._con is not None:
            self._cur.close()
            release(self.dsn, self._con)
            self._con = None

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        stmt, layout = self._prepared(sql)
        if layout is not None:
            try:
                return layout.rows(self._con._att, self._con.main_transaction._tra, params)
            except messages.Unpackable:
                pass  # a value this layout does not pack: the driver's path decides
        self._cur.execute(stmt, list(params))
        rows = [tuple(_value(v) for v in row) for row in self._cur.fetchall()]
        self._cur.close()  # the statement's cursor, before its layout opens it again
        return rows

    def _prepared(self, sql: str) -> tuple[Any, messages.Layout | None]:
        """``sql`` prepared once per connection (kept on it while it waits between requests):
        preparing and describing a statement cost more than running a doc_get's queries. With
        it, its message layout (``firebird_messages``), unless a type needs the driver's path."""
        kept = getattr(self._con, "_knowspec_prepared", None)
        if kept is None:
            kept = {}
            self._con._knowspec_prepared = kept
        found = kept.get(sql)
        if found is None:
            if len(kept) >= PREPARED_PER_CONNECTION:
                self._cur.close()  # it may hold one of them
                for old, _ in kept.values():
                    old.free()
                kept.clear()
            stmt = self._cur.prepare(sql)
            try:
                layout = messages.Layout(stmt, self._con._encoding)
            except messages.USE_THE_DRIVER:
                layout = None
            found = kept[sql] = (stmt, layout)
        return found

    def _stream(self, sql: str, params: Sequence[Any] = ()) -> Iterator[tuple]:
        """Rows fetched one at a time from a cursor of the request's transaction."""
        cur = self._con.cursor()
        try:
            cur.execute(sql, list(params))
            for row in cur:
                yield tuple(_value(v) for v in row)
        finally:
            cur.close()

    def _blob(self, value: Any) -> Any:
        return _value(value)

    def _has_table(self, name: str) -> bool:
        return _has_table(self._cur, name)

    def _slug_is(self, column: str) -> str:
        """The slug's indexed prefix (``doc$topic_slug``: a key of the whole VARCHAR(1000) in
        UTF8 is too long for an index), then the slug itself."""
        return f"{SLUG_KEY.format(column)} = {SLUG_KEY.format('cast(? as varchar(1000))')} and {column} = ?"

    def _not_indexed(self, expr: str) -> str:
        return f"{expr} || ''"  # the planner then takes the slug's index, and the collection by key

    # -- full text ---------------------------------------------------------------------------
    def fulltext_index(self, stamp: tuple) -> FtsIndex:
        """The pool's in-memory index at ``stamp``: the one the last import persisted when it
        was made at this stamp, else built here (once per stamp and process)."""
        stamp = stamp[1:]  # the import counter (location names may differ per caller)
        return self._cached_index("docpool.firebird_fts", parse_dsn(self.dsn)[0], stamp, build_index)


def build_index(rows, stamp: tuple, new: _source.WrittenRows | None = None) -> FtsIndex:
    """The full-text index of the pool ``rows(sql, params)`` reads (``new``: an import's
    collection, taken from memory instead of read back, ``_source.pool_index``)."""
    return _source.pool_index(stamp, lambda below: chunk_texts(rows, below),
                              lambda below: topic_slugs(rows, below), new)


def topic_slugs(rows, below: int | None = None) -> list[tuple]:
    """Every topic's ``(id, collection, slug)`` (with ``below``: ids below it)."""
    sql = "select id, collection, slug from doc$topic"
    return rows(sql) if below is None else rows(f"{sql} where id < ?", [below])


def chunk_texts(rows, below: int | None = None) -> list[tuple[int, int, str, str, str]]:
    """Every chunk's ``(id, topic_id, title, heading, body)`` (with ``below``: ids below it), for the index.

    Fetching 50k rows of three BLOBs costs ~60 us a BLOB in the driver, so the short chunks
    (nearly all) come as ONE text: ``list()`` of ``id,topic,len,len,len:`` headers each
    followed by the three texts cast to VARCHAR, split here by the lengths (characters, as
    Python counts them in UTF8). The long ones, and everything if that text does not parse
    back into exactly the rows counted, are fetched row by row."""
    short = " and ".join(f"char_length({c}) <= {n}" for c, n in LIST_LIMITS)
    where, params = "1 = 1", []
    if below is not None:
        where, params = "id < ?", [below]
    framed = " || ".join(["id || ',' || topic_id || ',' || char_length(title) || ',' || char_length(heading) "
                          "|| ',' || char_length(body) || ':'"] +
                         [f"cast({c} as varchar({n}))" for c, n in LIST_LIMITS])
    found = rows(f"select count(*), list({framed}, '') from doc$chunk where {short} and {where}", params)
    count, text = int(found[0][0]), _value(found[0][1]) or ""
    parsed = _parse_framed(text, count)
    if parsed is None:
        return rows(f"select id, topic_id, title, heading, body from doc$chunk where {where}", params)
    return parsed + rows(f"select id, topic_id, title, heading, body from doc$chunk where not ({short}) "
                         f"and {where}", params)


LIST_LIMITS = (("title", 1000), ("heading", 1000), ("body", 4000))  # characters; 6000 * 4 bytes < 32k


def _parse_framed(text: str, count: int) -> list[tuple[int, int, str, str, str]] | None:
    """The rows of ``chunk_texts``' framed text, or ``None`` unless exactly ``count`` parse."""
    out: list[tuple[int, int, str, str, str]] = []
    i, end = 0, len(text)
    try:
        while i < end:
            colon = text.index(":", i)
            chunk_id, topic_id, a, b, c = map(int, text[i:colon].split(","))
            s = colon + 1
            if min(a, b, c) < 0 or s + a + b + c > end:
                return None
            out.append((chunk_id, topic_id, text[s:s + a], text[s + a:s + a + b], text[s + a + b:s + a + b + c]))
            i = s + a + b + c
    except ValueError:
        return None
    return out if len(out) == count else None


def open_pool(location: PoolLocation) -> FirebirdPool:
    """The document pool at ``location`` (``STORAGE_OPENERS``), with the seed's error texts."""
    database = parse_dsn(location.dsn)[0]
    if is_local_file(database) and not Path(database).is_file():
        raise ToolError("pool_unavailable", f"document pool not imported ({location.docs_database}: {database})")
    try:
        return FirebirdPool(location.dsn, location=f"{location.docs_database} ({parse_dsn(location.dsn)[3]})")
    except ToolError:
        raise
    except Exception as exc:  # driver errors, missing engine, missing tables
        raise ToolError("pool_unavailable",
                        f"document pool not imported ({location.docs_database}: {exc})") from exc


# -- import -----------------------------------------------------------------------------------

_making: dict[str, threading.Lock] = {}
_making_guard = threading.Lock()


def _making_lock(database: str) -> threading.Lock:
    """This process's lock on making the pool at ``database`` (its file, its tables). Two first
    imports at once had raced: one failed with "object DATABASE is in use" or a duplicate
    ``RDB$RELATIONS`` key. The embedded engine admits one process per file, so a lock in the
    process is enough for a file (two processes making one pool behind a Firebird server are not
    kept apart)."""
    key = os.path.realpath(database) if is_local_file(database) else database
    with _making_guard:
        return _making.setdefault(key, threading.Lock())


def ensure_pool(dsn: str):
    """A write connection to the pool at ``dsn``, creating the file and the schema if needed."""
    database = parse_dsn(dsn)[0]
    with _making_lock(database):
        return _attached_with_schema(dsn, database)


def _attached_with_schema(dsn: str, database: str):
    if is_local_file(database):
        con = connect(dsn, create=not Path(database).exists())
    else:
        try:
            con = connect(dsn)
        except Exception:  # a server DSN naming a database that does not exist yet (untested)
            con = connect(dsn, create=True)
    try:
        _ensure_schema(con)
    except BaseException:
        _close_quietly([con])
        raise
    return con


def _ensure_schema(con) -> None:
    cur = con.cursor()
    if not _has_schema(cur):
        statements = schema_statements()
        for sql in statements:  # the DDL in one transaction (each commit is a forced write)
            if not sql.lower().startswith("insert"):
                cur.execute(sql)
        con.commit()
        for sql in statements:  # rows go into committed tables
            if sql.lower().startswith("insert"):
                cur.execute(sql)
        cur.executemany('insert into doc$meta(collection, name, "value") values (?, ?, ?)',
                        [list(m) for m in _source.DEFAULT_META])
        con.commit()
    else:  # a pool made before these were added
        if not _has_table(cur, SNAPSHOT_TABLE):
            cur.execute(next(sql for sql in schema_statements() if SNAPSHOT_TABLE in sql.split("(")[0]))
            con.commit()
        cur.execute("select count(*) from rdb$indices where rdb$index_name = 'DOC$TOPIC_SLUG'")
        if not cur.fetchone()[0]:
            cur.execute(next(sql for sql in schema_statements() if "doc$topic_slug" in sql))
            con.commit()


def _next_id(cur, table: str) -> int:
    cur.execute(f"select coalesce(max(id), 0) + 1 from {table}")
    return int(cur.fetchone()[0])


def _delete_collection(cur, collection: str, *, general_recipe_too: bool = True) -> None:
    """The collection's rows, and with ``general_recipe_too`` (an import, which brings its own)
    the general recipe's."""
    topics = "select id from doc$topic where collection = ?"
    for sql in (f"delete from doc$acl where topic_id in ({topics})",
                f"delete from doc$link where topic_id in ({topics})",
                f"delete from doc$topic_vec where topic_id in ({topics})",
                f"delete from doc$chunk_vec where chunk_id in (select ch.id from doc$chunk ch where ch.topic_id in ({topics}))",
                f"delete from doc$chunk where topic_id in ({topics})",
                "delete from doc$topic where collection = ?",
                "delete from doc$entity_rel where collection = ?",
                "delete from doc$alias where collection = ?",
                "delete from doc$entity where collection = ?",
                "delete from doc$entity_kind where collection = ?",
                "delete from doc$collection where id = ?"):
        cur.execute(sql, [collection])
    cur.execute("delete from doc$meta where collection in ('', ?)" if general_recipe_too else
                "delete from doc$meta where collection = ?", [collection])


INSERTS = (
    ("topics", "insert into doc$topic(id, collection, slug, title, breadcrumb, category, description, "
               "source_uri, mime, mtime, body_md) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
    ("chunks", "insert into doc$chunk(id, topic_id, ord, title, heading, body) values (?, ?, ?, ?, ?, ?)"),
    ("links", 'insert into doc$link(topic_id, kind, "key", key_ci, confidence, source) values (?, ?, ?, ?, ?, ?)'),
    ("acl", "insert into doc$acl(topic_id, principal, principal_ci) values (?, ?, ?)"),
    ("topic_vecs", "insert into doc$topic_vec(topic_id, vec) values (?, ?)"),
    ("chunk_vecs", "insert into doc$chunk_vec(chunk_id, vec) values (?, ?)"),
    ("entities", 'insert into doc$entity(id, collection, kind, "key", key_ci, key_fold, title, title_fold, attrs) '
                 "values (?, ?, ?, ?, ?, ?, ?, ?, ?)"),
    ("relations", "insert into doc$entity_rel(collection, from_kind, from_key, from_key_ci, rel, to_kind, to_key, "
                  "to_key_ci) values (?, ?, ?, ?, ?, ?, ?, ?)"),
    ("aliases", 'insert into doc$alias(collection, kind, alias, alias_ci, "key", key_ci, confidence) '
                "values (?, ?, ?, ?, ?, ?, ?)"),
    ("entity_kinds", "insert into doc$entity_kind(collection, kind, title, key_rule, url_template) "
                     "values (?, ?, ?, ?, ?)"),
    ("meta", 'insert into doc$meta(collection, name, "value") values (?, ?, ?)'),
)


def _insert(cur, name: str, sql: str, rows: Iterable[tuple]) -> None:
    """One table's rows (a seam the atomicity tests break on purpose); rows streamed from the
    source (vectors) a batch at a time."""
    if not isinstance(rows, list):
        for batch in _source.batches(rows):
            _insert(cur, name, sql, batch)
        return
    if not rows:
        return
    if name == "chunks":  # texts as VARCHAR parameters (no BLOB per value) where they fit
        (_, title), (_, heading), (_, body) = LIST_LIMITS
        fit = [len(r[3] or "") <= title and len(r[4] or "") <= heading and len(r[5] or "") <= body for r in rows]
        fits = [r for r, ok in zip(rows, fit) if ok]
        rest = [r for r, ok in zip(rows, fit) if not ok]
        casts = ", ".join(f"cast(? as varchar({n}))" for _, n in LIST_LIMITS)
        bulk_insert(cur, sql.replace("values (?, ?, ?, ?, ?, ?)", f"values (?, ?, ?, {casts})"), fits)
        bulk_insert(cur, sql, rest)
        return
    if name == "topics":  # a body that can be cast goes in as VARCHAR (``narrowed``): the engine makes its BLOB
        fit = [len(r[10] or "") <= MAX_CAST_CHARS for r in rows]
        bulk_insert(cur, sql, [r for r, ok in zip(rows, fit) if ok])
        bulk_insert(cur, sql, [r for r, ok in zip(rows, fit) if not ok])
        return
    bulk_insert(cur, sql, rows)


def bulk_insert(cur, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    """``cur.executemany(sql, rows)`` without the driver's per-value work: the statement's
    parameter layout is read once and each row is packed straight into its message buffer
    (``firebird_messages``; the driver describes every parameter again for every row, ~90% of an
    import's time). A row this layout does not pack (a value too long or of another type), and
    a driver without these internals, take the driver's own path, with its errors.

    (The engine's IBatch was measured here too: on the embedded engine it was twice slower than
    one execute per row, the batch copying every full-width message, ~24 KB for a chunk.)"""
    if not rows:
        return
    try:
        packer = _RowPacker(cur, sql)
        narrow = narrowed(sql, packer.kinds, rows)
        if narrow != sql:
            packer.close()
            packer = _RowPacker(cur, narrow)
    except messages.USE_THE_DRIVER:
        cur.executemany(sql, [list(r) for r in rows])
        return
    try:
        for row in rows:
            if not packer.execute(row):
                cur.executemany(sql, [list(row)])
    finally:
        packer.close()


MAX_CAST_CHARS = 8191  # the longest VARCHAR a UTF8 parameter can be cast to (32765 bytes)


def narrowed(sql: str, kinds: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """``sql`` (an INSERT with one ``?`` per parameter, of the layout ``kinds``) with each VARCHAR
    parameter cast to the longest text ``rows`` give it (characters, rounded up to a power of
    two). The engine takes in every message at its declared width (a link row's is ~10 KB: a
    VARCHAR(1000) in UTF8 is 4000 bytes however short its text), so a narrower message costs
    less per row; the values, and the column each one goes into, are the same. A text BLOB
    parameter whose texts all fit is cast the same way: the engine makes the BLOB from the text
    (as for chunk texts), instead of three calls per value here. ``sql`` itself when a VARCHAR
    parameter takes something else than text, or a text too long to cast."""
    pieces = sql.split("?")
    if len(pieces) != len(kinds) + 1:
        return sql
    out = [pieces[0]]
    for i, (kind, piece) in enumerate(zip(kinds, pieces[1:])):
        param = "?"
        if kind in ("varying", "blob"):
            values = [r[i] for r in rows if r[i] is not None]
            texts = all(isinstance(v, str) for v in values)
            longest = max(map(len, values), default=1) if texts else MAX_CAST_CHARS + 1
            if longest <= MAX_CAST_CHARS:
                param = f"cast(? as varchar({min(1 << max(longest - 1, 0).bit_length(), MAX_CAST_CHARS)}))"
            elif kind == "varying":
                return sql
        out += [param, piece]
    return "".join(out)


class _RowPacker:
    """One prepared INSERT and its input message layout (driver internals, read once)."""

    def __init__(self, cur, sql: str) -> None:
        con, tra = cur._connection, cur._transaction
        if not tra.is_active():
            tra.begin()
        self._stmt = con._prepare(sql, tra)
        try:
            self._layout = messages.Layout(self._stmt, con._encoding)
        except BaseException:
            self._stmt.free()
            raise
        self._tra, self._att, self._encoding = tra._tra, con._att, con._encoding
        self.kinds = [kind for kind, *_ in self._layout.params]
        # The statement's execute entry and this thread's status, looked up once: the driver's
        # own ``execute`` reads both and turns the status into enum flags on every call
        # (~15 us of a ~50 us row); the status is read here as the integer it is, and handed
        # to the driver's check only when it holds an error or a warning.
        istmt = self._stmt._istmt
        self._istmt, self._status = istmt, istmt.status
        self._execute = istmt.vtable.execute
        self._state = self._status.vtable.getState

    def execute(self, row: Sequence[Any]) -> bool:
        """Insert ``row``; False when it does not fit the layout (nothing was sent)."""
        try:
            buf = self._layout.pack(row, self._blob)
        except messages.Unpackable:
            return False
        tra = self._tra
        tra._as_parameter_ = self._execute(self._istmt, self._status, tra, self._stmt._in_meta, buf, None, None)
        if self._state(self._status):  # errors (2) or warnings (1): the driver raises or warns
            self._istmt._check()
        return True

    def _blob(self, value: Any) -> bytes:
        return messages.write_blob(self._att, self._tra, value, self._encoding)

    def close(self) -> None:
        self._stmt.free()


def select_rows(cur, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
    """All rows of ``sql`` in ``cur``'s transaction, read through the statement's message layout
    when it has one (an import reads every topic and chunk text back: ~1 s by the driver's path)."""
    con, tra = cur._connection, cur._transaction
    try:
        if not tra.is_active():
            tra.begin()
        stmt = con._prepare(sql, tra)
    except AttributeError:  # a driver without these internals
        stmt = None
    if stmt is not None:
        try:
            return messages.Layout(stmt, con._encoding).rows(con._att, tra._tra, params)
        except messages.USE_THE_DRIVER:
            pass
        finally:
            stmt.free()
    cur.execute(sql, list(params))
    return [tuple(_value(v) for v in row) for row in cur.fetchall()]


def persist_index(cur, new: _source.WrittenRows | None = None) -> None:
    """Inside the import's transaction: build the whole pool's full-text index (``new``, the
    collection just inserted, from memory; the other rows read back) and persist it with the
    new stamp."""

    def rows(sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return select_rows(cur, sql, params)

    stamp = int(rows("select stamp from doc$pool_state where id = 1")[0][0])
    index = build_index(rows, (stamp,), new)
    blob = dump(index, str(stamp))
    cur.execute(f"delete from {SNAPSHOT_TABLE}")
    _insert(cur, "fts_snapshot", f"insert into {SNAPSHOT_TABLE}(part, revision, data) values (?, ?, ?)",
            [(k, str(stamp), part) for k, part in enumerate(parts(blob, compress=True))])


def _settle(con) -> None:
    """After an import commits: recompute the selectivity of the pool's indexes. Firebird keeps
    the figure it took when an index was made, on an empty table, and with every index looking
    unique its optimizer looked topics up through ``doc$topic_collection`` (a scan of the whole
    collection) instead of their primary key: 8.5 ms instead of 0.8 for ten topics of databricks'
    5,120, on every search. Best effort: the import itself is committed."""
    try:
        cur = con.cursor()
        cur.execute("select trim(rdb$index_name) from rdb$indices "
                    "where rdb$relation_name starting with 'DOC$' and coalesce(rdb$system_flag, 0) = 0")
        for (name,) in cur.fetchall():
            cur.execute(f'set statistics index "{name}"')
        con.commit()
    except Exception:  # an old engine or a lock: the next import or reindex tries again
        with contextlib.suppress(Exception):  # nor may a broken connection fail the import
            con.rollback()


UPDATE_CONFLICT = 335544451  # isc_update_conflict: the row changed after this transaction's snapshot began
STAMP_ATTEMPTS = 100


def _move_stamp(con, cur) -> None:
    """Move the pool's stamp: the first write of every import, removal and reindex, which
    serialises them. Under snapshot isolation the second of two waits on the row until the first
    commits, then fails with an update conflict (its snapshot began before that commit); it has
    written nothing yet, so it begins again in a snapshot taken after it. (Two imports at once
    into one Firebird pool had failed the second with "deadlock".)"""
    for attempt in range(1, STAMP_ATTEMPTS + 1):
        try:
            cur.execute("update doc$pool_state set stamp = stamp + 1 where id = 1")
            return
        except Exception as exc:
            if UPDATE_CONFLICT not in getattr(exc, "gds_codes", ()) or attempt == STAMP_ATTEMPTS:
                raise
            con.rollback()


def reindex(dsn: str) -> None:
    """Persist the pool's full-text index again (``knowspec pool reindex``), in one transaction
    that moves the stamp like an import (serialised with imports; every process reloads): a pool
    imported before imports persisted it gets a first search that loads instead of builds."""
    con = ensure_pool(dsn)
    try:
        with _one_transaction(con) as cur:
            _move_stamp(con, cur)
            persist_index(cur)
        _settle(con)
    finally:
        con.close()


def _general_meta(cur) -> dict[str, str]:
    cur.execute('select name, "value" from doc$meta where collection = \'\'')
    return {name: _value(value) for name, value in cur.fetchall()}


def _one_vector(cur) -> bytes | None:
    """A vector of the pool's (other) collections, or None."""
    cur.execute("select first 1 vec from doc$chunk_vec")
    found = cur.fetchone()
    if found is None:
        cur.execute("select first 1 vec from doc$topic_vec")
        found = cur.fetchone()
    return None if found is None else bytes(_value(found[0]))


def import_collection(dsn: str, source: Path | str, collection: str) -> ImportResult:
    """IMPORTDOC into the Firebird pool at ``dsn``: replace ``collection`` with the source's rows
    in one transaction (``recipe.import_collection``'s refusals and result)."""
    with _source.collection_rows(source, collection) as src:  # refusals before the target is touched
        try:
            con = ensure_pool(dsn)
        except Exception as exc:  # cannot attach or create the database
            raise ImportFailed(str(exc) or type(exc).__name__) from exc
        try:
            with _one_transaction(con) as cur:
                _move_stamp(con, cur)  # serialises imports
                recipe_before = _general_meta(cur)  # the delete takes the general recipe too
                _delete_collection(cur, collection)
                _source.refuse_another_model(src, source, recipe_before, _one_vector(cur))
                cur.execute("insert into doc$collection(id, title, kind, erisim, generated, help_url_v3) "
                            "values (?, ?, ?, ?, ?, ?)", list(src.collection))
                rows = _source.target_rows(src, next_topic_id=_next_id(cur, "doc$topic"),
                                           next_chunk_id=_next_id(cur, "doc$chunk"),
                                           next_entity_id=_next_id(cur, "doc$entity"))
                for name, sql in INSERTS:
                    _insert(cur, name, sql, getattr(rows, name))
                written = rows.written()
                persist_index(cur, written)
                src.source.refuse_changed()  # last, inside the transaction: a source written over rolls it back
            _settle(con)
            return ImportResult(collection, len(written.topics), len(written.chunks), str(source))
        finally:
            con.close()


@contextlib.contextmanager
def _one_transaction(con) -> Iterator[Any]:
    """A cursor whose work commits when the block ends and rolls back on any error: a refusal
    passes through as it is, any other error becomes ``ImportFailed`` (nothing changed)."""
    cur = con.cursor()
    try:
        yield cur
        con.commit()
    except ImportRefused:
        con.rollback()
        raise
    except Exception as exc:
        con.rollback()
        raise ImportFailed(str(exc) or type(exc).__name__) from exc


def remove_collection(dsn: str, collection: str) -> RemovedCollection:
    """Remove ``collection`` from the Firebird pool at ``dsn`` in one transaction that moves the
    stamp like an import (every process reloads), the index persisted without it; the general
    recipe stays (the other collections read it)."""
    try:
        con = connect(dsn)  # never made here: a removal from no pool is refused
    except Exception as exc:
        raise ImportFailed(str(exc) or type(exc).__name__) from exc
    try:
        with _one_transaction(con) as cur:
            if not _has_schema(cur):
                raise absent_collection(collection)
            _move_stamp(con, cur)
            cur.execute(removal_counts_sql("?") + " from rdb$database", [collection] * 3)
            topics, chunks, found = cur.fetchone()
            if not found:
                raise absent_collection(collection)
            _delete_collection(cur, collection, general_recipe_too=False)
            persist_index(cur)
        _settle(con)
        return RemovedCollection(collection, int(topics), int(chunks))
    finally:
        con.close()
