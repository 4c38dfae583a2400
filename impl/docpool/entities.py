"""Entities of a pool: lookup with case-insensitive keys and old names, help URLs, listings.

Backs ``doc_entity``, ``doc_entities`` and ``help_form_info``. Entity rows are not subject to
topic ACLs; every topic list or count they carry is filtered by the caller's ``Access``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from knowspec.impl.docpool.storage.base import UNRESTRICTED, Access, EntityRecord, PoolStorage
from knowspec.impl.errors import ToolError

FORM = "form_class"
ISLEM = "islem_kodu"
MODULE = "module"


@dataclass(frozen=True)
class ResolvedEntity:
    """The entity a (kind, key) names; ``resolved_from`` is the old name when an alias was used."""

    kind: str
    key: str
    entity: EntityRecord | None
    resolved_from: str | None = None


def resolve(pool: PoolStorage, kind: str, key: str) -> ResolvedEntity:
    """(kind, key) -> its entity: exact key (case-insensitive) first, then an old name (doc$alias)."""
    found = pool.entity(kind, key)
    if found is not None:
        return ResolvedEntity(kind, found.key, found)
    for alias in pool.aliases_named(kind, key):
        target = pool.entity(kind, alias.key)
        return ResolvedEntity(kind, target.key if target else alias.key, target, key)
    return ResolvedEntity(kind, key, None)


def agent_v3(agent_version: str) -> str:
    """The third field of the agent version ("5.1.1.1531" -> "1")."""
    parts = (agent_version or "").split(".")
    return parts[2] if len(parts) > 2 else ""


def help_url(pool: PoolStorage, entity: EntityRecord, agent_version: str) -> str | None:
    """``url_template`` of the entity's kind with ``<key>`` and ``<v3>`` filled, or None."""
    kind = pool.entity_kind(entity.kind, entity.collection)
    if kind is None or not kind.url_template:
        return None
    v3 = None
    for c in pool.collections(UNRESTRICTED):
        if c.id == entity.collection:
            v3 = c.help_url_v3
    v3 = v3 or agent_v3(agent_version)
    return kind.url_template.replace("<key>", quote(entity.key, safe="")).replace("<v3>", v3)


def _not_found(what: str, kind: str, key: str) -> ToolError:
    return ToolError("not_found", f"{what} not found ({kind} {key})")


def entity_view(pool: PoolStorage, kind: str, key: str, access: Access, agent_version: str) -> dict[str, Any]:
    """The ``doc_entity`` result."""
    r = resolve(pool, kind, key)
    if r.entity is None:
        raise _not_found("entity", kind, key)
    e = r.entity
    out: dict[str, Any] = {
        "collection": e.collection, "kind": e.kind, "key": e.key, "title": e.title, "attrs": e.attrs,
        "relations": [{"rel": x.rel, "kind": x.kind, "key": x.key} for x in pool.relations_from(e.kind, e.key)],
        "relations_in": [{"rel": x.rel, "kind": x.kind, "key": x.key} for x in pool.relations_to(e.kind, e.key)],
        "aliases": [{"alias": a.alias, "confidence": a.confidence} for a in pool.aliases_of(e.kind, e.key)],
        "topics": len(pool.linked_topics(e.kind, e.key, access)),
        "help_url": help_url(pool, e, agent_version),
    }
    if r.resolved_from is not None:
        out["resolved_from"] = r.resolved_from
    return out


def entity_listing(pool: PoolStorage, kind: str | None, q: str | None, limit: int) -> list[dict[str, Any]]:
    """``doc_entities``: kinds when neither ``kind`` nor ``q`` is given, else matching entities."""
    if kind is None and not q:
        return [{"kind": k.kind, "title": k.title, "key_rule": k.key_rule, "collection": k.collection,
                 "entities": k.entities} for k in pool.entity_kinds()[:limit]]
    return [{"collection": e.collection, "kind": e.kind, "key": e.key, "title": e.title}
            for e in pool.find_entities(kind, q, limit)]


def form_info(pool: PoolStorage, form_class: str, agent_version: str) -> dict[str, Any]:
    """``help_form_info``: the form, the transaction codes around it, its topics and help URL."""
    r = resolve(pool, FORM, form_class)
    if r.entity is None:
        raise _not_found("form", FORM, form_class)
    e = r.entity
    codes = []
    for rel in pool.relations_to(FORM, e.key):
        if rel.kind == ISLEM:
            codes.append({**rel.attrs, "kod": rel.key, "rel": rel.rel, "title": rel.title})
    for rel in pool.relations_from(FORM, e.key):
        if rel.kind == ISLEM:
            codes.append({**rel.attrs, "kod": rel.key, "rel": rel.rel, "title": rel.title})
    topics = [{"slug": t.slug, "title": t.title, "confidence": t.confidence, "source": t.source}
              for t in pool.linked_topics(FORM, e.key, UNRESTRICTED)]
    out: dict[str, Any] = {
        "form": {**e.attrs, "form_class": e.key, "title": e.title},
        "islem_kodlari": codes,
        "topics": topics,
        "help_url": help_url(pool, e, agent_version),
    }
    if r.resolved_from is not None:
        out["legacy_alias"] = r.resolved_from
    return out
