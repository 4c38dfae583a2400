"""Passage vectors for a pool being built: one per topic and one per chunk, plus the pool's
model identity in ``doc$meta`` (general recipe, collection ``''``).

The pool builder calls :func:`embed_pool` inside its write transaction when it is given a model
pack. The identity rows let the query side refuse a pack that would embed queries in another
space (``embedding.check_pack_matches``) and let IMPORTDOC refuse mixing two models in one pool.

Passage text (what the builder embeds, after the pack's passage prefix, ``"passage: "`` for e5):

- a topic: its title, description and the start of its body;
- a chunk: its topic's title, its heading path and its body.

Texts are cut at ``MAX_PASSAGE_CHARS`` characters before tokenizing: the pack truncates at 512
tokens anyway, and the cut keeps tokenizing huge sections cheap.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Callable

from knowspec.impl.docpool.vectors.scoring import encode_vector

MAX_PASSAGE_CHARS = 2000
META_MODEL = "vec_model"
META_DIM = "vec_dim"
META_QUERY_PREFIX = "vec_query_prefix"
META_PASSAGE_PREFIX = "vec_passage_prefix"

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class PoolModelIdentity:
    """What a pool records about the model its vectors came from."""

    model: str | None
    dim: int


def topic_passage(title: str, description: str, body: str) -> str:
    parts = [title.strip(), description.strip(), body.strip()]
    return "\n".join(p for p in parts if p)[:MAX_PASSAGE_CHARS]


def chunk_passage(title: str, heading: str, body: str) -> str:
    head = " > ".join(p for p in (title.strip(), heading.strip()) if p)
    return "\n".join(p for p in (head, body.strip()) if p)[:MAX_PASSAGE_CHARS]


def read_identity(meta_rows: dict[str, str]) -> PoolModelIdentity | None:
    """The identity recorded in a general recipe (``{name: value}``), or ``None`` if none."""
    dim = meta_rows.get(META_DIM)
    if not dim:
        return None
    return PoolModelIdentity(meta_rows.get(META_MODEL) or None, int(dim))


def identity_of(meta_rows: dict[str, str], sample: bytes | None) -> PoolModelIdentity | None:
    """The identity of vectors of which ``sample`` is one (None: there are none): the one their
    general recipe records, else their dimension alone."""
    if sample is None:
        return None
    return read_identity(meta_rows) or PoolModelIdentity(None, len(bytes(sample)) // 4)


def identity_conflict(old: PoolModelIdentity | None, new: PoolModelIdentity | None) -> str | None:
    """Why vectors of ``new`` cannot share a pool with vectors of ``old``; ``None`` if they can."""
    if old is None or new is None:
        return None
    if old.dim != new.dim:
        return f"the pool's vectors have dimension {old.dim}, the new ones {new.dim}"
    if old.model and new.model and old.model != new.model:
        return f"the pool's vectors were made with {old.model}, the new ones with {new.model}"
    return None


def _write_meta(con: sqlite3.Connection, name: str, value: str) -> None:
    con.execute('insert or replace into "doc$meta"(collection, name, value) values (\'\', ?, ?)', [name, value])


def embed_pool(con: sqlite3.Connection, embedder, *, passage_prefix: str | None = None,
               query_prefix: str | None = None, progress: Progress | None = None) -> dict[str, int]:
    """Embed every topic and chunk of the open pool ``con`` and record the model identity.

    ``passage_prefix`` / ``query_prefix``: the corpus recipe's explicit values, ``None`` for the
    pack's own (``pack.json``). Returns ``{"topic_vec": n, "chunk_vec": n}``.
    """
    info = embedder.info
    prefix = info.passage_prefix if passage_prefix is None else passage_prefix
    topics = con.execute('select id, title, description, body_md from "doc$topic" order by id').fetchall()
    chunks = con.execute('select ch.id, t.title, ch.heading, ch.body from "doc$chunk" ch '
                         'join "doc$topic" t on t.id = ch.topic_id order by ch.id').fetchall()
    total, done = len(topics) + len(chunks), 0
    for table, key, rows, passage in (("doc$topic_vec", "topic_id", topics, topic_passage),
                                      ("doc$chunk_vec", "chunk_id", chunks, chunk_passage)):
        for row_id, a, b, c in rows:
            vec = embedder.embed_passages([passage(a or "", b or "", c or "")], prefix)[0]
            con.execute(f'insert or replace into "{table}"({key}, vec) values (?, ?)', [row_id, encode_vector(vec)])
            done += 1
            if progress:
                progress(done, total)
    if info.model:
        _write_meta(con, META_MODEL, info.model)
    _write_meta(con, META_DIM, str(info.dim))
    _write_meta(con, META_PASSAGE_PREFIX, prefix)
    _write_meta(con, META_QUERY_PREFIX, info.query_prefix if query_prefix is None else query_prefix)
    return {"topic_vec": len(topics), "chunk_vec": len(chunks)}
