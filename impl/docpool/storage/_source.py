"""Read one collection out of a SQLite source pool, for IMPORTDOC into PostgreSQL / Firebird.

``recipe.import_collection`` (SQLite) runs ``doc_import.sql`` with the source attached; the other
storages cannot attach a SQLite file, so they read the same rows here and write them in one
transaction of their own. Refusals (invalid name, missing source, not a pool, collection absent)
are checked first and raise ``recipe.ImportRefused`` with the same texts, so the target is never
touched. Derived columns the SQL storages need (ASCII-lower-cased keys standing in for SQLite's
``collate nocase``, folded entity keys and titles) are computed here with the Python rules.
Both storages persist the pool's full-text index in the import's transaction the same way
(``pool_index``): the imported collection's rows from memory, the other collections' read back.
The source stays open in one read snapshot for the whole import (``collection_rows``): its
vectors are streamed into the target, never all held at once. A source file changed meanwhile
(written over in place, which no SQLite lock keeps out, or replaced) fails the import before it
commits.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing, contextmanager
from dataclasses import dataclass, fields
from itertools import islice
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from knowspec.impl.docpool.fulltext.reader import FtsIndex
from knowspec.impl.docpool.recipe import (COLLECTION_NAME, ImportRefused, SourceFile, model_mismatch,
                                           source_descriptor, unloadable_vectors, vector_shape_fault)
from knowspec.impl.docpool.vectors.pool_embed import identity_conflict, identity_of
from knowspec.impl.rules.fold import ascii_lower, fold

class ImportFailed(RuntimeError):
    """An import failed inside its transaction and was rolled back: nothing changed. The
    message is the underlying error (IMPORTDOC words it as for SQLite's ``sqlite3.Error``)."""


DEFAULT_META = (
    ("", "schema_version", "2"),
    ("", "search_bm25_weights", "10.0, 5.0, 1.0"),
    ("", "chunk_fts_snippet_column", "body"),
    ("", "search_stopwords", ""),
    ("", "vec_query_prefix", "query: "),
)


STREAM_BATCH = 2048  # rows of a streamed table read (and, on Firebird, inserted) at a time


def batches(rows: Iterable[tuple], size: int = STREAM_BATCH) -> Iterator[list[tuple]]:
    """``rows`` as lists of at most ``size``."""
    it = iter(rows)
    while batch := list(islice(it, size)):
        yield batch


class StreamedRows:
    """The rows of one query on the source, read each time they are iterated, a batch at a time,
    in the source's one read snapshot (``collection_rows``): 50k chunk vectors are 77 MB the
    import would otherwise hold beside everything else."""

    def __init__(self, con: sqlite3.Connection, sql: str, params: dict[str, Any]) -> None:
        self._con, self._sql, self._params = con, sql, params

    def __iter__(self) -> Iterator[tuple]:
        cursor = self._con.execute(self._sql, self._params)
        while batch := cursor.fetchmany(STREAM_BATCH):
            yield from batch

    def first(self) -> tuple | None:
        return self._con.execute(self._sql, self._params).fetchone()


@dataclass
class CollectionRows:
    """Every row of one collection, source ids kept (the target re-numbers topics and chunks);
    the vectors streamed from the source."""

    collection: tuple
    topics: list[tuple]       # (src_id, collection, slug, title, breadcrumb, category, description, source_uri, mime, mtime, body_md)
    chunks: list[tuple]       # (src_id, src_topic_id, ord, title, heading, body)
    links: list[tuple]        # (src_topic_id, kind, key, confidence, source)
    acl: list[tuple]          # (src_topic_id, principal)
    topic_vecs: StreamedRows  # (src_topic_id, vec)
    chunk_vecs: StreamedRows  # (src_chunk_id, vec)
    entities: list[tuple]     # (collection, kind, key, title, attrs)
    relations: list[tuple]    # (collection, from_kind, from_key, rel, to_kind, to_key)
    aliases: list[tuple]      # (collection, kind, alias, key, confidence)
    entity_kinds: list[tuple] # (collection, kind, title, key_rule, url_template)
    meta: list[tuple]         # (collection, name, value) for '' and the collection
    source: SourceFile

    def clear(self) -> None:
        """Let go of every row (``target_rows`` has moved them)."""
        _clear_lists(self)

    def sample_vector(self) -> bytes | None:
        """One of the collection's vectors (a chunk's first), or None without any."""
        for vectors in (self.chunk_vecs, self.topic_vecs):
            row = vectors.first()
            if row is not None:
                return bytes(row[1])
        return None


def _clear_lists(rows: Any) -> None:
    """Empty every list field of the dataclass ``rows``."""
    for f in fields(rows):
        value = getattr(rows, f.name)
        if isinstance(value, list):
            value.clear()


def refuse_another_model(src: CollectionRows, source: Path | str, staying_meta: dict[str, str],
                         staying_sample: bytes | None) -> None:
    """``ImportRefused`` (raised inside the import's transaction, which rolls back) when the
    source's vectors cannot share the pool with its other collections' (``staying_sample``: one
    of their vectors, None without; ``staying_meta``: the target's general recipe). SQLite
    refuses the same before its transaction (``recipe.refusal``): a collection of 8-dimension
    vectors imported into PostgreSQL or Firebird had broken vector search of every collection."""
    incoming = identity_of({name: value for where, name, value in src.meta if where == ""}, src.sample_vector())
    conflict = identity_conflict(identity_of(staying_meta, staying_sample), incoming)
    if conflict:
        raise ImportRefused(model_mismatch(source, conflict))


def check_request(source: Path | str, collection: str) -> Path:
    """The refusals of ``recipe.import_collection``, in its order; returns the source path."""
    if not COLLECTION_NAME.match(collection or ""):
        raise ImportRefused(f"invalid collection name {collection!r}")
    path = Path(source)
    if not path.is_file():
        raise ImportRefused(f"source pool not found ({path})")
    return path


@contextmanager
def collection_rows(source: Path | str, collection: str) -> Iterator[CollectionRows]:
    """The rows of ``collection`` in the source pool, opened read-only in one read snapshot
    that lasts until the block ends (its vectors are read when the import writes them), or
    ``ImportRefused`` before the block runs."""
    path = check_request(source, collection)
    uri = path.absolute().as_uri() + "?mode=ro"
    with source_descriptor(path) as fd, closing(sqlite3.connect(uri, uri=True)) as con:
        yield _read(con, path, collection, fd)


def _read(con: sqlite3.Connection, path: Path, collection: str, fd: int) -> CollectionRows:
    try:
        con.execute("begin")  # every read below, streamed ones included, sees one state of the file
        found = con.execute('select id, title, kind, erisim, generated, help_url_v3 from "doc$collection" '
                            "where id = ?", [collection]).fetchone()
    except sqlite3.DatabaseError as exc:
        raise ImportRefused(f"source is not a document pool ({path}): {exc}") from exc
    if found is None:
        raise ImportRefused(f"collection {collection} not found in source ({path})")
    fault = vector_shape_fault(con, "main", collection)
    if fault:
        raise ImportRefused(unloadable_vectors(path, fault))
    source = SourceFile(fd)  # taken once the read holds its lock or snapshot

    def rows(sql: str) -> list[tuple]:
        return con.execute(sql, {"c": collection}).fetchall()  # tuples already (no row factory)

    def streamed(sql: str) -> StreamedRows:
        return StreamedRows(con, sql, {"c": collection})

    topic_of = 'select id from "doc$topic" where collection = :c'
    return CollectionRows(
        collection=tuple(found),
        topics=rows('select id, collection, slug, title, breadcrumb, category, description, source_uri, '
                    'mime, mtime, body_md from "doc$topic" where collection = :c order by id'),
        chunks=rows(f'select id, topic_id, ord, title, heading, body from "doc$chunk" '
                    f"where topic_id in ({topic_of}) order by id"),
        links=rows(f'select topic_id, kind, key, confidence, source from "doc$link" '
                   f"where topic_id in ({topic_of}) order by rowid"),
        acl=rows(f'select topic_id, principal from "doc$acl" where topic_id in ({topic_of}) order by rowid'),
        topic_vecs=streamed(f'select topic_id, vec from "doc$topic_vec" where topic_id in ({topic_of}) '
                            "order by topic_id"),
        chunk_vecs=streamed(f'select v.chunk_id, v.vec from "doc$chunk_vec" v join "doc$chunk" ch '
                            f"on ch.id = v.chunk_id where ch.topic_id in ({topic_of}) order by v.chunk_id"),
        entities=rows('select collection, kind, key, title, attrs from "doc$entity" '
                      "where collection = :c order by kind, key, id"),  # the recipe's insert order
                                                                           # (SQLite reads the unique index)
        relations=rows('select collection, from_kind, from_key, rel, to_kind, to_key from "doc$entity_rel" '
                       "where collection = :c order by rowid"),
        aliases=rows('select collection, kind, alias, key, confidence from "doc$alias" '
                     "where collection = :c order by rowid"),
        entity_kinds=rows('select collection, kind, title, key_rule, url_template from "doc$entity_kind" '
                          "where collection = :c order by rowid"),
        meta=rows("select collection, name, value from \"doc$meta\" where collection in ('', :c) "
                  "order by rowid"),
        source=source,
    )


@dataclass
class TargetRows:
    """The rows to insert into the target, ids assigned and derived columns filled."""

    topics: list[tuple]
    chunks: list[tuple]
    links: list[tuple]
    acl: list[tuple]
    topic_vecs: Iterable[tuple]  # read from the source as they are written
    chunk_vecs: Iterable[tuple]
    entities: list[tuple]
    relations: list[tuple]
    aliases: list[tuple]
    entity_kinds: list[tuple]
    meta: list[tuple]
    first_topic_id: int = 1  # the new topics' and chunks' ids start here; every other
    first_chunk_id: int = 1  # collection's are below (``target_rows``)

    def written(self) -> "WrittenRows":
        """Once every row is in the target: what the index build still reads of them (the chunks'
        texts, the topics' slugs), every other row let go, so the build does not also hold the
        topics' bodies and the rest."""
        kept = WrittenRows([(c[0], c[1], c[3], c[4], c[5]) for c in self.chunks], [t[:3] for t in self.topics],
                           self.first_topic_id, self.first_chunk_id)
        _clear_lists(self)
        return kept


@dataclass
class WrittenRows:
    """An imported collection's rows as the index build reads them, after they were written."""

    chunks: list[tuple]  # (id, topic_id, title, heading, body)
    topics: list[tuple]  # (id, collection, slug)
    first_topic_id: int
    first_chunk_id: int


def target_rows(src: CollectionRows, *, next_topic_id: int, next_chunk_id: int, next_entity_id: int) -> TargetRows:
    """Re-number topics, chunks and entities from the target's next free ids (as SQLite does:
    ``max(id) + 1`` after the collection's old rows are deleted) and add the derived columns.
    The rows move: ``src`` is emptied, so an import holds one copy of the collection."""
    topic_ids = {row[0]: next_topic_id + n for n, row in enumerate(src.topics)}
    chunk_ids = {row[0]: next_chunk_id + n for n, row in enumerate(src.chunks)}
    meta = list(src.meta)
    if not any(c == "" and n == "schema_version" for c, n, _ in meta):
        meta.append(("", "schema_version", "2"))
    moved = TargetRows(
        topics=[(topic_ids[r[0]], *r[1:]) for r in src.topics],
        chunks=[(chunk_ids[r[0]], topic_ids[r[1]], *r[2:]) for r in src.chunks],
        links=[(topic_ids[t], kind, key, ascii_lower(key), conf, source) for t, kind, key, conf, source in src.links],
        acl=[(topic_ids[t], p, ascii_lower(p)) for t, p in src.acl],
        topic_vecs=((topic_ids[t], bytes(v)) for t, v in src.topic_vecs),
        chunk_vecs=((chunk_ids[c], bytes(v)) for c, v in src.chunk_vecs),
        entities=[(next_entity_id + n, coll, kind, key, ascii_lower(key), fold(key), title, fold(title), attrs)
                  for n, (coll, kind, key, title, attrs) in enumerate(src.entities)],
        relations=[(coll, fk, fkey, ascii_lower(fkey), rel, tk, tkey, ascii_lower(tkey))
                   for coll, fk, fkey, rel, tk, tkey in src.relations],
        aliases=[(coll, kind, alias, ascii_lower(alias), key, ascii_lower(key), conf)
                 for coll, kind, alias, key, conf in src.aliases],
        entity_kinds=list(src.entity_kinds),
        meta=meta,
        first_topic_id=next_topic_id,
        first_chunk_id=next_chunk_id,
    )
    src.clear()
    return moved


Reader = Callable[[int | None], Iterable[tuple]]  # rows whose id is below the bound (all for None)


def pool_index(stamp: tuple, chunks_below: Reader, topics_below: Reader, new: WrittenRows | None = None) -> FtsIndex:
    """The whole pool's full-text index, made inside an import's (or a reindex's) transaction.

    ``chunks_below(bound)`` / ``topics_below(bound)`` read back ``(id, topic_id, title, heading,
    body)`` chunks and ``(id, collection, slug)`` topics whose id is below
    ``bound`` (every row for ``None``). With ``new``, the collection just inserted is taken from
    memory, not read back: its ids follow every other collection's (``target_rows`` numbers
    them from the first free id after the old rows went), so the rows below its first ids are
    exactly the other collections'."""
    if new is None:
        return FtsIndex.build(stamp, chunks_below(None), topics_below(None))
    return FtsIndex.build(stamp, [*chunks_below(new.first_chunk_id), *new.chunks],
                          [*topics_below(new.first_topic_id), *new.topics])
