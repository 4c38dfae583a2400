"""Firebird's in-memory full-text index (``fulltext.reader.FtsIndex``), ranked by the search
layer (``fulltext.search``), answers exactly like FTS5.

The reference is FTS5 itself on a SQLite pool (``fts5_reference.fts5_hits``): the index
is built from that pool's chunk and topic rows and must return the same hits -- topics, order,
best chunks, scores to the last bit, snippets -- for the same MATCH, caller, collection, link,
weights and snippet column. Words that unicode61 splits into several tokens (``e-mail``,
``x1.2``) take the row-by-row path (``fulltext.rank.rank_phrases``); they are checked the same way. No Firebird needed.
The Firebird-specific part (reading the chunk texts in one ``list()``) runs on the engine.
"""

from __future__ import annotations

import random
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from knowspec.impl.docpool.builder import build_pool
from knowspec.impl.docpool.fulltext import rank as fts_rank, reader
from knowspec.impl.docpool.fulltext.reader import FtsIndex
from knowspec.impl.docpool.fulltext.search import index_hits
from knowspec.impl.docpool.storage import firebird
from knowspec.impl.docpool.storage.base import UNRESTRICTED, Access
from knowspec.impl.docpool.storage.sqlite import SqlitePool
from knowspec.impl.rules import fts5
from knowspec.impl.rules.fts_query import build_fts_query
from fts5_reference import fts5_hits
from storages import WORDS, fb_dsn, fb_ready, query_words, write_generated_corpus  # noqa: F401

COLLECTION = "uretilen"
ACCESSES = [UNRESTRICTED, Access(frozenset({"muhasebe"})), Access(frozenset())]
SPLIT_WORDS = ["e-mail", "x1.2", "foo.bar", "İstanbul'da", "a/b", "naïve-café"]
MULTI_TOKEN_MATCHES = ['"e-mail"', '"e-ma"*', '"x1.2"*', '"foo.bar" OR "istanbul"*', '"e-mail" AND "kopru"*',
                       '"istanbul da"', '"a b"', '"naive-cafe"*', '"-"', '"-" OR "cay"*', '"-" AND "cay"*']


def _write_split_topics(folder: Path, seed: int = 3, topics: int = 12) -> None:
    """Topics whose text holds words unicode61 splits, next to ordinary ones."""
    r = random.Random(seed)
    for i in range(topics):
        words = [r.choice(WORDS + SPLIT_WORDS * 3) for _ in range(r.randint(10, 60))]
        acl = "acl: [muhasebe]\n" if i % 4 == 0 else ""
        (folder / "topics" / f"s{i:03d}.md").write_text(
            f"---\nslug: ayrik-{i:03d}\ntitle: \"{' '.join(r.sample(SPLIT_WORDS, 2))}\"\n{acl}"
            f"form_class: TfrmAyrik{i % 3}\n---\n# Başlık\n\n{' '.join(words)}. {r.choice(SPLIT_WORDS)}: son.\n",
            "utf-8")


@pytest.fixture(scope="module")
def pool(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fts-index")
    corpus = root / "corpus"
    write_generated_corpus(corpus, seed=21, topics=50)
    _write_split_topics(corpus)
    path = root / "pool.db"
    build_pool(corpus, path, COLLECTION, title="Üretilen", erisim="kisitli")
    return path


@pytest.fixture(scope="module")
def index(pool) -> FtsIndex:
    with closing(sqlite3.connect(pool)) as con:
        chunks = con.execute('select id, topic_id, title, heading, body from "doc$chunk"').fetchall()
        topics = con.execute('select id, collection, slug, title, breadcrumb from "doc$topic"').fetchall()
    return FtsIndex.build(("test",), chunks, topics)


def _both(pool, index, monkeypatch, match, access, *, collection=None, linked_to=None, **kw):
    with SqlitePool(pool) as sq:
        want = fts5_hits(sq, match, access, collection=collection, linked_to=linked_to, **kw)
        got = index_hits(sq, index, match, access, collection=collection, linked_to=linked_to, **kw)
    return want, got


@pytest.mark.parametrize("weights", [(10.0, 5.0, 1.0), (0.1, 2.5, 0.3)])
def test_index_ranks_and_cuts_snippets_exactly_like_fts5(pool, index, monkeypatch, weights):
    queries = query_words(9, 50) + ["köprü ışık", "straße", "İSTANBUL Boğazı", "zz"]
    nonempty = 0
    for query in queries:
        built = build_fts_query(query)
        for match in filter(None, (built.all_words, built.any_word) if built else ()):
            for access in ACCESSES:
                for only in (None, COLLECTION, "baska"):
                    want, got = _both(pool, index, monkeypatch, match, access, collection=only, limit=10,
                                      weights=weights, snippet_column="body")
                    assert got == want, (match, access, only)
                    nonempty += bool(want)
    assert nonempty > 100


@pytest.mark.parametrize("match", MULTI_TOKEN_MATCHES)
@pytest.mark.parametrize("column", ["body", "title", "nothing"])
def test_words_unicode61_splits_take_the_row_path_and_still_equal_fts5(pool, index, monkeypatch, match, column):
    assert fts_rank.query_phrases(match) is None  # not answerable by the arrays
    for access in ACCESSES:
        want, got = _both(pool, index, monkeypatch, match, access, limit=50, weights=(10.0, 5.0, 1.0),
                          snippet_column=column)
        assert got == want, (match, access)


def test_the_split_words_are_really_found(pool, index, monkeypatch):
    want, got = _both(pool, index, monkeypatch, '"e-mail"', UNRESTRICTED, limit=50, weights=(10.0, 5.0, 1.0),
                      snippet_column="body")
    assert got == want and len(got) >= 3 and any("[e-mail]" in h.snippet for h in got)


@settings(max_examples=30, deadline=None)
@given(words=st.lists(st.sampled_from(WORDS + SPLIT_WORDS).flatmap(
           lambda w: st.integers(2, len(w)).map(lambda n: w[:n])), min_size=1, max_size=3),
       limit=st.integers(0, 12), column=st.sampled_from(["title", "heading", "body", "nothing"]),
       weights=st.lists(st.sampled_from([0.5, 1.0, 3.0, 10.0, 0.3]), max_size=4))
def test_index_equals_fts5_for_any_words_limit_column_and_weights(pool, index, words, limit, column, weights):
    built = build_fts_query(" ".join(words))
    with pytest.MonkeyPatch.context() as mp:
        for match in filter(None, (built.all_words, built.any_word) if built else ()):
            want, got = _both(pool, index, mp, match, UNRESTRICTED, limit=limit, weights=tuple(weights),
                              snippet_column=column)
            assert got == want, match


def test_filters_by_linked_entity_like_fts5(pool, index, monkeypatch):
    for form in ("TfrmUretilen0", "TfrmAyrik1"):
        for access in ACCESSES:
            for match in ('"kopru"*', '"e-mail"'):
                want, got = _both(pool, index, monkeypatch, match, access, limit=10, weights=(10.0, 5.0, 1.0),
                                  snippet_column="body", linked_to=("form_class", form))
                assert got == want, (form, access, match)


def test_index_statistics_are_the_whole_table(pool, index):
    with closing(sqlite3.connect(pool)) as con:
        n_rows, total = reader.read_totals(con)
    assert (index.arrays.n_rows, index.arrays.total_tokens) == (n_rows, total)
    assert list(index.arrays.terms) == sorted(index.arrays.terms)


def test_an_empty_pool_builds_and_finds_nothing():
    empty = FtsIndex.build(("empty",), [], [])
    for match in ('"kopru"*', '"e-mail"'):
        assert index_hits(None, empty, match, UNRESTRICTED, limit=10, weights=(10.0, 5.0, 1.0),
                          snippet_column="body") == []


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.one_of(st.characters(),
                                       st.sampled_from("aİıŞşéß\u0301\u0300 .:-_x1\u00a0\u200b")), max_size=40))
def test_token_texts_are_the_tokens_of_tokenize(text):
    assert fts5.token_texts(text) == [t.text for t in fts5.tokenize(text)]


# -- reading the chunk texts from Firebird ----------------------------------------------------------

def test_framed_text_parses_back_or_not_at_all():
    rows = [(1, 7, "Başlık", "", "gövde😀 ok"), (2, 7, "", "h:1,2", "x" * 5)]
    framed = "".join(f"{i},{t},{len(a)},{len(b)},{len(c)}:{a}{b}{c}" for i, t, a, b, c in rows)
    assert firebird._parse_framed(framed, 2) == rows
    assert firebird._parse_framed("", 0) == []
    assert firebird._parse_framed(framed, 3) is None         # a row missing
    assert firebird._parse_framed(framed[:-1], 2) is None    # cut short
    assert firebird._parse_framed("1,2,3:abc", 1) is None    # a malformed header


@pytest.mark.firebird
def test_firebird_reads_every_chunk_text_like_a_plain_select(tmp_path, fb_ready, pool):
    from knowspec.impl.docpool.catalog import PoolLocation

    long_topic = tmp_path / "long" / "topics"
    long_topic.mkdir(parents=True)
    (long_topic / "uzun.md").write_text("---\nslug: uzun\ntitle: Uzun ğ😀\n---\n# Uzun\n\n"
                                        + ("çok uzun bir paragraf😀 " * 400) + "\n", "utf-8")
    long_pool = tmp_path / "long.db"
    build_pool(tmp_path / "long", long_pool, "uzun", title="Uzun", erisim="herkes")
    dsn = fb_dsn(tmp_path, "texts")
    firebird.import_collection(dsn, pool, COLLECTION)
    firebird.import_collection(dsn, long_pool, "uzun")
    with firebird.open_pool(PoolLocation("fb", "fb", "FIREBIRD", dsn)) as fb:
        got = sorted(firebird.chunk_texts(fb._rows))
        want = sorted(fb._rows("select id, topic_id, title, heading, body from doc$chunk"))
        assert any(len(r[4]) > 4000 for r in want)  # the row-by-row part is exercised too
        assert got == want
