"""Small source pools for the IMPORTDOC and REST tests, written with the pool DDL.

Not a test module of its own (no tests): the import and REST test modules import it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Iterable

from knowspec.impl.docpool.storage.sqlite import open_for_write


def make_pool(
    path: Path,
    collection: str,
    topics: Iterable[tuple[str, str, str]],
    *,
    erisim: str = "herkes",
    acl: dict[str, list[str]] | None = None,
    chunks_per_topic: int = 2,
    meta: dict[str, str] | None = None,
    entity_kinds: Iterable[tuple[str, str]] = (("form_class", "Forms"),),
) -> Path:
    """A pool file holding ``collection`` with ``(slug, title, body)`` topics.

    Each topic gets ``chunks_per_topic`` chunks, one link to ``form_class``/``F_<slug>``, and
    the principals in ``acl[slug]``. Adds to ``path`` when it already holds other collections.
    """
    acl = acl or {}
    con = open_for_write(path)
    try:
        con.execute("begin")
        con.execute(
            'insert into "doc$collection"(id, title, kind, erisim, generated) values (?, ?, ?, ?, ?)',
            (collection, collection.title(), "docs", erisim, "2026-11-30T00:00:00Z"),
        )
        for slug, title, body in topics:
            cur = con.execute(
                'insert into "doc$topic"(collection, slug, title, body_md) values (?, ?, ?, ?)',
                (collection, slug, title, body),
            )
            topic_id = cur.lastrowid
            for n in range(chunks_per_topic):
                chunk = con.execute(
                    'insert into "doc$chunk"(topic_id, ord, title, heading, body) values (?, ?, ?, ?, ?)',
                    (topic_id, n, title, f"part {n}", f"{body} (part {n})"),
                )
                con.execute(
                    'insert into "doc$chunk_fts"(rowid, title, heading, body) '
                    "values (?, doc_fold(?), doc_fold(?), doc_fold(?))",
                    (chunk.lastrowid, title, f"part {n}", f"{body} (part {n})"),
                )
            con.execute(
                'insert into "doc$link"(topic_id, kind, key, confidence, source) values (?, ?, ?, ?, ?)',
                (topic_id, "form_class", f"F_{slug}", 0.9, "frontmatter"),
            )
            for principal in acl.get(slug, []):
                con.execute('insert into "doc$acl"(topic_id, principal) values (?, ?)',
                            (topic_id, principal))
        for kind, title in entity_kinds:
            con.execute(
                'insert into "doc$entity_kind"(collection, kind, title) values (?, ?, ?)',
                (collection, kind, title),
            )
        for name, value in (meta or {}).items():
            con.execute(
                'insert or replace into "doc$meta"(collection, name, value) values (?, ?, ?)',
                ("", name, value),
            )
        con.execute("commit")
    finally:
        con.close()
    return path


def topics_of(n: int, prefix: str = "topic") -> list[tuple[str, str, str]]:
    return [(f"{prefix}-{i}", f"{prefix.title()} {i}", f"body of {prefix} {i} about invoices")
            for i in range(n)]


def file_digest(path: Path) -> str | None:
    """sha256 of the pool file and its WAL (``None`` when absent): 'byte-identical' checks."""
    if not path.exists():
        return None
    h = hashlib.sha256(path.read_bytes())
    wal = Path(str(path) + "-wal")
    if wal.exists():
        h.update(wal.read_bytes())
    return h.hexdigest()
