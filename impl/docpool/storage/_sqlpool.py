"""The ``PoolStorage`` queries every SQL storage shares (everything except the full-text postings).

SQLite, PostgreSQL and Firebird hold the same ``doc$`` tables; PostgreSQL and Firebird add
derived columns their importer fills (``*_ci``: ASCII-lower-cased, standing in for SQLite's
``collate nocase``; ``key_fold`` / ``title_fold``: ``rules.fold``). Every query here is written
once with ``?`` placeholders (values always bound, never formatted into SQL), so the non-fts
tools answer identically on every storage. A storage is a dialect of ``SqlPool``: it supplies
``_rows`` (run a query) and, where its SQL differs, ``_text_order`` (a binary, code-point
collation for ORDER BY, as SQLite compares text), ``_ci`` / ``_folded`` (the case-insensitive
and folded form of a column), ``_contains`` and ``_first`` (row limit).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from knowspec.impl import runtime as process
from knowspec.impl.docpool.storage.base import (
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
    TopicRecord,
    VectorRow,
)
from knowspec.impl.rules.fold import ascii_lower, fold

if TYPE_CHECKING:
    from knowspec.impl.docpool.fulltext.reader import FtsIndex

TOPIC_COLS = ("t.id, t.collection, t.slug, t.title, t.breadcrumb, t.category, t.description, "
              "t.source_uri, t.mime, t.mtime, t.body_md")
TOPIC_COLS_NO_BODY = TOPIC_COLS.replace("t.body_md", "''")  # a search hit's row: the body is kilobytes
BATCH = 500  # ids per IN (...) list


def json_object(raw: Any) -> dict[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def marks(n: int) -> str:
    return ", ".join("?" * n)




class SqlPool:
    """Non-fts ``PoolStorage`` methods over a DB-API connection (see module docstring)."""

    location: str

    # -- to be supplied --------------------------------------------------------------------
    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        raise NotImplementedError

    def _stream(self, sql: str, params: Sequence[Any] = ()) -> Iterator[Any]:
        """Rows of a query one at a time, never the whole result in memory (the vector loader)."""
        yield from self._rows(sql, params)

    def _text_order(self, expr: str) -> str:
        return expr

    def _ci(self, column: str) -> str:
        """``column`` compared and ordered ASCII-case-insensitively (its importer-filled twin)."""
        return f"{column}_ci"

    def _folded(self, column: str) -> str:
        """``column`` folded by ``rules.fold`` (its importer-filled twin)."""
        return f"{column}_fold"

    def _contains(self, text: str) -> str:
        """Condition: the bound value occurs in ``text``."""
        return f"position(? in {text}) > 0"

    def _first(self, n: str) -> str:
        """The clause keeping the first ``n`` rows (``n``: a number or ``?``)."""
        return f"fetch first {n} rows only"

    def _acl(self, access: Access, params: list[Any], topic: str = "t", coll: str = "c") -> str:
        """Condition: topic ``topic`` of collection ``coll`` is allowed for ``access`` (values bound)."""
        if access.unrestricted:
            return "1 = 1"
        principals = sorted(ascii_lower(p) for p in (access.principals or ())) or [""]
        params.append(HERKES)
        params.extend(principals)
        return (f"({coll}.erisim = ? or exists (select 1 from doc$acl a where a.topic_id = {topic}.id "
                f"and {self._ci('a.principal')} in ({marks(len(principals))})))")

    def _blob(self, value: Any) -> Any:
        """A column value as plain ``str`` / ``bytes``."""
        return value

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()  # type: ignore[attr-defined]

    def _o(self, *exprs: str) -> str:
        """ORDER BY list with text expressions in binary order ('-' prefix: descending number)."""
        return ", ".join(e[1:] + " desc" if e.startswith("-") else self._text_order(e) for e in exprs)

    def _text(self, value: Any) -> Any:
        """A text column's value (Firebird BLOB text may arrive as a reader)."""
        return self._blob(value)

    # -- collections and recipes -----------------------------------------------------------
    def collections(self, access: Access) -> list[CollectionInfo]:
        params: list[Any] = []
        cond = self._acl(access, params)
        rows = self._rows(f"""select c.id, c.title, c.kind, c.erisim, c.generated, c.help_url_v3,
                                     (select count(*) from doc$topic t where t.collection = c.id and {cond})
                              from doc$collection c order by {self._o('c.id')}""", params)
        return [CollectionInfo(r[0], r[1], r[2], r[3], r[4], r[5], int(r[6])) for r in rows
                if access.unrestricted or r[3] == HERKES or r[6] > 0]

    def meta(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        for coll, name, value in self._rows(f'select collection, name, "value" from doc$meta '
                                            f"order by {self._o('collection', 'name')}"):
            out.setdefault(coll, {})[name] = self._text(value)
        return out

    # -- full text -------------------------------------------------------------------------
    def _persisted_index(self, stamp: tuple) -> FtsIndex | None:
        """The index the last import persisted (``doc$fts_snapshot``), if it was made at this
        snapshot's import counter (``stamp[-1]``, read in the same transaction), else ``None``.
        Only its head is read here: postings and texts are read when a search needs them, through
        the request that does (``_snapshot_parts``, bound by ``FtsIndex.with_reader``)."""
        from knowspec.impl.docpool.fulltext.reader import SNAPSHOT_TABLE, persisted

        if not self._has_table(SNAPSHOT_TABLE):
            return None

        def first() -> tuple[str, Any] | None:
            rows = self._rows(f"select revision, data from {SNAPSHOT_TABLE} where part = 0")
            return (rows[0][0], self._blob(rows[0][1])) if rows else None

        return persisted(first, self._snapshot_parts, str(stamp[-1]), stamp)

    def _cached_index(self, cache_name: str, key: str, stamp: tuple,
                      build_from_rows: Callable[[Any, tuple], "FtsIndex"]) -> "FtsIndex":
        """The index at ``stamp`` from the runtime cache ``cache_name`` (one per ``key``): the
        persisted one when its import made it at this stamp, else built from the rows (logged:
        ``knowspec pool reindex`` persists it), bound to this request's part reader."""
        from knowspec.impl.docpool.fulltext.reader import FtsIndex, warn_not_persisted

        def build() -> FtsIndex:
            found = self._persisted_index(stamp)
            if found is None:
                warn_not_persisted(self.location)
                found = build_from_rows(self._rows, stamp)
            return found

        cache = process.current().cache(cache_name, max_entries=8, sizeof=FtsIndex.nbytes)
        return cache.get(key, stamp, build).with_reader(self._snapshot_parts)

    def _snapshot_parts(self, wanted: list[int]) -> list[tuple[int, str, Any]]:
        """``(part, revision, data)`` of the persisted index's parts numbered ``wanted``, in this
        request's snapshot (``fulltext.parts.PartReader``). The list of numbers is padded to a
        power of two (repeating its last): few distinct statements for a dialect that prepares each."""
        from knowspec.impl.docpool.fulltext.reader import SNAPSHOT_TABLE

        out = []
        for k in range(0, len(wanted), BATCH):
            part = list(wanted[k:k + BATCH])
            part += part[-1:] * ((1 << (len(part) - 1).bit_length()) - len(part))
            out += [(int(r[0]), r[1], self._blob(r[2])) for r in self._rows(
                f"select part, revision, data from {SNAPSHOT_TABLE} where part in ({marks(len(part))})", part)]
        return out

    def _has_table(self, name: str) -> bool:
        """Whether the pool has table ``name`` (pools made before it was added do not)."""
        raise NotImplementedError

    def _allowed_chunks(self, columns: str, chunk_ids, access) -> Iterator[Sequence[Any]]:
        """``ch.id, t.id, t.collection, t.slug`` and ``columns`` of the chunks whose topic
        ``access`` allows: the chunk, its topic and the ACL in one statement, one snapshot."""
        ids = sorted(set(int(i) for i in chunk_ids))
        for k in range(0, len(ids), BATCH):
            part = ids[k:k + BATCH]
            params: list[Any] = list(part)
            cond = self._acl(access, params)
            yield from self._rows(f"""select ch.id, t.id, t.collection, t.slug, {columns} from doc$chunk ch
                                      join doc$topic t on t.id = ch.topic_id
                                      join doc$collection c on c.id = t.collection
                                      where ch.id in ({marks(len(part))}) and {cond}""", params)

    def chunk_columns(self, chunk_ids, access) -> dict[int, tuple[int, str, str, str, str, str]]:
        return {int(r[0]): (int(r[1]), r[2], r[3], self._text(r[4]), self._text(r[5]), self._text(r[6]))
                for r in self._allowed_chunks("ch.title, ch.heading, ch.body", chunk_ids, access)}

    # -- topics ----------------------------------------------------------------------------
    def _topic(self, r: Sequence[Any]) -> TopicRecord:
        return TopicRecord(int(r[0]), r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], self._text(r[10]))

    def _slug_is(self, column: str) -> str:
        """Condition: ``column`` equals the bound slug (a dialect may add an indexable twin;
        the slug is bound once per ``?``)."""
        return f"{column} = ?"

    def _not_indexed(self, expr: str) -> str:
        """``expr`` as a value no index is looked up by (a dialect whose planner would otherwise
        intersect the slug's index with the collection's, a few thousand entries wide)."""
        return expr

    def topic(self, slug, access, collection=None) -> TopicRecord | None:
        where = self._slug_is("t.slug")
        params: list[Any] = [slug] * where.count("?")
        coll = self._not_indexed("t.collection")
        if collection is not None:
            where += f" and {coll} = ?"
            params.append(collection)
        cond = self._acl(access, params)
        rows = self._rows(f"""select {TOPIC_COLS} from doc$topic t join doc$collection c on c.id = {coll}
                              where {where} and {cond} order by {self._o(coll)}
                              {self._first('1')}""", params)
        return self._topic(rows[0]) if rows else None

    def topics_by_id(self, topic_ids, access, *, with_body: bool = True) -> dict[int, TopicRecord]:
        out: dict[int, TopicRecord] = {}
        ids = sorted(set(int(i) for i in topic_ids))
        cols = TOPIC_COLS if with_body else TOPIC_COLS_NO_BODY
        for k in range(0, len(ids), BATCH):
            part = ids[k:k + BATCH]
            params: list[Any] = list(part)
            cond = self._acl(access, params)
            for r in self._rows(f"""select {cols} from doc$topic t join doc$collection c
                                    on c.id = t.collection where t.id in ({marks(len(part))}) and {cond}""",
                                params):
                out[int(r[0])] = self._topic(r)
        return out

    def topic_links(self, topic_ids) -> dict[int, list[LinkRecord]]:
        ids = [int(i) for i in topic_ids]
        out: dict[int, list[LinkRecord]] = {i: [] for i in ids}
        uniq = sorted(set(ids))
        for k in range(0, len(uniq), BATCH):
            part = uniq[k:k + BATCH]
            for r in self._rows(f"""select topic_id, kind, "key", confidence, source from doc$link
                                    where topic_id in ({marks(len(part))})
                                    order by topic_id, {self._o('-confidence', 'kind', self._ci('key'))}""", part):
                out[int(r[0])].append(LinkRecord(r[1], r[2], float(r[3]), r[4]))
        return out

    def linked_topics(self, kind, key, access, *, limit=None, exclude_topic_id=None) -> list[LinkedTopic]:
        params: list[Any] = [kind, ascii_lower(key)]
        extra = ""
        if exclude_topic_id is not None:
            extra = " and t.id <> ?"
            params.append(exclude_topic_id)
        cond = self._acl(access, params)
        sql = f"""select t.id, t.collection, t.slug, t.title, t.breadcrumb, l.confidence, l.source
                  from doc$link l join doc$topic t on t.id = l.topic_id join doc$collection c on c.id = t.collection
                  where l.kind = ? and {self._ci('l.key')} = ?{extra} and {cond}
                  order by {self._o('-l.confidence', 't.collection', 't.slug')}"""
        if limit is not None:
            sql += " " + self._first("?")
            params.append(int(limit))
        seen: set[int] = set()
        out = []
        for r in self._rows(sql, params):  # one link per (topic, kind, key): SQLite's group by t.id
            if int(r[0]) not in seen:
                seen.add(int(r[0]))
                out.append(LinkedTopic(int(r[0]), r[1], r[2], r[3], r[4], float(r[5]), r[6]))
        return out

    def chunk_texts(self, chunk_ids, access) -> dict[int, tuple[int, str, str, str]]:
        return {int(r[0]): (int(r[1]), r[2], r[3], self._text(r[4]))
                for r in self._allowed_chunks("ch.body", chunk_ids, access)}

    # -- entities --------------------------------------------------------------------------
    def _entity(self, r: Sequence[Any]) -> EntityRecord:
        return EntityRecord(int(r[0]), r[1], r[2], r[3], r[4], json_object(self._text(r[5])))

    def entity(self, kind, key) -> EntityRecord | None:
        rows = self._rows(f"""select id, collection, kind, "key", title, attrs from doc$entity
                              where kind = ? and {self._ci('key')} = ? order by {self._o('collection')}
                              {self._first('1')}""", [kind, ascii_lower(key)])
        return self._entity(rows[0]) if rows else None

    def _aliases(self, column: str, value: str, kind: str, order: tuple[str, ...]) -> list[AliasRecord]:
        rows = self._rows(f"""select collection, kind, alias, "key", confidence from doc$alias
                              where kind = ? and {column} = ? order by {self._o(*order)}""",
                          [kind, ascii_lower(value)])
        return [AliasRecord(r[0], r[1], r[2], r[3], float(r[4])) for r in rows]

    def aliases_named(self, kind, alias) -> list[AliasRecord]:
        return self._aliases(self._ci("alias"), alias, kind, ("-confidence", self._ci("key"), "collection"))

    def aliases_of(self, kind, key) -> list[AliasRecord]:
        return self._aliases(self._ci("key"), key, kind, ("-confidence", self._ci("alias"), "collection"))

    def _relations(self, near: str, far: str, kind: str, key: str) -> list[RelationRecord]:
        rows = self._rows(
            f"""select r.rel, r.{far}_kind, r.{far}_key, e.title, e.attrs
                from doc$entity_rel r left join doc$entity e
                  on e.collection = r.collection and e.kind = r.{far}_kind
                  and {self._ci('e.key')} = {self._ci(f'r.{far}_key')}
                where r.{near}_kind = ? and {self._ci(f'r.{near}_key')} = ?
                order by {self._o('r.rel', f'r.{far}_kind', self._ci(f'r.{far}_key'))}""", [kind, ascii_lower(key)])
        out, seen = [], set()
        for rel, k, key_, title, attrs in rows:
            title, attrs = title or "", self._text(attrs) if attrs is not None else "{}"
            ident = (rel, k, ascii_lower(key_), title, attrs)  # a distinct edge: keys compared nocase
            if ident not in seen:
                seen.add(ident)
                out.append(RelationRecord(rel, k, key_, title, json_object(attrs)))
        return out

    def relations_from(self, kind, key) -> list[RelationRecord]:
        return self._relations("from", "to", kind, key)

    def relations_to(self, kind, key) -> list[RelationRecord]:
        return self._relations("to", "from", kind, key)

    def _kinds(self, where: str = "", params: Sequence[Any] = ()) -> list[EntityKindRecord]:
        rows = self._rows(
            f"""select k.collection, k.kind, k.title, k.key_rule, k.url_template,
                       (select count(*) from doc$entity e where e.collection = k.collection and e.kind = k.kind)
                from doc$entity_kind k {where} order by {self._o('k.collection', 'k.kind')}""", params)
        return [EntityKindRecord(r[0], r[1], r[2], r[3], r[4], int(r[5])) for r in rows]

    def entity_kinds(self) -> list[EntityKindRecord]:
        return self._kinds()

    def entity_kind(self, kind, collection=None) -> EntityKindRecord | None:
        return pick_entity_kind(self._kinds("where k.kind = ?", [kind]), collection)

    def find_entities(self, kind, text, limit) -> list[EntityRecord]:
        where, params = ["1 = 1"], []
        if kind is not None:
            where.append("kind = ?")
            params.append(kind)
        if text:
            where.append(f"({self._contains(self._folded('key'))} or {self._contains(self._folded('title'))})")
            params.extend([fold(text), fold(text)])
        params.append(int(limit))
        rows = self._rows(f"""select id, collection, kind, "key", title, attrs from doc$entity
                              where {' and '.join(where)} order by {self._o('kind', '"key"', 'collection')}
                              {self._first('?')}""", params)
        return [self._entity(r) for r in rows]

    # -- statistics and vectors ------------------------------------------------------------
    def counts(self, access) -> dict[str, int]:
        params: list[Any] = []
        cond = self._acl(access, params)
        allowed = f"select t.id from doc$topic t join doc$collection c on c.id = t.collection where {cond}"
        sql = {
            "topic": f"select count(*) from doc$topic t join doc$collection c on c.id = t.collection where {cond}",
            "chunk": f"select count(*) from doc$chunk where topic_id in ({allowed})",
            "topic_vec": f"select count(*) from doc$topic_vec where topic_id in ({allowed})",
            "chunk_vec": f"""select count(*) from doc$chunk_vec v join doc$chunk ch on ch.id = v.chunk_id
                             where ch.topic_id in ({allowed})""",
            "entity": "select count(*) from doc$entity",
            "entity_rel": "select count(*) from doc$entity_rel",
            "alias": "select count(*) from doc$alias",
            "link": f"select count(*) from doc$link where topic_id in ({allowed})",
            "acl": f"select count(*) from doc$acl where topic_id in ({allowed})",
        }
        return {name: int(self._rows(sql[name], params if "?" in sql[name] else [])[0][0]) for name in COUNT_NAMES}

    def collection_counts(self, access) -> dict[str, dict[str, int]]:
        params: list[Any] = []
        cond = self._acl(access, params)
        rows = self._rows(f"""select t.collection, count(distinct t.id), count(ch.id)
                              from doc$topic t join doc$collection c on c.id = t.collection
                              left join doc$chunk ch on ch.topic_id = t.id
                              where {cond} group by t.collection""", params)
        return {r[0]: {"topic": int(r[1]), "chunk": int(r[2])} for r in rows}

    def _vector_sql(self, which: str, access: Access, select: str) -> tuple[str, list[Any]]:
        """FROM/WHERE of the allowed topic or chunk vectors; ``select`` may name ``{topic}``
        and ``{chunk}`` (the row's topic id and chunk id)."""
        params: list[Any] = []
        cond = self._acl(access, params)
        if which == "topic":
            cols = select.format(topic="v.topic_id", chunk="cast(null as bigint)")
            return (f"""select {cols} from doc$topic_vec v join doc$topic t on t.id = v.topic_id
                        join doc$collection c on c.id = t.collection where {cond}""", params)
        cols = select.format(topic="ch.topic_id", chunk="v.chunk_id")
        return (f"""select {cols} from doc$chunk_vec v join doc$chunk ch on ch.id = v.chunk_id
                    join doc$topic t on t.id = ch.topic_id join doc$collection c on c.id = t.collection
                    where {cond}""", params)

    def vectors(self, which, access) -> list[VectorRow]:
        return list(self.iter_vectors(which, access))

    def vector_count(self, which, access) -> int:
        sql, params = self._vector_sql(which, access, "count(*)")
        return int(self._rows(sql, params)[0][0])

    def iter_vectors(self, which, access) -> Iterator[VectorRow]:
        sql, params = self._vector_sql(which, access, "{topic}, {chunk}, v.vec")
        order = "v.topic_id" if which == "topic" else "v.chunk_id"
        for r in self._stream(f"{sql} order by {order}", params):
            yield VectorRow(int(r[0]), None if r[1] is None else int(r[1]), bytes(self._blob(r[2])))

    def topic_ids(self, access, *, collection=None, linked_to=None) -> list[int]:
        where, params = [], []
        if collection is not None:
            where.append("t.collection = ?")
            params.append(collection)
        if linked_to is not None:
            where.append(f"exists (select 1 from doc$link l where l.topic_id = t.id and l.kind = ? "
                         f"and {self._ci('l.key')} = ?)")
            params.extend([linked_to[0], ascii_lower(linked_to[1])])
        where.append(self._acl(access, params))
        return [int(r[0]) for r in self._rows(f"""select t.id from doc$topic t join doc$collection c
                                                  on c.id = t.collection where {' and '.join(where)}
                                                  order by t.id""", params)]

    def change_stamp(self) -> tuple:
        """The pool's import counter (``doc$pool_state``), bumped by every import."""
        rows = self._rows("select stamp from doc$pool_state where id = 1")
        return (self.location, int(rows[0][0]) if rows else 0)
