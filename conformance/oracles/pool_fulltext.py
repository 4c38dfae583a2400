"""doc_search full text, answered by SQLite FTS5 itself on the suite's own copy of the pool.

spec/docpool/contract.md §4 and §6 define full-text scores and snippets as FTS5's ``bm25()`` and
``snippet()`` over the pool: its folded index, statistics over every chunk (visible or not), the
pool's recipe (``search_bm25_weights``, ``chunk_fts_snippet_column``, ``search_stopwords``), the
best chunk per topic, topics by (score, collection, slug), AND of the words first and OR when AND
finds nothing the caller may see. The suite wrote the pool the target serves, so the reference is
the engine the contract names, asked directly, not a second ranking of the suite's own; what is
restated here is only the query rules (§6) and the ordering around FTS5's numbers.
"""

from __future__ import annotations

import re
import sqlite3
from collections import Counter
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from knowspec.conformance.pool_fixture import PoolFixture, Topic, fold, tokens

MIN_WORD_CHARS, PREFIX_MIN_CHARS, MAX_WORDS = 2, 3, 12
DEFAULT_WEIGHTS = (10.0, 5.0, 1.0)
COLUMNS = ("title", "heading", "body")
MARKS, SNIPPET_TOKENS = ("[", "]", "…"), 16


@dataclass(frozen=True)
class ExpectedHit:
    collection: str
    slug: str
    score: float
    snippet: str


def recipe(db: Path, collection: str | None) -> dict[str, str]:
    """The pool's ``doc$meta``: the general rows, the collection's own rows over them."""
    with closing(_open(db)) as con:
        rows = con.execute('select collection, name, value from "doc$meta" where collection in (\'\', ?)',
                           [collection or ""]).fetchall()
    general = {name: value for cid, name, value in rows if cid == ""}
    return {**general, **{name: value for cid, name, value in rows if cid and cid == collection}}


def query_words(text: str, stopwords: str | None) -> list[str]:
    """§6: folded runs of letters and digits of 2+ characters, the first 12, stopwords dropped
    unless that drops them all."""
    words = [w for w in re.findall(r"[^\W_]+", fold(text)) if len(w) >= MIN_WORD_CHARS][:MAX_WORDS]
    stop = {fold(s) for s in re.split(r"[\s,;]+", stopwords or "") if s}
    return [w for w in words if w not in stop] or words


def weights_of(raw: str | None) -> tuple[float, ...]:
    """``search_bm25_weights``; the contract's default when absent or not numbers."""
    try:
        found = tuple(float(w) for w in (raw or "").replace(";", ",").split(",") if w.strip())
    except ValueError:
        found = ()
    return found[: len(COLUMNS)] if found and all(abs(w) <= 1e9 for w in found) else DEFAULT_WEIGHTS


def expected_fts(db: Path, fx: PoolFixture, query: str, visible: set[tuple[str, str]], limit: int,
                 collection: str | None = None) -> list[ExpectedHit]:
    """What doc_search ``query`` (mode fts, ``limit``, optional ``collection``) answers a caller
    who sees the topics ``visible`` ((collection, slug) pairs) of the pool file ``db``."""
    meta = recipe(db, collection)
    words = query_words(query, meta.get("search_stopwords"))
    if not words:
        return []
    terms = ['"' + w.replace('"', '""') + '"' + ("*" if len(w) >= PREFIX_MIN_CHARS else "") for w in words]
    weights = weights_of(meta.get("search_bm25_weights"))
    column = meta.get("chunk_fts_snippet_column") or "body"
    kept = {key for key in visible if collection is None or key[0] == collection}
    hits = _ranked(db, " AND ".join(terms), weights, column, kept)
    if not hits and len(terms) > 1:
        hits = _ranked(db, " OR ".join(terms), weights, column, kept)
    return hits[:limit]


def _ranked(db: Path, match: str, weights: tuple[float, ...], column: str,
            kept: set[tuple[str, str]]) -> list[ExpectedHit]:
    col = COLUMNS.index(column) if column in COLUMNS else -1
    marks = ", ".join("?" * 3)
    sql = (f'select t.collection, t.slug, c.id, bm25("doc$chunk_fts", {", ".join("?" * len(weights))}), '
           f'snippet("doc$chunk_fts", {col}, {marks}, {SNIPPET_TOKENS}), '
           f'snippet("doc$chunk_fts", -1, {marks}, {SNIPPET_TOKENS}), '
           f'{"c." + column if col >= 0 else "1"} '
           'from "doc$chunk_fts" join "doc$chunk" c on c.id = "doc$chunk_fts".rowid '
           'join "doc$topic" t on t.id = c.topic_id where "doc$chunk_fts" match ?')
    with closing(_open(db)) as con:
        rows = con.execute(sql, [*weights, *MARKS, *MARKS, match]).fetchall()
    best: dict[tuple[str, str], tuple[float, int, str]] = {}
    for cid, slug, chunk_id, score, in_column, anywhere, column_text in rows:
        if (cid, slug) not in kept:
            continue
        # An empty snippet column (a heading-only chunk) falls back to the best column.
        snippet = in_column if col >= 0 and column_text and in_column else anywhere
        if (cid, slug) not in best or (score, chunk_id) < best[(cid, slug)][:2]:
            best[(cid, slug)] = (score, chunk_id, snippet)
    ordered = sorted(best.items(), key=lambda item: (item[1][0], item[0][0], item[0][1]))
    return [ExpectedHit(cid, slug, score, snippet) for (cid, slug), (score, _, snippet) in ordered]


def _open(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(db.absolute().as_uri() + "?mode=ro", uri=True)


def fts5_available() -> str | None:
    """Why this Python's SQLite cannot be the reference (no FTS5), or ``None``."""
    try:
        with closing(sqlite3.connect(":memory:")) as con:
            con.execute("create virtual table t using fts5(x)")
    except sqlite3.Error as exc:
        return f"this Python's SQLite has no FTS5 ({exc}): the full-text reference is FTS5 itself"
    return None


def common_words(fx: PoolFixture, stopwords: str | None, count: int = 3) -> list[str]:
    """The folded words of 4+ characters in the most chunks (ties by the word): queries whose hits
    span many topics, with scores that differ by column, frequency and chunk length."""
    stop = {fold(s) for s in re.split(r"[\s,;]+", stopwords or "") if s}
    seen: Counter[str] = Counter()
    for topic in fx.topics:
        for chunk in topic.chunks:
            seen.update({w for text in (topic.title, chunk.heading, chunk.body) for w in tokens(text)})
    ranked = sorted((w for w in seen if len(w) >= 4 and w not in stop and not w.isdigit()),
                    key=lambda w: (-seen[w], w))
    return ranked[:count]


def topic_key(topic: Topic) -> tuple[str, str]:
    return topic.collection, topic.slug
