"""Help and document pools restated over the fixture facts (spec/docpool/contract.md).

The help pool is read without authorization; document topics through the caller's principals
(``None``: the unrestricted stdio caller). Every function is pure over a :class:`PoolFixture`.
"""

from __future__ import annotations

from typing import Any

from knowspec.conformance.pool_fixture import HERKES, Entity, PoolFixture, Topic, ascii_lower, fold, tokens


def visible(fx: PoolFixture, topic: Topic, principals: frozenset[str] | None) -> bool:
    if principals is None or fx.collection(topic.collection).erisim == HERKES:
        return True
    return any(ascii_lower(p) in principals for p in topic.acl)


def same(a: str, b: str) -> bool:
    return ascii_lower(a) == ascii_lower(b)


def best_key(topic: Topic, kind: str) -> set[str]:
    """The keys of the topic's most reliable links of ``kind`` (a tie leaves several)."""
    links = [l for l in topic.links if l.kind == kind]
    if not links:
        return set()
    top = max(l.confidence for l in links)
    return {l.key for l in links if l.confidence == top}


def related_ranked(fx: PoolFixture, topic: Topic, principals: frozenset[str] | None) -> list[tuple[float, Topic]]:
    """Other visible topics sharing a form_class / islem_kodu, with their best confidence on a shared entity."""
    mine = {(l.kind, ascii_lower(l.key)) for l in topic.links if l.kind in ("form_class", "islem_kodu")}
    out = []
    for t in fx.topics:
        if t == topic or not visible(fx, t, principals):
            continue
        shared = [l.confidence for l in t.links if (l.kind, ascii_lower(l.key)) in mine]
        if shared:
            out.append((max(shared), t))
    return out


def help_related(fx: PoolFixture, topic: Topic) -> list[dict[str, Any]] | None:
    """help_get_topic related: confidence descending then slug, at most 10 (None when ties cut the list)."""
    ranked = sorted(related_ranked(fx, topic, None), key=lambda r: (-r[0], r[1].slug))
    return [{"slug": t.slug, "title": t.title} for _, t in ranked[:10]]


def form_topics(fx: PoolFixture, form: Entity) -> list[dict[str, Any]]:
    """help_form_info topics: linked topics, confidence descending then slug."""
    rows = [(t, l) for t in fx.topics for l in t.links if l.kind == "form_class" and same(l.key, form.key)]
    rows.sort(key=lambda r: (-r[1].confidence, r[0].slug))
    return [{"slug": t.slug, "title": t.title, "confidence": l.confidence, "source": l.source} for t, l in rows]


def form_codes(fx: PoolFixture, form: Entity) -> list[tuple[str, str]]:
    """help_form_info islem_kodlari as (rel, kod): codes that open the form, by rel then kod."""
    return sorted((r.rel, r.from_key) for r in fx.relations
                  if r.to_kind == "form_class" and same(r.to_key, form.key) and r.from_kind == "islem_kodu")


def pool_counts(fx: PoolFixture, principals: frozenset[str] | None) -> dict[str, int]:
    seen = [t for t in fx.topics if visible(fx, t, principals)]
    chunks = sum(len(t.chunks) for t in seen)
    return {"topic": len(seen), "chunk": chunks, "topic_vec": len(seen) if fx.vectors else 0,
            "chunk_vec": chunks if fx.vectors else 0, "entity": len(fx.entities), "entity_rel": len(fx.relations), "alias": len(fx.aliases),
            "link": sum(len(t.links) for t in seen), "acl": sum(len(t.acl) for t in seen)}


def collection_stats(fx: PoolFixture, cid: str, principals: frozenset[str] | None) -> dict[str, Any]:
    c = fx.collection(cid)
    seen = [t for t in fx.topics_in(cid) if visible(fx, t, principals)]
    return {"title": c.title, "kind": c.kind, "erisim": c.erisim, "generated": c.generated,
            "help_url_v3": c.help_url_v3, "topics": len(seen), "chunks": sum(len(t.chunks) for t in seen),
            "meta": dict(c.meta)}


def turkish_variants(word: str) -> list[str]:
    """Spellings the fold must equate with ``word``: dotless/dotted i swapped, upper case, folded."""
    out = {word.upper(), fold(word), word.replace("i", "ı").replace("I", "İ"),
           word.replace("ı", "i").replace("İ", "I"), word.replace("i", "İ").replace("ı", "I")}
    out.discard(word)
    return sorted(out)


def folds_alike(a: str, b: str) -> bool:
    return tokens(a) == tokens(b)
