"""The FTS query builder: a table of inputs -> MATCH strings, properties, and real FTS5 runs."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings, strategies as st

from knowspec.impl.rules.fold import fold
from knowspec.impl.rules.fts_query import MAX_WORDS, build_fts_query, parse_stopwords, query_words

STOP = ["ve", "ile", "the", "and"]

TABLE = [
    # (query, AND expression, OR expression or None)
    ("fatura", '"fatura"*', None),
    ("cari hesap", '"cari"* AND "hesap"*', '"cari"* OR "hesap"*'),
    ("ve ile", '"ve" AND "ile"*', '"ve" OR "ile"*'),                        # stopwords only: originals kept
    ("fatura ve stok", '"fatura"* AND "stok"*', '"fatura"* OR "stok"*'),     # stopword dropped
    ("a b c", None, None),                                                   # 1-char words only
    ("x fatura y", '"fatura"*', None),
    ("ab", '"ab"', None),                                                    # 2 chars: no prefix
    ('"cari hesap"', '"cari"* AND "hesap"*', '"cari"* OR "hesap"*'),         # user quotes are separators
    ("cari AND hesap", '"cari"* AND "hesap"*', '"cari"* OR "hesap"*'),       # AND is a stopword here
    ("cari OR NOT hesap", '"cari"* AND "or" AND "not"* AND "hesap"*', '"cari"* OR "or" OR "not"* OR "hesap"*'),
    ("NEAR(cari hesap)", '"near"* AND "cari"* AND "hesap"*', '"near"* OR "cari"* OR "hesap"*'),
    ('"', None, None),
    ("*", None, None),
    ("fat* -stok ^col:x", '"fat"* AND "stok"* AND "col"*', '"fat"* OR "stok"* OR "col"*'),
    ("'; DROP TABLE doc$topic; --", '"drop"* AND "table"* AND "doc"* AND "topic"*',
     '"drop"* OR "table"* OR "doc"* OR "topic"*'),
    ("İSTANBUL Işık", '"istanbul"* AND "isik"*', '"istanbul"* OR "isik"*'),
    ("Straße œuvre", '"strasse"* AND "oeuvre"*', '"strasse"* OR "oeuvre"*'),
    ("ST-20 FT10", '"st" AND "20" AND "ft10"*', '"st" OR "20" OR "ft10"*'),
    ("", None, None),
]


@pytest.mark.parametrize("text, all_words, any_word", TABLE)
def test_builder_table(text, all_words, any_word):
    built = build_fts_query(text, STOP)
    if all_words is None:
        assert built is None
    else:
        assert (built.all_words, built.any_word) == (all_words, any_word)


def test_thirteen_words_keep_the_first_twelve():
    words = [f"w{i:02d}" for i in range(13)]
    built = build_fts_query(" ".join(words))
    assert [w.text for w in built.words] == words[:12]
    assert '"w12"' not in built.all_words


def test_stopwords_are_folded_before_comparison():
    assert [w.text for w in query_words("İçin stok", ["için"])] == ["stok"]


def test_parse_stopwords_accepts_spaces_and_commas():
    assert parse_stopwords("ve, ile  bir;de") == ["ve", "ile", "bir", "de"]
    assert parse_stopwords(None) == []


@given(st.text(max_size=200), st.lists(st.sampled_from(STOP + ["stok", "fatura"]), max_size=4))
def test_words_follow_the_length_count_and_quote_rules(text, stop):
    words = query_words(text, stop)
    assert len(words) <= MAX_WORDS
    for w in words:
        assert len(w.text) >= 2
        assert w.prefix == (len(w.text) >= 3)
        assert w.text == fold(w.text)
        assert w.text.isalnum()
    built = build_fts_query(text, stop)
    if built is not None:
        assert built.all_words.count('"') == 2 * len(words)


@pytest.fixture(scope="module")
def fts():
    con = sqlite3.connect(":memory:")
    con.execute("create virtual table t using fts5(body, tokenize = 'unicode61 remove_diacritics 2')")
    rows = ["cari hesap kartı", "stok kartı ve depo", "fatura kesme", "near and or not", "straße istanbul ışık"]
    con.executemany("insert into t(body) values (?)", [(fold(r),) for r in rows])
    return con


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=120))
def test_every_built_expression_is_valid_fts5(fts, text):
    built = build_fts_query(text, STOP)
    if built is None:
        return
    for expr in filter(None, (built.all_words, built.any_word)):
        fts.execute("select rowid from t where t match ?", [expr]).fetchall()


@pytest.mark.parametrize("text, expected", [
    ("cari hesap", [1]),              # AND
    ("kart", [1, 2]),                 # prefix
    ("near or", [4]),                 # operators typed by the user are plain words
    ("ISTANBUL isik", [5]),           # folding on both sides
    ("strasse", [5]),
])
def test_expressions_find_the_expected_rows(fts, text, expected):
    built = build_fts_query(text)
    rows = [r[0] for r in fts.execute("select rowid from t where t match ? order by rowid", [built.all_words])]
    assert rows == expected


@given(st.text(max_size=120))
def test_parse_match_round_trips_the_built_expressions(text):
    from knowspec.impl.rules.fts_query import parse_match
    built = build_fts_query(text, STOP)
    if built is None:
        return
    assert parse_match(built.all_words) == (list(built.words), "AND")
    if built.any_word:
        assert parse_match(built.any_word) == (list(built.words), "OR")
