"""FTS5 itself as the reference ranker of the full-text tests (not a test module).

The product ranks in one layer (``fulltext.search`` over postings); these tests check that layer
against SQLite's own engine: ``fts5_hits`` asks FTS5 for the best chunk per allowed topic with
``bm25()`` and ``snippet()`` in SQL, over every matching row (no early stop), and orders topics
by (score, collection, slug), the contract ``search_hits`` keeps.
"""

from __future__ import annotations

from typing import Any, Sequence

from knowspec.impl.docpool.storage.base import Access, SearchHit
from knowspec.impl.docpool.storage.sqlite import SqlitePool

COLUMNS = ("title", "heading", "body")
MARKS = ("[", "]", "…")
SNIPPET_TOKENS = 16


def fts5_hits(pool: SqlitePool, match: str, access: Access, *, limit: int, weights: Sequence[float],
              snippet_column: str, collection: str | None = None,
              linked_to: tuple[str, str] | None = None) -> list[SearchHit]:
    """FTS5's answer for ``match`` on ``pool`` (``search_hits``' contract)."""
    weight_sql = ", ".join(repr(float(w)) for w in list(weights)[: len(COLUMNS)]) or "1.0"
    params: list[Any] = [match, f"bm25({weight_sql})"]
    where = ['"doc$chunk_fts" match ?', "rank match ?"]
    if collection is not None:
        where.append("t.collection = ?")
        params.append(collection)
    if linked_to is not None:
        where.append('exists (select 1 from "doc$link" l where l.topic_id = t.id and l.kind = ? '
                     "and l.key = ? collate nocase)")
        params.extend(linked_to)
    where.append(pool._acl(access, params))
    rows = pool._rows(
        f"""select ch.topic_id, ch.id as chunk_id, rank as score, t.collection, t.slug, t.title, t.breadcrumb
            from "doc$chunk_fts" join "doc$chunk" ch on ch.id = "doc$chunk_fts".rowid
            join "doc$topic" t on t.id = ch.topic_id join "doc$collection" c on c.id = t.collection
            where {' and '.join(where)}""", params)
    best: dict[int, Any] = {}
    for r in rows:
        known = best.get(r["topic_id"])
        if known is None or (r["score"], r["chunk_id"]) < (known["score"], known["chunk_id"]):
            best[r["topic_id"]] = r
    ranked = sorted(best.values(), key=lambda r: (r["score"], r["collection"], r["slug"]))[:limit]
    snippets = _snippets(pool, match, [r["chunk_id"] for r in ranked], snippet_column)
    return [SearchHit(r["topic_id"], r["chunk_id"], r["collection"], r["slug"], r["title"], r["breadcrumb"],
                      r["score"], snippets.get(r["chunk_id"], "")) for r in ranked]


def _snippets(pool: SqlitePool, match: str, chunk_ids: list[int], column: str) -> dict[int, str]:
    if not chunk_ids:
        return {}
    col = COLUMNS.index(column) if column in COLUMNS else -1
    marks = ",".join("?" * len(chunk_ids))
    rows = pool._rows(
        f"""select rowid, snippet("doc$chunk_fts", {col}, ?1, ?2, ?3, {SNIPPET_TOKENS}) as s,
                   snippet("doc$chunk_fts", -1, ?1, ?2, ?3, {SNIPPET_TOKENS}) as any_column
            from "doc$chunk_fts" where "doc$chunk_fts" match ?4 and rowid in ({marks})""",
        [*MARKS, match, *chunk_ids])
    return {r["rowid"]: r["s"] or r["any_column"] or "" for r in rows}  # empty column: the best one
