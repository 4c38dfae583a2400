"""SQLite pool storage: a pool file in schema v2 with an FTS5 index over folded text.

Readers open the file read-only (``mode=ro`` URI) for one request; the server keeps idle reader
connections per file identity (``docpool.pools``), so a package update that replaces ``help.db``
between calls is seen by the next call. Writers (``open_for_write``: the builder and IMPORTDOC)
switch the file to WAL. Every connection has the SQL function ``doc_fold`` (``rules.fold``) so
recipes can fold text the same way as queries.
"""

from __future__ import annotations

import json
import sqlite3
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from knowspec.impl.docpool.storage import _fts_arrays
from knowspec.impl.docpool.storage.base import (
    UNRESTRICTED,
    pick_entity_kind,
    COUNT_NAMES,
    HERKES,
    Access,
    AliasRecord,
    CollectionInfo,
    EntityKindRecord,
    EntityRecord,
    LinkedTopic,
    LinkRecord,
    RelationRecord,
    SearchHit,
    TopicRecord,
    VectorRow,
)
from knowspec.impl.rules.fold import fold

FTS_COLUMNS = ("title", "heading", "body")
SNIPPET_OPEN, SNIPPET_CLOSE, SNIPPET_ELLIPSIS, SNIPPET_TOKENS = "[", "]", "…", 16

_TOPIC_COLS = "t.id, t.collection, t.slug, t.title, t.breadcrumb, t.category, t.description, " \
    "t.source_uri, t.mime, t.mtime, t.body_md"


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


def _acl_sql(access: Access, params: list[Any], topic: str = "t", coll: str = "c") -> str:
    """SQL condition: topic ``topic`` of collection ``coll`` is allowed for ``access``."""
    if access.unrestricted:
        return "1"
    params.append(HERKES)
    params.append(json.dumps(sorted(access.principals or ())))
    return (f"({coll}.erisim = ? or exists (select 1 from \"doc$acl\" a where a.topic_id = {topic}.id "
            f"and lower(a.principal) in (select value from json_each(?))))")


class SqlitePool:
    """``PoolStorage`` over one SQLite pool file, read-only."""

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

    def __enter__(self) -> "SqlitePool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        return self._con.execute(sql, params).fetchall()

    # -- collections and recipes ---------------------------------------------------------
    def collections(self, access: Access) -> list[CollectionInfo]:
        params: list[Any] = []
        cond = _acl_sql(access, params)
        rows = self._all(
            f"""select c.id, c.title, c.kind, c.erisim, c.generated, c.help_url_v3,
                       (select count(*) from "doc$topic" t where t.collection = c.id and {cond}) as n
                from "doc$collection" c order by c.id""", params)
        return [CollectionInfo(r["id"], r["title"], r["kind"], r["erisim"], r["generated"],
                               r["help_url_v3"], r["n"])
                for r in rows if access.unrestricted or r["erisim"] == HERKES or r["n"] > 0]

    def meta(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        for r in self._all('select collection, name, value from "doc$meta" order by collection, name'):
            out.setdefault(r["collection"], {})[r["name"]] = r["value"]
        return out

    # -- full text -----------------------------------------------------------------------
    def search_fts(self, match, access, *, limit, weights, snippet_column,
                   collection=None, linked_to=None) -> list[SearchHit]:
        """Best chunk per allowed topic, topics by (score, collection, slug), at most ``limit``.

        FTS5 hands rows over in ``rank`` order (its bm25 with the recipe's weights), so rows are
        read only until ``limit`` topics are known and the score has moved past the last of
        them: equal scores are all seen, so ties break exactly as a full sort would (best chunk
        by chunk id, topics by collection and slug).
        """
        fast = self._search_arrays(match, access, limit=limit, weights=weights, snippet_column=snippet_column,
                                   collection=collection, linked_to=linked_to)
        if fast is not None:
            return fast
        params: list[Any] = [match, f"bm25({self._weights_sql(weights)})"]
        where = ['"doc$chunk_fts" match ?', "rank match ?"]
        if collection is not None:
            where.append("t.collection = ?")
            params.append(collection)
        if linked_to is not None:
            where.append('exists (select 1 from "doc$link" l where l.topic_id = t.id '
                         "and l.kind = ? and l.key = ? collate nocase)")
            params.extend(linked_to)
        where.append(_acl_sql(access, params))
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

    def _search_arrays(self, match, access, *, limit, weights, snippet_column,
                       collection, linked_to) -> list[SearchHit] | None:
        """``search_fts`` from the pool's FTS5 index held as arrays (``_fts_arrays``): the same
        answer, computed without FTS5's per-row scoring. ``None``: let FTS5 answer."""
        parsed = _fts_arrays.query_phrases(match)
        if parsed is None:
            return None
        arrays = _fts_arrays.fts_arrays_cache.get(self.path, self.change_stamp())
        if arrays is None:
            return None
        phrases, joiner = parsed
        weights = list(weights)[: len(FTS_COLUMNS)] or [1.0]
        allowed = arrays.allowed(self, access, collection, linked_to)
        ranked = _fts_arrays.rank(arrays, phrases, joiner, weights, allowed, limit)
        topics = self.topics_by_id([r.topic_id for r in ranked], UNRESTRICTED)
        chunks = {r["id"]: (r["title"], r["heading"], r["body"]) for r in self._all(
            'select id, title, heading, body from "doc$chunk" where id in (select value from json_each(?))',
            [json.dumps([r.chunk_id for r in ranked])])}
        column = FTS_COLUMNS.index(snippet_column) if snippet_column in FTS_COLUMNS else -1
        out = []
        for r in ranked:
            t, texts = topics.get(r.topic_id), chunks.get(r.chunk_id)
            if t is None or texts is None:  # the file changed under the arrays: let FTS5 answer
                return None
            snippet = _fts_arrays.chunk_snippet([x or "" for x in texts], phrases, column,
                                                (SNIPPET_OPEN, SNIPPET_CLOSE, SNIPPET_ELLIPSIS), SNIPPET_TOKENS)
            out.append(SearchHit(r.topic_id, r.chunk_id, t.collection, t.slug, t.title, t.breadcrumb,
                                 r.score, snippet))
        return out

    @staticmethod
    def _weights_sql(weights) -> str:
        return ", ".join(repr(float(w)) for w in list(weights)[: len(FTS_COLUMNS)]) or "1.0"

    def _snippets(self, match: str, chunk_ids: list[int], column: str) -> dict[int, str]:
        if not chunk_ids:
            return {}
        col = FTS_COLUMNS.index(column) if column in FTS_COLUMNS else -1
        marks = ",".join("?" * len(chunk_ids))
        rows = self._all(
            f"""select rowid, snippet("doc$chunk_fts", {col}, ?1, ?2, ?3, {SNIPPET_TOKENS}) as s,
                       snippet("doc$chunk_fts", -1, ?1, ?2, ?3, {SNIPPET_TOKENS}) as any_column
                from "doc$chunk_fts" where "doc$chunk_fts" match ?4 and rowid in ({marks})""",
            [SNIPPET_OPEN, SNIPPET_CLOSE, SNIPPET_ELLIPSIS, match, *chunk_ids])
        # An empty snippet column (a heading-only section) falls back to the best column.
        return {r["rowid"]: r["s"] or r["any_column"] or "" for r in rows}

    # -- topics --------------------------------------------------------------------------
    @staticmethod
    def _topic(r: sqlite3.Row) -> TopicRecord:
        return TopicRecord(r["id"], r["collection"], r["slug"], r["title"], r["breadcrumb"],
                           r["category"], r["description"], r["source_uri"], r["mime"],
                           r["mtime"], r["body_md"])

    def topic(self, slug, access, collection=None) -> TopicRecord | None:
        params: list[Any] = [slug]
        where = "t.slug = ?"
        if collection is not None:
            where += " and t.collection = ?"
            params.append(collection)
        cond = _acl_sql(access, params)
        rows = self._all(f"""select {_TOPIC_COLS} from "doc$topic" t join "doc$collection" c
                             on c.id = t.collection where {where} and {cond}
                             order by t.collection limit 1""", params)
        return self._topic(rows[0]) if rows else None

    def topics_by_id(self, topic_ids, access) -> dict[int, TopicRecord]:
        ids = list(topic_ids)
        if not ids:
            return {}
        params: list[Any] = [json.dumps(ids)]
        cond = _acl_sql(access, params)
        rows = self._all(f"""select {_TOPIC_COLS} from "doc$topic" t join "doc$collection" c
                             on c.id = t.collection
                             where t.id in (select value from json_each(?)) and {cond}""", params)
        return {r["id"]: self._topic(r) for r in rows}

    def topic_links(self, topic_ids) -> dict[int, list[LinkRecord]]:
        ids = list(topic_ids)
        out: dict[int, list[LinkRecord]] = {i: [] for i in ids}
        if not ids:
            return out
        rows = self._all("""select topic_id, kind, key, confidence, source from "doc$link"
                            where topic_id in (select value from json_each(?))
                            order by topic_id, confidence desc, kind, key""", [json.dumps(ids)])
        for r in rows:
            out[r["topic_id"]].append(LinkRecord(r["kind"], r["key"], r["confidence"], r["source"]))
        return out

    def linked_topics(self, kind, key, access, *, limit=None, exclude_topic_id=None) -> list[LinkedTopic]:
        params: list[Any] = [kind, key]
        extra = ""
        if exclude_topic_id is not None:
            extra = " and t.id <> ?"
            params.append(exclude_topic_id)
        cond = _acl_sql(access, params)
        params.append(-1 if limit is None else limit)
        rows = self._all(
            f"""select t.id, t.collection, t.slug, t.title, t.breadcrumb, max(l.confidence) as confidence,
                       l.source
                from "doc$link" l join "doc$topic" t on t.id = l.topic_id
                join "doc$collection" c on c.id = t.collection
                where l.kind = ? and l.key = ? collate nocase{extra} and {cond}
                group by t.id order by confidence desc, t.collection, t.slug limit ?""", params)
        return [LinkedTopic(r["id"], r["collection"], r["slug"], r["title"], r["breadcrumb"],
                            r["confidence"], r["source"]) for r in rows]

    def chunk_texts(self, chunk_ids) -> dict[int, str]:
        ids = list(chunk_ids)
        if not ids:
            return {}
        rows = self._all('select id, body from "doc$chunk" where id in (select value from json_each(?))',
                         [json.dumps(ids)])
        return {r["id"]: r["body"] for r in rows}

    # -- entities ------------------------------------------------------------------------
    @staticmethod
    def _entity(r: sqlite3.Row) -> EntityRecord:
        return EntityRecord(r["id"], r["collection"], r["kind"], r["key"], r["title"],
                            _json_object(r["attrs"]))

    def entity(self, kind, key) -> EntityRecord | None:
        rows = self._all("""select id, collection, kind, key, title, attrs from "doc$entity"
                            where kind = ? and key = ? collate nocase order by collection limit 1""",
                         [kind, key])
        return self._entity(rows[0]) if rows else None

    def aliases_named(self, kind, alias) -> list[AliasRecord]:
        rows = self._all("""select collection, kind, alias, key, confidence from "doc$alias"
                            where kind = ? and alias = ? collate nocase
                            order by confidence desc, key, collection""", [kind, alias])
        return [AliasRecord(*tuple(r)) for r in rows]

    def aliases_of(self, kind, key) -> list[AliasRecord]:
        rows = self._all("""select collection, kind, alias, key, confidence from "doc$alias"
                            where kind = ? and key = ? collate nocase
                            order by confidence desc, alias, collection""", [kind, key])
        return [AliasRecord(*tuple(r)) for r in rows]

    def _relations(self, sql_end: str, kind: str, key: str) -> list[RelationRecord]:
        near, far = ("from", "to") if sql_end == "out" else ("to", "from")
        rows = self._all(
            f"""select distinct r.rel, r.{far}_kind as kind, r.{far}_key as key,
                       coalesce(e.title, '') as title, coalesce(e.attrs, '{{}}') as attrs
                from "doc$entity_rel" r left join "doc$entity" e
                  on e.collection = r.collection and e.kind = r.{far}_kind and e.key = r.{far}_key
                where r.{near}_kind = ? and r.{near}_key = ? collate nocase
                order by r.rel, kind, key""", [kind, key])
        return [RelationRecord(r["rel"], r["kind"], r["key"], r["title"], _json_object(r["attrs"]))
                for r in rows]

    def relations_from(self, kind, key) -> list[RelationRecord]:
        return self._relations("out", kind, key)

    def relations_to(self, kind, key) -> list[RelationRecord]:
        return self._relations("in", kind, key)

    def _kinds(self, where: str = "", params: Sequence[Any] = ()) -> list[EntityKindRecord]:
        rows = self._all(
            f"""select k.collection, k.kind, k.title, k.key_rule, k.url_template,
                       (select count(*) from "doc$entity" e where e.collection = k.collection
                        and e.kind = k.kind) as n
                from "doc$entity_kind" k {where} order by k.collection, k.kind""", params)
        return [EntityKindRecord(r["collection"], r["kind"], r["title"], r["key_rule"],
                                 r["url_template"], r["n"]) for r in rows]

    def entity_kinds(self) -> list[EntityKindRecord]:
        return self._kinds()

    def entity_kind(self, kind, collection=None) -> EntityKindRecord | None:
        return pick_entity_kind(self._kinds("where k.kind = ?", [kind]), collection)

    def find_entities(self, kind, text, limit) -> list[EntityRecord]:
        where, params = ["1"], []
        if kind is not None:
            where.append("kind = ?")
            params.append(kind)
        if text:
            where.append("(instr(doc_fold(key), ?) > 0 or instr(doc_fold(title), ?) > 0)")
            params.extend([fold(text), fold(text)])
        params.append(limit)
        rows = self._all(f"""select id, collection, kind, key, title, attrs from "doc$entity"
                             where {' and '.join(where)} order by kind, key, collection limit ?""", params)
        return [self._entity(r) for r in rows]

    # -- statistics and vectors ----------------------------------------------------------
    def counts(self, access) -> dict[str, int]:
        params: list[Any] = []
        cond = _acl_sql(access, params)
        allowed = f"""select t.id from "doc$topic" t join "doc$collection" c on c.id = t.collection
                      where {cond}"""
        sql = {
            "topic": f"select count(*) from ({allowed})",
            "chunk": f'select count(*) from "doc$chunk" where topic_id in ({allowed})',
            "topic_vec": f'select count(*) from "doc$topic_vec" where topic_id in ({allowed})',
            "chunk_vec": f"""select count(*) from "doc$chunk_vec" v join "doc$chunk" ch
                             on ch.id = v.chunk_id where ch.topic_id in ({allowed})""",
            "entity": 'select count(*) from "doc$entity"',
            "entity_rel": 'select count(*) from "doc$entity_rel"',
            "alias": 'select count(*) from "doc$alias"',
            "link": f'select count(*) from "doc$link" where topic_id in ({allowed})',
            "acl": f'select count(*) from "doc$acl" where topic_id in ({allowed})',
        }
        return {name: self._con.execute(sql[name], params if "?" in sql[name] else []).fetchone()[0]
                for name in COUNT_NAMES}

    def collection_counts(self, access) -> dict[str, dict[str, int]]:
        params: list[Any] = []
        cond = _acl_sql(access, params)
        rows = self._all(
            f"""select t.collection, count(distinct t.id) as topics, count(ch.id) as chunks
                from "doc$topic" t join "doc$collection" c on c.id = t.collection
                left join "doc$chunk" ch on ch.topic_id = t.id
                where {cond} group by t.collection""", params)
        return {r["collection"]: {"topic": r["topics"], "chunk": r["chunks"]} for r in rows}

    def _vector_sql(self, which: str, access: Access, select: str) -> tuple[str, list[Any]]:
        """FROM/WHERE of the allowed topic or chunk vectors; ``select`` may name ``{topic}``
        and ``{chunk}`` (the row's topic id and chunk id)."""
        params: list[Any] = []
        cond = _acl_sql(access, params)
        if which == "topic":
            cols = select.format(topic="v.topic_id", chunk="null")
            return (f"""select {cols} from "doc$topic_vec" v join "doc$topic" t on t.id = v.topic_id
                        join "doc$collection" c on c.id = t.collection where {cond}""", params)
        cols = select.format(topic="ch.topic_id", chunk="v.chunk_id")
        return (f"""select {cols} from "doc$chunk_vec" v join "doc$chunk" ch on ch.id = v.chunk_id
                    join "doc$topic" t on t.id = ch.topic_id join "doc$collection" c on c.id = t.collection
                    where {cond}""", params)

    def vectors(self, which, access) -> list[VectorRow]:
        return list(self.iter_vectors(which, access))

    def vector_count(self, which, access) -> int:
        sql, params = self._vector_sql(which, access, "count(*)")
        return self._con.execute(sql, params).fetchone()[0]

    def iter_vectors(self, which, access) -> Iterator[VectorRow]:
        sql, params = self._vector_sql(which, access, "{topic}, {chunk}, v.vec")
        order = "v.topic_id" if which == "topic" else "v.chunk_id"
        cursor = self._con.execute(f"{sql} order by {order}", params)  # sqlite steps row by row
        try:
            for r in cursor:
                yield VectorRow(r[0], r[1], bytes(r[2]))
        finally:
            cursor.close()

    def topic_ids(self, access, *, collection=None, linked_to=None) -> list[int]:
        where, params = ["1"], []
        if collection is not None:
            where.append("t.collection = ?")
            params.append(collection)
        if linked_to is not None:
            where.append('exists (select 1 from "doc$link" l where l.topic_id = t.id '
                         "and l.kind = ? and l.key = ? collate nocase)")
            params.extend(linked_to)
        where.append(_acl_sql(access, params))
        return [r[0] for r in self._all(f"""select t.id from "doc$topic" t join "doc$collection" c
                                             on c.id = t.collection where {' and '.join(where)}
                                             order by t.id""", params)]

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


def _json_object(raw: str | None) -> dict[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
