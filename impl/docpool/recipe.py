"""Run the IMPORTDOC recipe (``sql/doc_import.sql``) against a SQLite document pool.

The REST ``IMPORTDOC`` command (another module) validates its parameters and calls
``import_collection``; the pool builder's tests call it too, so the recipe has one executor.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from knowspec.impl.docpool.storage.sqlite import import_recipe_sql, open_for_write

COLLECTION_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


class ImportRefused(Exception):
    """The import cannot start (invalid name, missing source, collection absent): target untouched."""


@dataclass(frozen=True)
class ImportResult:
    collection: str
    topics: int
    chunks: int
    source: str


def recipe_statements() -> list[str]:
    """The recipe's statements, in order (comments removed)."""
    parts = []
    for raw in import_recipe_sql().split("\n;;"):
        sql = "\n".join(l for l in raw.splitlines() if not l.lstrip().startswith("--")).strip()
        if sql:
            parts.append(sql)
    return parts


def import_collection(target: Path | str, source: Path | str, collection: str) -> ImportResult:
    """Replace ``collection`` in the pool ``target`` with its rows from the pool ``source``."""
    if not COLLECTION_NAME.match(collection or ""):
        raise ImportRefused(f"invalid collection name {collection!r}")
    source = Path(source)
    if not source.is_file():
        raise ImportRefused(f"source pool not found ({source})")
    con = open_for_write(target)
    try:
        con.execute("attach database ? as src", [source.absolute().as_uri() + "?mode=ro"])
        try:
            found = con.execute('select count(*) from src."doc$collection" where id = ?',
                                [collection]).fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise ImportRefused(f"source is not a document pool ({source}): {exc}") from exc
        if not found:
            raise ImportRefused(f"collection {collection} not found in source ({source})")
        con.execute("begin immediate")
        try:
            for sql in recipe_statements():
                con.execute(sql, {"collection": collection})
            con.execute("commit")
        except BaseException:
            con.execute("rollback")
            raise
        topics = con.execute('select count(*) from "doc$topic" where collection = ?', [collection]).fetchone()[0]
        chunks = con.execute('select count(*) from "doc$chunk" ch join "doc$topic" t on t.id = ch.topic_id '
                             "where t.collection = ?", [collection]).fetchone()[0]
        return ImportResult(collection, topics, chunks, str(source))
    finally:
        try:
            con.execute("detach database src")
        except sqlite3.Error:
            pass
        con.close()
