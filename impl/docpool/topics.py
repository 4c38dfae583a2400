"""Reading one topic: by slug, by entity (most reliable linked topic), and its related topics.

Backs ``doc_get``, ``doc_links`` and ``help_get_topic``. Every lookup goes through the caller's
``Access``, so a forbidden topic answers exactly like a missing one.
"""

from __future__ import annotations

from typing import Any

from knowspec.impl.docpool.entities import FORM, ISLEM, MODULE, resolve
from knowspec.impl.docpool.storage.base import Access, LinkRecord, PoolStorage, TopicRecord
from knowspec.impl.errors import ToolError

RELATED_MAX = 10
RELATED_KINDS = (FORM, ISLEM)
OPENS_ORDER = ("opens", "opens_mobile")


def topic_not_found(what: str) -> ToolError:
    return ToolError("not_found", f"topic not found ({what})")


def topic_for_entity(pool: PoolStorage, kind: str, key: str, access: Access,
                     collection: str | None = None) -> TopicRecord | None:
    """The most reliable allowed topic linked to (kind, key), in ``collection`` when given (a
    doc_get naming one had answered with another collection's topic); an old name is resolved first."""
    r = resolve(pool, kind, key)
    if collection is None:
        linked = pool.linked_topics(kind, r.key, access, limit=1)
    else:
        linked = [t for t in pool.linked_topics(kind, r.key, access) if t.collection == collection][:1]
    if not linked:
        return None
    return pool.topics_by_id([linked[0].topic_id], access).get(linked[0].topic_id)


def topic_for_islem(pool: PoolStorage, kod: str, access: Access) -> TopicRecord | None:
    """The topic linked to a transaction code, else the topic of the form it opens (opens, then opens_mobile)."""
    direct = topic_for_entity(pool, ISLEM, kod, access)
    if direct is not None:
        return direct
    r = resolve(pool, ISLEM, kod)
    relations = pool.relations_from(ISLEM, r.key)
    for rel in OPENS_ORDER:
        for edge in relations:
            if edge.rel == rel and edge.kind == FORM:
                found = topic_for_entity(pool, FORM, edge.key, access)
                if found is not None:
                    return found
    return None


def related(pool: PoolStorage, topic: TopicRecord, links: list[LinkRecord], access: Access) -> list[Any]:
    """At most 10 other allowed topics linked to the same form_class / islem_kodu."""
    seen: dict[int, tuple[float, str, str, str]] = {}
    for link in links:
        if link.kind not in RELATED_KINDS:
            continue
        for t in pool.linked_topics(link.kind, link.key, access, exclude_topic_id=topic.id):
            best = seen.get(t.topic_id)
            if best is None or t.confidence > best[0]:
                seen[t.topic_id] = (t.confidence, t.collection, t.slug, t.title)
    order = sorted(seen.values(), key=lambda v: (-v[0], v[1], v[2]))[:RELATED_MAX]
    return [{"collection": c, "slug": s, "title": title} for _, c, s, title in order]


def first_key(links: list[LinkRecord], kind: str) -> str | None:
    """The key of the most reliable link of ``kind`` (links come confidence-first)."""
    return next((l.key for l in links if l.kind == kind), None)


def doc_view(pool: PoolStorage, topic: TopicRecord, access: Access) -> dict[str, Any]:
    """The ``doc_get`` result for an allowed topic."""
    links = pool.topic_links([topic.id])[topic.id]
    return {
        "collection": topic.collection, "slug": topic.slug, "title": topic.title,
        "breadcrumb": topic.breadcrumb, "category": topic.category, "description": topic.description,
        "source_uri": topic.source_uri, "mime": topic.mime, "mtime": topic.mtime, "body_md": topic.body_md,
        "links": [{"kind": l.kind, "key": l.key, "confidence": l.confidence, "source": l.source} for l in links],
        "related": related(pool, topic, links, access),
    }


def help_view(pool: PoolStorage, topic: TopicRecord, access: Access) -> dict[str, Any]:
    """The ``help_get_topic`` result."""
    links = pool.topic_links([topic.id])[topic.id]
    return {
        "slug": topic.slug, "title": topic.title, "breadcrumb": topic.breadcrumb, "body_md": topic.body_md,
        "module": first_key(links, MODULE), "form_class": first_key(links, FORM),
        "islem_kodu": first_key(links, ISLEM),
        "related": [{"slug": r["slug"], "title": r["title"]} for r in related(pool, topic, links, access)],
    }


def links_view(pool: PoolStorage, kind: str, key: str, access: Access) -> list[dict[str, Any]]:
    """``doc_links``: allowed topics linked to the entity, most reliable first."""
    r = resolve(pool, kind, key)
    topics = pool.linked_topics(kind, r.key, access)
    if r.entity is None and not topics:
        raise ToolError("not_found", f"entity not found ({kind} {key})")
    return [{"collection": t.collection, "slug": t.slug, "title": t.title, "breadcrumb": t.breadcrumb,
             "confidence": t.confidence, "source": t.source} for t in topics]
