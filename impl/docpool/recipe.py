"""Run the IMPORTDOC recipe (``sql/doc_import.sql``) against a SQLite document pool.

The REST ``IMPORTDOC`` command (another module) validates its parameters and calls
``import_collection``; the pool builder's tests call it too, so the recipe has one executor.
Vectors travel with their collection; a source whose vectors come from another model (or
dimension) than the vectors of the target's other collections is refused before any change.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections import Counter
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from knowspec.impl.docpool.fulltext.reader import sqlite_persist
from knowspec.impl.docpool.storage.sqlite import import_recipe_sql, open_for_write
from knowspec.impl.docpool.storage.staging import link_into_place, staged, sweep_dead_staging
from knowspec.impl.docpool.vectors.pool_embed import PoolModelIdentity, identity_conflict, identity_of

COLLECTION_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


class ImportRefused(Exception):
    """The import cannot start (invalid name, missing source, collection absent): target untouched."""


@dataclass(frozen=True)
class ImportResult:
    collection: str
    topics: int
    chunks: int
    source: str


@dataclass(frozen=True)
class RemovedCollection:
    collection: str
    topics: int
    chunks: int


def removal_counts_sql(param: str, table: Callable[[str], str] = lambda name: name) -> str:
    """One select of a collection's topics, chunks and collection rows (0 or 1), in a storage's
    spelling: ``param`` its placeholder, ``table`` how it names a table."""
    topic, chunk, coll = table("doc$topic"), table("doc$chunk"), table("doc$collection")
    return (f"select (select count(*) from {topic} where collection = {param}), "
            f"(select count(*) from {chunk} ch join {topic} t on t.id = ch.topic_id where t.collection = {param}), "
            f"(select count(*) from {coll} where id = {param})")


def absent_collection(collection: str) -> ImportRefused:
    """The refusal of a removal whose collection the pool does not hold (every storage)."""
    return ImportRefused(f"collection {collection} is not in the pool")


def recipe_statements() -> list[str]:
    """The recipe's statements, in order (comments removed)."""
    parts = []
    for raw in import_recipe_sql().split("\n;;"):
        sql = "\n".join(l for l in raw.splitlines() if not l.lstrip().startswith("--")).strip()
        if sql:
            parts.append(sql)
    return parts


def _vector_identity(con: sqlite3.Connection, schema: str, where: str, params: list) -> PoolModelIdentity | None:
    """The model identity of ``schema``'s vectors selected by ``where``; ``None`` without vectors."""
    sample = con.execute(f'select v.vec from {schema}."doc$chunk_vec" v join {schema}."doc$chunk" ch on ch.id = v.chunk_id '
                         f'join {schema}."doc$topic" t on t.id = ch.topic_id where {where} '
                         f'union all select v.vec from {schema}."doc$topic_vec" v '
                         f'join {schema}."doc$topic" t on t.id = v.topic_id where {where} limit 1',
                         params + params).fetchone()
    if sample is None:
        return None
    meta = dict(con.execute(f'select name, value from {schema}."doc$meta" where collection = \'\'').fetchall())
    return identity_of(meta, sample[0])


def vector_shape_fault(con: sqlite3.Connection, schema: str, collection: str) -> str | None:
    """What keeps the vectors of ``collection`` in ``schema`` from loading as one matrix (a value
    that is not a BLOB, BLOBs of two sizes, a size that is no whole number of float32 values), or
    None. The model check reads one vector; this reads every one's type and size, so a
    collection of mixed vectors is refused instead of breaking vector search of the whole pool.
    A source without the vector tables has no fault here: its import fails, a storage error."""
    try:
        shapes = con.execute(
            f'select typeof(vec), length(vec) from (select v.vec from {schema}."doc$chunk_vec" v '
            f'join {schema}."doc$chunk" ch on ch.id = v.chunk_id join {schema}."doc$topic" t on t.id = ch.topic_id '
            f'where t.collection = :c union all select v.vec from {schema}."doc$topic_vec" v '
            f'join {schema}."doc$topic" t on t.id = v.topic_id where t.collection = :c) group by 1, 2 limit 2',
            {"c": collection}).fetchall()
    except sqlite3.OperationalError:  # no such table
        return None
    kinds = [kind for kind, _ in shapes if kind != "blob"]
    if kinds:
        return f"a vector is stored as {kinds[0]}, not as a BLOB"
    if len(shapes) > 1:
        return f"vectors of {shapes[0][1]} and {shapes[1][1]} bytes in one collection"
    if shapes and (shapes[0][1] == 0 or shapes[0][1] % 4):
        return f"vectors of {shapes[0][1]} bytes, no whole number of float32 values"
    return None


def unloadable_vectors(source: Path | str, fault: str) -> str:
    """The refusal of a source whose vectors cannot load (every storage says it so)."""
    return f"source vectors cannot be loaded ({source}): {fault}"


def model_mismatch(source: Path | str, conflict: str) -> str:
    """The refusal of a source whose vectors cannot join the pool's (every storage says it so)."""
    return f"embedding model does not match the pool ({source}): {conflict}"


def vector_model_conflict(con: sqlite3.Connection, collection: str) -> str | None:
    """Why the source's vectors (attached as ``src``) cannot join the target's other collections'."""
    incoming = _vector_identity(con, "src", "t.collection = ?", [collection])
    staying = _vector_identity(con, "main", "t.collection <> ?", [collection])
    return identity_conflict(staying, incoming)


def refusal(target: Path | str, source: Path | str, collection: str) -> str | None:
    """Why ``source`` cannot bring ``collection`` into ``target``, decided read-only, or None.

    Nothing here writes: a refused import leaves the target byte-identical (the seed's 202).
    """
    if not COLLECTION_NAME.fullmatch(collection or ""):
        return f"invalid collection name {collection!r}"
    source, target = Path(source), Path(target)
    if not source.is_file():
        return f"source pool not found ({source})"
    has_target = target.is_file()
    con = (sqlite3.connect(target.absolute().as_uri() + "?mode=ro", uri=True) if has_target
           else sqlite3.connect(":memory:"))
    try:
        con.execute("attach database ? as src", [source.absolute().as_uri() + "?mode=ro"])
        try:
            found = con.execute('select count(*) from src."doc$collection" where id = ?',
                                [collection]).fetchone()[0]
        except sqlite3.DatabaseError as exc:
            return f"source is not a document pool ({source}): {exc}"
        if not found:
            return f"collection {collection} not found in source ({source})"
        fault = vector_shape_fault(con, "src", collection)
        if fault:
            return unloadable_vectors(source, fault)
        if has_target:
            try:
                conflict = vector_model_conflict(con, collection)
            except sqlite3.DatabaseError:
                conflict = None  # a target without the pool schema yet: nothing to conflict with
            if conflict:
                return model_mismatch(source, conflict)
        return None
    finally:
        con.close()


def removal_statements() -> list[str]:
    """A collection's removal: the recipe's deletes of its rows but the general recipe's (the
    other collections read those), then the recipe's full-text rebuild."""
    kept = [sql for sql in recipe_statements()
            if step_phase(sql) == "removing the old collection" and '"doc$meta"' not in sql]
    rebuild = [sql for sql in recipe_statements() if step_phase(sql) == "rebuilding full-text index"]
    return [*kept, 'delete from "doc$meta" where collection = :collection', *rebuild]


def step_phase(sql: str) -> str:
    """The phase a recipe statement belongs to, as a progress display names it."""
    if '"doc$chunk_fts"' in sql:
        return "rebuilding full-text index"
    return "removing the old collection" if sql.lstrip().lower().startswith("delete") else "copying rows"


def persist_fulltext(con: sqlite3.Connection) -> None:
    """The search layer's arrays of the rebuilt index, persisted in the import's transaction (a
    seam the atomicity tests break on purpose)."""
    sqlite_persist(con)


def reindex(target: Path | str) -> None:
    """Persist the pool's full-text arrays again (``knowspec pool reindex``), in one transaction:
    a pool imported before imports persisted them (or written since by another tool) gets a
    first search that loads them instead of reading the whole FTS5 index."""
    con = open_for_write(target)  # ensures the schema: an older pool gains doc$fts_snapshot
    try:
        con.execute("begin immediate")
        try:
            persist_fulltext(con)
            con.execute("commit")
        except BaseException:
            con.execute("rollback")
            raise
    finally:
        con.close()


SOURCE_CHANGED = "the source pool changed while it was being imported; nothing was imported"


class SourceChanged(RuntimeError):
    """The source file changed while it was imported: the import rolled back (run it again)."""


class SourceFile:
    """The source file as the import began reading it, through a descriptor of its own. SQLite's
    read lock keeps SQLite writers out, not a copy onto the file or a truncation: its new pages
    would be read beside the old ones already read. Any change to the file (written, truncated,
    renamed over, removed: each moves its change time) fails the import before it commits; it
    can be run again. The descriptor stays open until the source's connection is closed:
    closing any descriptor of a file drops every POSIX lock the process holds on it, SQLite's
    included."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._began = self._state()

    def _state(self) -> tuple[int, int, int]:
        st = os.fstat(self._fd)
        return st.st_size, st.st_mtime_ns, st.st_ctime_ns

    def refuse_changed(self) -> None:
        """``SourceChanged`` if the file changed since the import began (every storage calls
        it inside its transaction, last, so the import rolls back)."""
        if self._state() != self._began:
            raise SourceChanged(SOURCE_CHANGED)


@contextmanager
def source_descriptor(source: Path) -> Iterator[int]:
    """A descriptor of the source for ``SourceFile``, open for the block: the source's
    connection is closed inside it (closing a descriptor drops the process's locks on the file)."""
    fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO swapped in is not waited on
    try:
        yield fd
    finally:
        os.close(fd)


def import_collection(target: Path | str, source: Path | str, collection: str, *,
                      progress: Callable[[str, int, int], None] | None = None) -> ImportResult:
    """Replace ``collection`` in the pool ``target`` with its rows from the pool ``source``.

    ``progress(phase, done, total)`` counts the recipe's statements within each phase.
    """
    why = refusal(target, source, collection)
    if why:
        raise ImportRefused(why)
    target = Path(target)
    if target.is_symlink() and not target.exists():
        raise ImportRefused(f"the pool file {target.name} is a symbolic link to nothing")
    if target.exists():
        sweep_dead_staging(target)  # a first import's ``staged`` sweeps itself
        return _import_into(target, Path(source), collection, progress)
    return _import_into_new_pool(target, Path(source), collection, progress)


def _import_into_new_pool(target: Path, source: Path, collection: str,
                          progress: Callable[[str, int, int], None] | None) -> ImportResult:
    """A first import builds its pool beside ``target`` (readable by its owner alone, as the
    catalog: the pool's topics may be restricted) and links it there once committed: a
    failed one leaves no empty pool behind (the server would list no collections instead of
    saying the pool is not imported), and a pool another import created meanwhile is joined,
    never replaced."""
    with staged(target, "importing", owner_only=True) as staging:  # its topics may be restricted
        done = _import_into(staging, source, collection, progress)
        if link_into_place(staging, target):
            return done
    return _import_into(target, source, collection, progress)  # another import's pool took the name


def _import_into(target: Path, source: Path, collection: str,
                 progress: Callable[[str, int, int], None] | None) -> ImportResult:
    """Run the recipe against ``target`` (its schema ensured) in one transaction."""
    statements = recipe_statements()
    totals = Counter(step_phase(sql) for sql in statements)
    done: Counter[str] = Counter()
    with source_descriptor(source) as fd:
        con = open_for_write(target)
        try:
            con.execute("attach database ? as src", [source.absolute().as_uri() + "?mode=ro"])
            con.execute("begin immediate")
            try:
                con.execute("select count(*) from src.sqlite_master")  # the source's read lock, held to the end
                watched = SourceFile(fd)
                for sql in statements:
                    phase = step_phase(sql)
                    if progress and not done[phase]:
                        progress(phase, 0, totals[phase])
                    con.execute(sql, {"collection": collection})
                    done[phase] += 1
                    if progress:
                        progress(phase, done[phase], totals[phase])
                if progress:
                    progress("persisting full-text arrays", 0, 1)
                persist_fulltext(con)
                if progress:
                    progress("persisting full-text arrays", 1, 1)
                watched.refuse_changed()
                con.execute("commit")
            except BaseException:
                con.execute("rollback")
                raise
            topics = con.execute('select count(*) from "doc$topic" where collection = ?', [collection]).fetchone()[0]
            chunks = con.execute('select count(*) from "doc$chunk" ch join "doc$topic" t on t.id = ch.topic_id '
                                 "where t.collection = ?", [collection]).fetchone()[0]
            return ImportResult(collection, topics, chunks, str(source))
        finally:
            try:
                con.execute("detach database src")
            except sqlite3.Error:
                pass
            con.close()


def holds_pool_schema(target: Path | str) -> bool:
    """Whether ``target`` is a SQLite file with the pool's tables, looked at read-only."""
    target = Path(target)
    if not target.is_file():
        return False
    try:
        with closing(sqlite3.connect(target.absolute().as_uri() + "?mode=ro", uri=True)) as con:
            return con.execute("select count(*) from sqlite_master where type = 'table' "
                               "and name = 'doc$collection'").fetchone()[0] > 0
    except sqlite3.DatabaseError:
        return False


def remove_collection(target: Path | str, collection: str) -> RemovedCollection:
    """Remove ``collection`` from the SQLite pool ``target`` in one transaction, its full-text
    index rebuilt and persisted; ``ImportRefused`` when the pool does not hold it."""
    sweep_dead_staging(Path(target))
    con = open_for_write(target)
    try:
        con.execute("begin immediate")
        try:
            topics, chunks, found = con.execute(removal_counts_sql(":c", lambda name: f'"{name}"'),
                                                {"c": collection}).fetchone()
            if not found:
                raise absent_collection(collection)
            for sql in removal_statements():
                con.execute(sql, {"collection": collection})
            persist_fulltext(con)
            con.execute("commit")
        except BaseException:
            con.execute("rollback")
            raise
        return RemovedCollection(collection, topics, chunks)
    finally:
        con.close()
