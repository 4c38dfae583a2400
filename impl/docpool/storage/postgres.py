"""PostgreSQL pool storage: schema ``ivd$docs``; full text ranked by the shared search layer.

The DSN is a libpq connection string or URL; connections come from a ``psycopg_pool``
ConnectionPool per DSN, with ``search_path = ivd$docs`` and server-side parameter binding
(values are never formatted into SQL). Each request reads one snapshot (a READ ONLY
REPEATABLE READ transaction), so a reader never sees half an import; an import replaces a
collection in ONE transaction, visible to the next read.

Folding: ``doc$fold`` is generated from ``rules.fold`` (``fold_function_sql``): ASCII runs go
through ``translate``, every other character through a map holding each code point whose
Python fold differs from itself, so ``doc$fold(x) = fold(x)`` for all text.

Full text: like Firebird, the storage hands over an in-memory index of its chunk rows
(``fulltext.reader.FtsIndex``: made by every import and persisted in ``doc$fts_snapshot``, or
built from the rows once per import counter when that is missing; tokenised as FTS5 does,
original texts and topic titles kept), and the search layer (``fulltext.search``) ranks it with
FTS5's ``bm25()`` and ``snippet()`` rules, so hits equal a SQLite pool's: same topics, order,
scores, snippets. No ranking SQL runs here, and the pool keeps no tsvector or GIN index (pools
made before carry them until their next import, which drops them).
"""

from __future__ import annotations

import atexit
import json
import sys
import unicodedata
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from knowspec.impl import runtime as process
from knowspec.impl.docpool.catalog import PoolLocation
from knowspec.impl.docpool.recipe import (ImportRefused, ImportResult, RemovedCollection, absent_collection,
                                          removal_counts_sql)
from knowspec.impl.docpool.storage import _source
from knowspec.impl.docpool.storage._sqlpool import SqlPool
from knowspec.impl.docpool.fulltext.reader import SNAPSHOT_TABLE, FtsIndex, dump, parts
from knowspec.impl.errors import ToolError
from knowspec.impl.extras import require
from knowspec.impl.rules.fold import ascii_lower, fold_char

SCHEMA = "ivd$docs"
UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
CONNECT_TIMEOUT = 10.0  # seconds a request waits for a connection (an unreachable server fails then)
STREAM_ROWS = 2000      # rows per round trip when streaming vectors (~3 MB of 384-d BLOBs)


ImportFailed = _source.ImportFailed  # raised by import_collection: rolled back, nothing changed


# -- doc$fold, generated from rules.fold --------------------------------------------------------

@lru_cache(maxsize=1)
def fold_map() -> dict[str, str]:
    """Every non-ASCII code point whose ``rules.fold`` differs from itself (unassigned and
    private-use code points fold to themselves, so they are skipped)."""
    out = {}
    for cp in range(0x80, sys.maxunicode + 1):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        ch = chr(cp)
        if unicodedata.category(ch) in ("Cn", "Co"):
            continue
        folded = fold_char(ch)
        if folded != ch:
            out[ch] = folded
    return out


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def fold_function_sql() -> str:
    """``doc$fold_map()``, ``doc$fold_mapped(text)`` and ``doc$fold(text)`` (generated DDL).

    The map is a jsonb constant. ``doc$fold`` is a plain expression (inlined by the planner): an
    ASCII text (every folded query) never touches the map. ``doc$fold_mapped`` is PL/pgSQL so
    its plan, with the map parsed once, is cached per session instead of per call."""
    mapping = json.dumps(fold_map(), ensure_ascii=False, sort_keys=True)
    lower = f"{_literal(UPPER)}, {_literal(UPPER.lower())}"
    return f"""
create or replace function doc$fold_map() returns jsonb language sql immutable parallel safe
as $fold_map$ select {_literal(mapping)}::jsonb $fold_map$;
create or replace function doc$fold_mapped(t text) returns text language plpgsql immutable strict parallel safe
as $fold_mapped$
begin
  return (select string_agg(case when octet_length(c) = char_length(c) then translate(c, {lower})
                                 else coalesce("ivd$docs".doc$fold_map() ->> c, c) end, '' order by n)
          from regexp_split_to_table(t, '(?=[^\\x01-\\x7f])|(?<=[^\\x01-\\x7f])') with ordinality as s(c, n));
end
$fold_mapped$;
create or replace function doc$fold(t text) returns text language sql immutable strict parallel safe
as $fold$
select case when octet_length(t) = char_length(t) then translate(t, {lower})
            else coalesce("ivd$docs".doc$fold_mapped(t), '') end
$fold$;
"""


def schema_sql() -> str:
    return resources.files("knowspec.impl.docpool.sql").joinpath("postgres_schema.sql").read_text("utf-8")


# -- connections ----------------------------------------------------------------------------

def _configure(con) -> None:
    con.execute(f'set search_path to "{SCHEMA}", public')
    con.commit()


def connection_pool(dsn: str):
    """The process's ``psycopg_pool.ConnectionPool`` for ``dsn`` (opened on first use)."""
    ConnectionPool = require("psycopg_pool").ConnectionPool

    pools = _pools(process.current())
    pool = pools.get(dsn, None, lambda: _open_pool(ConnectionPool, dsn))
    if pool.closed:
        pools.pop(dsn)
        pool = pools.get(dsn, None, lambda: _open_pool(ConnectionPool, dsn))
    return pool


def _open_pool(ConnectionPool, dsn: str):
    return ConnectionPool(dsn, min_size=0, max_size=4, configure=_configure, open=True,
                          kwargs={"prepare_threshold": None})


def _pools(runtime: process.Runtime):
    """Connection pools per DSN (the runtime's ``docpool.postgres_pools``), closed when dropped."""
    return runtime.cache("docpool.postgres_pools", max_entries=16, dispose=lambda pool: pool.close())


def close_pools() -> None:
    """Close every connection pool (tests, shutdown)."""
    _pools(process.current()).clear()


atexit.register(close_pools)


def display(dsn: str) -> str:
    """The DSN without its password, for messages."""
    conninfo_to_dict = require("psycopg.conninfo").conninfo_to_dict

    try:
        parts = conninfo_to_dict(dsn)
    except Exception:
        return "postgresql"
    parts.pop("password", None)
    return " ".join(f"{k}={v}" for k, v in sorted(parts.items()))


# One round trip opens a request: its snapshot and the check that the pool's tables exist.
OPEN_SQL = ("begin isolation level repeatable read read only; "
            f"select to_regclass('\"{SCHEMA}\".doc$topic') is not null "
            f"and to_regclass('\"{SCHEMA}\".doc$pool_state') is not null")


class PostgresPool(SqlPool):
    """``PoolStorage`` over a PostgreSQL pool: one READ ONLY REPEATABLE READ snapshot per request."""

    def __init__(self, dsn: str, *, location: str | None = None) -> None:
        self.dsn = dsn
        self.location = location or display(dsn)
        self.driver_errors = (require("psycopg").Error,)
        self._pool = connection_pool(dsn)
        self._con = self._pool.getconn(timeout=CONNECT_TIMEOUT)
        try:
            # The BEGIN is ours (sent with the check): autocommit keeps psycopg from sending its own.
            self._con.autocommit = True
            self._cur = self._con.cursor()
            self._cur.execute(OPEN_SQL, prepare=False)  # several statements: never a prepared one
            self._cur.nextset()
            if not self._cur.fetchone()[0]:
                raise LookupError(f"{self.location} has no {SCHEMA} schema")
        except BaseException:
            self._release()
            raise

    def close(self) -> None:
        if self._con is not None:
            self._release()

    def _release(self) -> None:
        con, self._con = self._con, None
        try:
            con.rollback()
            con.autocommit = False
        except Exception:
            con.close()  # a broken connection: the pool replaces it
        self._pool.putconn(con)

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        self._cur.execute(sql.replace("?", "%s"), list(params))
        return [tuple(r) for r in self._cur.fetchall()]

    def _stream(self, sql: str, params: Sequence[Any] = ()) -> Iterator[tuple]:
        """A server-side cursor, ``STREAM_ROWS`` rows per round trip, inside the request's
        transaction: a client cursor would first hold the whole result in libpq's memory."""
        with self._con.cursor(name="knowspec_stream", binary=True) as cur:
            cur.itersize = STREAM_ROWS
            cur.execute(sql.replace("?", "%s"), list(params))
            for row in cur:
                yield tuple(row)

    def _text_order(self, expr: str) -> str:
        return f'{expr} collate "C"'

    def _blob(self, value: Any) -> Any:
        return bytes(value) if isinstance(value, memoryview) else value

    def _has_table(self, name: str) -> bool:
        """(``SqlPool._persisted_index``: pools made before ``doc$fts_snapshot`` lack it.)"""
        return bool(self._rows("select to_regclass(?) is not null", [f'"{SCHEMA}".{name}'])[0][0])

    # -- full text ---------------------------------------------------------------------------
    def fulltext_index(self, stamp: tuple) -> FtsIndex:
        """The pool's in-memory index at ``stamp``: the one the last import persisted when it was
        made at this import counter, else built from this request's snapshot (once per counter
        and DSN, in the runtime's ``docpool.postgres_fts``)."""
        stamp = stamp[1:]  # the import counter (location names may differ per caller)
        return self._cached_index("docpool.postgres_fts", self.dsn, stamp, index_of)


def open_pool(location: PoolLocation) -> PostgresPool:
    """The document pool at ``location`` (``STORAGE_OPENERS``), with the seed's error texts."""
    try:
        return PostgresPool(location.dsn, location=f"{location.docs_database} ({display(location.dsn)})")
    except Exception as exc:  # unreachable server, missing schema
        raise ToolError("pool_unavailable",
                        f"document pool not imported ({location.docs_database}: {exc})") from exc


# -- import -----------------------------------------------------------------------------------

SCHEMA_LOCK = 0x6b73_646f_6373  # pg_advisory_xact_lock key: one schema step at a time per database


def ensure_schema(con) -> None:
    """Create ``ivd$docs``, ``doc$fold`` and the tables if needed (one transaction, or a part of
    the caller's). One at a time: two imports replacing ``doc$fold`` at once had failed with
    "tuple concurrently updated"."""
    with con.transaction():
        con.execute("select pg_advisory_xact_lock(%s)", [SCHEMA_LOCK])
        con.execute(f'create schema if not exists "{SCHEMA}"')
        con.execute(f'set local search_path to "{SCHEMA}", public')
        con.execute(fold_function_sql())
        con.execute(schema_sql())
        _drop_unused_fulltext(con)
        cur = con.cursor()
        cur.executemany('insert into doc$meta(collection, name, "value") values (%s, %s, %s) '
                        "on conflict do nothing", [list(m) for m in _source.DEFAULT_META])


def _drop_unused_fulltext(con) -> None:
    """Pools made while PostgreSQL ranked full text carry a tsvector column and its GIN index that
    nothing reads now; an import drops them (catalog-only changes) instead of filling them."""
    stale = con.execute("select 1 from pg_attribute where attrelid = 'doc$chunk'::regclass "
                        "and attname = 'fts' and not attisdropped").fetchone()
    if stale:  # only then: the ALTER waits for every reader of doc$chunk to finish
        con.execute("drop index if exists doc$chunk_fts")
        con.execute("alter table doc$chunk drop column fts")


# COPY for every table (one stream per table, no statement per row).
INSERTS = (
    ("topics", "copy doc$topic(id, collection, slug, title, breadcrumb, category, description, "
               "source_uri, mime, mtime, body_md) from stdin"),
    ("chunks", "copy doc$chunk(id, topic_id, ord, title, heading, body) from stdin"),
    ("links", "copy doc$link(topic_id, kind, key, key_ci, confidence, source) from stdin"),
    ("acl", "copy doc$acl(topic_id, principal, principal_ci) from stdin"),
    ("topic_vecs", "copy doc$topic_vec(topic_id, vec) from stdin"),
    ("chunk_vecs", "copy doc$chunk_vec(chunk_id, vec) from stdin"),
    ("entities", "copy doc$entity(id, collection, kind, key, key_ci, key_fold, title, title_fold, attrs) from stdin"),
    ("relations", "copy doc$entity_rel(collection, from_kind, from_key, from_key_ci, rel, to_kind, to_key, "
                  "to_key_ci) from stdin"),
    ("aliases", "copy doc$alias(collection, kind, alias, alias_ci, key, key_ci, confidence) from stdin"),
    ("entity_kinds", "copy doc$entity_kind(collection, kind, title, key_rule, url_template) from stdin"),
    ("meta", 'copy doc$meta(collection, name, "value") from stdin'),
)

DELETES = (
    "delete from doc$acl where topic_id in (select id from doc$topic where collection = %(c)s)",
    "delete from doc$link where topic_id in (select id from doc$topic where collection = %(c)s)",
    "delete from doc$topic_vec where topic_id in (select id from doc$topic where collection = %(c)s)",
    "delete from doc$chunk_vec where chunk_id in (select ch.id from doc$chunk ch join doc$topic t "
    "on t.id = ch.topic_id where t.collection = %(c)s)",
    "delete from doc$chunk where topic_id in (select id from doc$topic where collection = %(c)s)",
    "delete from doc$topic where collection = %(c)s",
    "delete from doc$entity_rel where collection = %(c)s",
    "delete from doc$alias where collection = %(c)s",
    "delete from doc$entity where collection = %(c)s",
    "delete from doc$entity_kind where collection = %(c)s",
    "delete from doc$meta where collection in ('', %(c)s)",
    "delete from doc$collection where id = %(c)s",
)
# A removal keeps the general recipe (collection ''): the other collections read it.
REMOVAL_DELETES = (*(sql for sql in DELETES if "doc$meta" not in sql), "delete from doc$meta where collection = %(c)s")


def _insert(cur, name: str, sql: str, rows: Iterable[tuple]) -> None:
    """One table's rows, streamed by COPY (a seam the atomicity tests break on purpose)."""
    if isinstance(rows, list) and not rows:
        return
    with cur.copy(sql) as copy:
        for row in rows:
            copy.write_row(row)


def _general_meta(cur) -> dict[str, str]:
    return dict(cur.execute("select name, value from doc$meta where collection = ''").fetchall())


def _one_vector(cur) -> bytes | None:
    """A vector of the pool's (other) collections, or None."""
    found = cur.execute("select vec from doc$chunk_vec union all select vec from doc$topic_vec limit 1").fetchone()
    return None if found is None else bytes(found[0])


def _replace_collection(cur, src: _source.CollectionRows, collection: str,
                        source: Path | str) -> _source.WrittenRows:
    """Inside the import's transaction: bump the stamp (serialising imports), delete the
    collection, insert the source's rows with fresh ids (``src`` is emptied as they move)."""
    cur.execute("update doc$pool_state set stamp = stamp + 1 where id = 1")
    recipe_before = _general_meta(cur)  # the deletes take the general recipe too
    for sql in DELETES:
        cur.execute(sql, {"c": collection})
    _source.refuse_another_model(src, source, recipe_before, _one_vector(cur))
    cur.execute("insert into doc$collection(id, title, kind, erisim, generated, help_url_v3) "
                "values (%s, %s, %s, %s, %s, %s)", list(src.collection))
    nxt = [cur.execute(f"select coalesce(max(id), 0) + 1 from {t}").fetchone()[0]
           for t in ("doc$topic", "doc$chunk", "doc$entity")]
    rows = _source.target_rows(src, next_topic_id=nxt[0], next_chunk_id=nxt[1], next_entity_id=nxt[2])
    for name, sql in INSERTS:
        _insert(cur, name, sql, getattr(rows, name))
    written = rows.written()
    _persist_index(cur, written)
    src.source.refuse_changed()  # last, inside the transaction: a source written over rolls it back
    return written


def index_of(rows, stamp: tuple, new: _source.WrittenRows | None = None) -> FtsIndex:
    """The search layer's full-text index of every chunk ``rows(sql, params)`` reads (``new``: an
    import's collection, taken from memory instead of read back, ``_source.pool_index``)."""

    def below(sql: str):
        return lambda bound: rows(sql) if bound is None else rows(f"{sql} where id < %s", [bound])

    return _source.pool_index(stamp, below("select id, topic_id, title, heading, body from doc$chunk"),
                              below("select id, collection, slug from doc$topic"), new)


def _persist_index(cur, new: _source.WrittenRows | None = None) -> None:
    """Inside the import's transaction: the whole pool's index (``new``, the collection just
    inserted, from memory), persisted with the new counter, so a process's first search loads
    it instead of tokenising every chunk."""
    stamp = int(cur.execute("select stamp from doc$pool_state where id = 1").fetchone()[0])
    blob = dump(index_of(lambda sql, params=(): cur.execute(sql, params).fetchall(), (stamp,), new), str(stamp))
    cur.execute(f"delete from {SNAPSHOT_TABLE}")
    with cur.copy(f"copy {SNAPSHOT_TABLE}(part, revision, data) from stdin") as copy:
        for k, part in enumerate(parts(blob, compress=True)):
            copy.write_row((k, str(stamp), part))


def _settle(con) -> None:
    """After an import commits: refresh the planner's statistics (the lookups' plans depend on
    them). Best effort."""
    try:
        with con.transaction():
            con.execute("analyze doc$chunk, doc$topic, doc$collection, doc$link, doc$acl")
    except Exception:  # the import itself is committed; autovacuum will do this later
        pass


def reindex(dsn: str) -> None:
    """Persist the pool's full-text index again (``knowspec pool reindex``), in one transaction
    that moves the counter like an import (serialised with imports; every process reloads): a
    pool imported before imports persisted it gets a first search that loads instead of builds."""
    try:
        with connection_pool(dsn).connection(timeout=CONNECT_TIMEOUT) as con:
            ensure_schema(con)
            with con.transaction():
                cur = con.cursor()
                cur.execute("update doc$pool_state set stamp = stamp + 1 where id = 1")
                _persist_index(cur)
            _settle(con)
    except Exception as exc:
        raise ImportFailed(str(exc) or type(exc).__name__) from exc


def import_collection(dsn: str, source: Path | str, collection: str) -> ImportResult:
    """IMPORTDOC into the PostgreSQL pool at ``dsn``: replace ``collection`` with the source's
    rows in ONE transaction (``recipe.import_collection``'s refusals and result)."""
    with _source.collection_rows(source, collection) as src:  # refusals before the target is touched
        try:
            with connection_pool(dsn).connection(timeout=CONNECT_TIMEOUT) as con:
                with con.transaction():  # the schema step too: a failed import leaves no trace
                    ensure_schema(con)
                    rows = _replace_collection(con.cursor(), src, collection, source)
                _settle(con)
        except ImportRefused:
            raise  # rolled back: nothing changed
        except Exception as exc:  # connection, psycopg and injected failures alike: rolled back
            raise ImportFailed(str(exc) or type(exc).__name__) from exc
    return ImportResult(collection, len(rows.topics), len(rows.chunks), str(source))


def remove_collection(dsn: str, collection: str) -> RemovedCollection:
    """Remove ``collection`` from the PostgreSQL pool at ``dsn`` in one transaction that moves the
    counter like an import (every process reloads), the index persisted without it."""
    try:
        with connection_pool(dsn).connection(timeout=CONNECT_TIMEOUT) as con:
            with con.transaction():
                ensure_schema(con)
                cur = con.cursor()
                cur.execute("update doc$pool_state set stamp = stamp + 1 where id = 1")
                topics, chunks, found = cur.execute(removal_counts_sql("%(c)s"), {"c": collection}).fetchone()
                if not found:
                    raise absent_collection(collection)
                for sql in REMOVAL_DELETES:
                    cur.execute(sql, {"c": collection})
                _persist_index(cur)
            _settle(con)
    except ImportRefused:
        raise  # rolled back: nothing changed
    except Exception as exc:
        raise ImportFailed(str(exc) or type(exc).__name__) from exc
    return RemovedCollection(collection, int(topics), int(chunks))
