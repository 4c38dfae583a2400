"""The storage seam: every query the help_* / doc_* tools ask of a pool.

Tool logic (``search.py``, ``topics.py``, ``entities.py``, ``stats.py``) talks only to this
Protocol, so SQLite, PostgreSQL and Firebird pools differ only in their storage module. Every
query that returns topics takes the caller's ``Access`` and filters inside the query, before
ranking and limits: an unauthorized topic never takes a slot in a ``limit`` and never counts.

Rows come back as the frozen dataclasses below (plain values only). Ordering promised by each
method is part of the contract: storages must break ties the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Protocol, Sequence, runtime_checkable

if TYPE_CHECKING:
    from knowspec.impl.docpool.fulltext.reader import FtsIndex

HERKES = "herkes"  # doc$collection.erisim value meaning "everyone"


@dataclass(frozen=True)
class Access:
    """Which topics a caller may see: ``principals`` ASCII-lowercased, ``None`` = everything."""

    principals: frozenset[str] | None = None

    @property
    def unrestricted(self) -> bool:
        return self.principals is None


UNRESTRICTED = Access(None)


@dataclass(frozen=True)
class CollectionInfo:
    id: str
    title: str
    kind: str
    erisim: str
    generated: str | None
    help_url_v3: str | None
    topics: int  # topics the caller may see


@dataclass(frozen=True)
class TopicRecord:
    id: int
    collection: str
    slug: str
    title: str
    breadcrumb: str
    category: str
    description: str
    source_uri: str
    mime: str
    mtime: str | None
    body_md: str


@dataclass(frozen=True)
class SearchHit:
    """The best chunk of one topic for a full-text query (``score``: bm25, smaller = better)."""

    topic_id: int
    chunk_id: int
    collection: str
    slug: str
    title: str
    breadcrumb: str
    score: float
    snippet: str = ""


@dataclass(frozen=True)
class LinkRecord:
    kind: str
    key: str
    confidence: float
    source: str


@dataclass(frozen=True)
class LinkedTopic:
    """A topic reached through a link (ordered: confidence desc, collection, slug)."""

    topic_id: int
    collection: str
    slug: str
    title: str
    breadcrumb: str
    confidence: float
    source: str


@dataclass(frozen=True)
class EntityRecord:
    id: int
    collection: str
    kind: str
    key: str
    title: str
    attrs: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class RelationRecord:
    """One edge seen from an entity: ``kind``/``key`` is the other end."""

    rel: str
    kind: str
    key: str
    title: str  # the other end's title ('' when it is not an entity of the pool)
    attrs: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class AliasRecord:
    collection: str
    kind: str
    alias: str
    key: str
    confidence: float


@dataclass(frozen=True)
class EntityKindRecord:
    collection: str
    kind: str
    title: str
    key_rule: str
    url_template: str
    entities: int


def pick_entity_kind(rows: list[EntityKindRecord], collection: str | None) -> EntityKindRecord | None:
    """The kind row of ``collection`` when it has one, else the first (rows come by collection)."""
    if collection is not None:
        rows = [r for r in rows if r.collection == collection] or rows
    return rows[0] if rows else None


@dataclass(frozen=True)
class VectorRow:
    """A stored embedding of an allowed topic (``chunk_id`` is None for a topic vector)."""

    topic_id: int
    chunk_id: int | None
    vec: bytes


COUNT_NAMES = ("topic", "chunk", "topic_vec", "chunk_vec", "entity", "entity_rel", "alias", "link", "acl")


@runtime_checkable
class PoolStorage(Protocol):
    """One open pool (help pool or a database's document pool). Open per request, then close."""

    #: where the pool lives, for messages ("help.db", "sales", a DSN without password)
    location: str

    #: the driver's DB-API ``Error`` classes: a call maps any of them to ``storage_error``
    #: (``tools._reading``), whatever the backend
    driver_errors: tuple[type[Exception], ...]

    def close(self) -> None: ...

    def __enter__(self) -> "PoolStorage": ...

    def __exit__(self, *exc: object) -> None: ...

    # -- collections and recipes -------------------------------------------------------------
    def collections(self, access: Access) -> list[CollectionInfo]:
        """Collections holding at least one allowed topic, or with erisim 'herkes'; by id."""

    def meta(self) -> dict[str, dict[str, str]]:
        """Every ``doc$meta`` row: ``{collection: {name: value}}`` ('' = general recipe)."""

    # -- full text ---------------------------------------------------------------------------
    def fulltext_index(self, stamp: tuple) -> "FtsIndex":
        """The pool's full-text postings at ``stamp`` (``change_stamp()``), for the search layer
        (``fulltext.search``), the one place that ranks and cuts snippets for every storage.
        Data only: a storage never ranks, and runs no ranking SQL."""

    def chunk_columns(self, chunk_ids: Sequence[int], access: Access) -> dict[int, tuple[int, str, str, str, str, str]]:
        """(topic id, collection, slug, original title, heading, body) of the chunks whose topic
        ``access`` allows, read in one statement (full-text snippets: the search checks that the
        chunk still belongs to the topic its postings named)."""

    # -- topics ------------------------------------------------------------------------------
    def topic(self, slug: str, access: Access, collection: str | None = None) -> TopicRecord | None:
        """An allowed topic by slug (first by collection id when ``collection`` is None)."""

    def topics_by_id(self, topic_ids: Sequence[int], access: Access, *,
                     with_body: bool = True) -> dict[int, TopicRecord]:
        """Allowed topics among ``topic_ids``; ``with_body`` False: ``body_md`` is left empty
        (a search renders titles and snippets, and bodies average kilobytes)."""

    def topic_links(self, topic_ids: Sequence[int]) -> dict[int, list[LinkRecord]]:
        """Links of each topic: confidence desc, kind, key."""

    def linked_topics(
        self, kind: str, key: str, access: Access, *, limit: int | None = None,
        exclude_topic_id: int | None = None,
    ) -> list[LinkedTopic]:
        """Allowed topics linked to (kind, key), key case-insensitive: most reliable first."""

    def chunk_texts(self, chunk_ids: Sequence[int], access: Access) -> dict[int, tuple[int, str, str, str]]:
        """(topic id, collection, slug, original body text) of the chunks whose topic ``access``
        allows, read in one statement (vector snippets, checked as above)."""

    # -- entities ----------------------------------------------------------------------------
    def entity(self, kind: str, key: str) -> EntityRecord | None:
        """The entity (kind, key), key case-insensitive; first by collection id."""

    def aliases_named(self, kind: str, alias: str) -> list[AliasRecord]:
        """Alias rows whose old name is ``alias`` (case-insensitive): confidence desc, key."""

    def aliases_of(self, kind: str, key: str) -> list[AliasRecord]:
        """Old names of (kind, key): confidence desc, alias."""

    def relations_from(self, kind: str, key: str) -> list[RelationRecord]:
        """Edges leaving (kind, key): rel, kind, key."""

    def relations_to(self, kind: str, key: str) -> list[RelationRecord]:
        """Edges arriving at (kind, key) (the other end is the source): rel, kind, key."""

    def entity_kinds(self) -> list[EntityKindRecord]:
        """Entity kinds with their entity counts: collection, kind."""

    def entity_kind(self, kind: str, collection: str | None = None) -> EntityKindRecord | None:
        """One kind's row (in ``collection`` when given, else the first by collection)."""

    def find_entities(self, kind: str | None, text: str | None, limit: int) -> list[EntityRecord]:
        """Entities of ``kind`` whose folded key or title contains folded ``text``: by kind, key (byte-wise,
        as the contract orders them; lookups by key are case-insensitive, the order is not), collection."""

    # -- statistics and vectors --------------------------------------------------------------
    def counts(self, access: Access) -> dict[str, int]:
        """Row counts named by ``COUNT_NAMES``; topic-bound tables count allowed topics only."""

    def collection_counts(self, access: Access) -> dict[str, dict[str, int]]:
        """Per collection: ``{"topic": n, "chunk": n}`` over allowed topics."""

    def vectors(self, which: str, access: Access) -> list[VectorRow]:
        """``which`` = 'topic' | 'chunk': stored vectors of allowed topics, by id."""

    def vector_count(self, which: str, access: Access) -> int:
        """How many rows ``vectors`` holds: sizes the in-memory matrix before it is filled."""

    def iter_vectors(self, which: str, access: Access) -> Iterator[VectorRow]:
        """The rows of ``vectors``, same order, streamed from the database one at a time, so a
        100k-chunk pool never sits in memory as a list (the vector loader fills preallocated
        arrays from it). Consume it before the next call on this storage."""

    def topic_ids(self, access: Access, *, collection: str | None = None,
                  linked_to: tuple[str, str] | None = None) -> list[int]:
        """Ids of the allowed topics (optionally of one collection / linked to one entity)."""

    def change_stamp(self) -> tuple:
        """A value that changes whenever the pool's content changes (an import): cache key."""
