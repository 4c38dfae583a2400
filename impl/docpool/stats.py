"""Pool summaries: ``doc_collections`` rows and the ``help_stats`` / ``doc_stats`` report.

Counts of topic-bound tables (topics, chunks, vectors, links, ACL rows) only include topics the
caller may see, so a restricted topic never shows through a number.
"""

from __future__ import annotations

from typing import Any

from knowspec.impl.docpool.storage.base import Access, PoolStorage


def collection_rows(pool: PoolStorage, access: Access) -> list[dict[str, Any]]:
    """``[{id, title, kind, erisim, topics, generated}]`` of the collections the caller may see."""
    return [{"id": c.id, "title": c.title, "kind": c.kind, "erisim": c.erisim, "topics": c.topics,
             "generated": c.generated} for c in pool.collections(access)]


def pool_stats(pool: PoolStorage, access: Access) -> dict[str, Any]:
    """``{meta: <general recipe>, collections: {<id>: {..., meta}}, counts: {...}}``."""
    meta = pool.meta()
    per = pool.collection_counts(access)
    collections = {}
    for c in pool.collections(access):
        n = per.get(c.id, {"topic": 0, "chunk": 0})
        collections[c.id] = {"title": c.title, "kind": c.kind, "erisim": c.erisim, "generated": c.generated,
                             "help_url_v3": c.help_url_v3, "topics": n["topic"], "chunks": n["chunk"],
                             "meta": meta.get(c.id, {})}
    return {"meta": meta.get("", {}), "collections": collections, "counts": pool.counts(access)}
