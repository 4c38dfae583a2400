"""``rules.fts5`` reproduces SQLite FTS5 (unicode61, bm25, snippet) bit for bit.

The oracle is this Python's own SQLite: an external-content FTS5 table over folded text, as in a
SQLite pool (``sqlite_schema.sql``), queried with the expressions ``rules.fts_query`` builds.
"""

from __future__ import annotations

import sqlite3

from hypothesis import given, settings, strategies as st

from knowspec.impl.rules import fts5
from knowspec.impl.rules.fold import fold
from knowspec.impl.rules.fts_query import build_fts_query, parse_match
from storages import WORDS

PUNCT = [" ", " ", ", ", ". ", ": ", ".\n", " - ", "\t", "(", ") ", "!  ", "e-mail ", " x1.2 "]
WEIGHTS = [10.0, 5.0, 1.0]

piece = st.one_of(st.sampled_from(WORDS), st.sampled_from(PUNCT),
                  st.text(alphabet="aİıŞşéèß\u0301\u00a0 .:-", min_size=1, max_size=4))
column = st.lists(piece, max_size=120).map("".join)
row = st.tuples(column.map(lambda t: t[:60]), column, column)


def _sqlite(rows):
    con = sqlite3.connect(":memory:")
    con.create_function("doc_fold", 1, fold)
    con.execute("create table c(id integer primary key, title, heading, body)")
    con.execute("create virtual table f using fts5(title, heading, body, content='c', content_rowid='id', "
                "tokenize='unicode61 remove_diacritics 2')")
    con.executemany("insert into c values (?, ?, ?, ?)", [(i + 1, *r) for i, r in enumerate(rows)])
    con.execute("insert into f(rowid, title, heading, body) "
                "select id, doc_fold(title), doc_fold(heading), doc_fold(body) from c")
    return con


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(row, min_size=1, max_size=25),
       queries=st.lists(st.lists(st.sampled_from(WORDS + ["ko", "ış", "st", "e"]), min_size=1, max_size=3)
                        .map(" ".join), min_size=1, max_size=6),
       snippet_column=st.sampled_from([-1, 0, 1, 2]), n_token=st.sampled_from([4, 16, 33]))
def test_bm25_and_snippet_equal_sqlite_fts5(rows, queries, snippet_column, n_token):
    con = _sqlite(rows)
    tokens = [[fts5.token_texts(fold(text)) for text in r] for r in rows]
    total = sum(len(c) for r in tokens for c in r)
    for query in queries:
        built = build_fts_query(query)
        for expr in filter(None, (built.all_words, built.any_word) if built else ()):
            words, joiner = parse_match(expr)
            phrases = [fts5.phrase(w.text, w.prefix) for w in words]
            inst = [fts5.row_instances(phrases, cols) for cols in tokens]
            hits = [sum(any(i.phrase == k for i in row_inst) for row_inst in inst) for k in range(len(phrases))]
            got = {}
            for n, row_inst in enumerate(inst):
                if fts5.row_matches(row_inst, len(phrases), joiner):
                    got[n + 1] = (
                        fts5.bm25(row_inst, len(phrases), WEIGHTS, hits, sum(map(len, tokens[n])), total, len(rows)),
                        fts5.snippet(rows[n], [len(c) for c in tokens[n]], row_inst, [p.size for p in phrases],
                                     snippet_column, "[", "]", "…", n_token))
            want = {r: (score, snip) for r, score, snip in con.execute(
                f"select rowid, bm25(f, 10.0, 5.0, 1.0), snippet(f, {snippet_column}, '[', ']', '…', {n_token}) "
                "from f where f match ?", [expr])}
            assert got == want, expr


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=30))
def test_tokenizer_equals_unicode61(text):
    con = sqlite3.connect(":memory:")
    con.execute("create virtual table t using fts5(x, tokenize='unicode61 remove_diacritics 2')")
    con.execute("create virtual table v using fts5vocab(t, 'instance')")
    con.execute("insert into t(rowid, x) values (1, ?)", [text.replace("\x00", " ")])
    want = [term for (term,) in con.execute("select term from v order by offset")]
    assert fts5.token_texts(text.replace("\x00", " ")) == want


def test_prefix_range_finds_every_term_with_the_prefix():
    vocabulary = sorted(["ab", "abc", "abd", "b", "ba"])
    assert [vocabulary[i] for i in fts5.prefix_range(vocabulary, "ab")] == ["ab", "abc", "abd"]
    assert list(fts5.prefix_range(vocabulary, "c")) == []


def _sentence(r, n):
    marks = [" ", " ", " ", ", ", ". ", ": ", "; ", " - ", "\n", ".\n", "! "]
    return "".join(r.choice(WORDS) + r.choice(marks) for _ in range(n)).strip()


def test_long_sections_with_sentences_choose_the_same_snippet_windows():
    """Long bodies with '.'/':' sentence breaks and repeated words: the window scoring rules."""
    import random

    r = random.Random(5)
    rows = [(_sentence(r, r.randint(1, 4)), _sentence(r, r.randint(0, 5)), _sentence(r, r.randint(0, 60)))
            for _ in range(70)]
    con = _sqlite(rows)
    tokens = [[fts5.token_texts(fold(text)) for text in row_] for row_ in rows]
    total = sum(len(c) for row_ in tokens for c in row_)
    compared = 0
    for _ in range(60):
        built = build_fts_query(" ".join(r.choice(WORDS)[: r.randint(2, 8)] for _ in range(r.randint(1, 3))))
        for expr in filter(None, (built.all_words, built.any_word) if built else ()):
            words, joiner = parse_match(expr)
            phrases = [fts5.phrase(w.text, w.prefix) for w in words]
            column, n_token = r.choice([-1, 2]), r.choice([6, 16])
            inst = [fts5.row_instances(phrases, cols) for cols in tokens]
            hits = [sum(any(i.phrase == k for i in ri) for ri in inst) for k in range(len(phrases))]
            for rowid, score, snip in con.execute(
                    f"select rowid, bm25(f, 10.0, 5.0, 1.0), snippet(f, {column}, '[', ']', '…', {n_token}) "
                    "from f where f match ?", [expr]):
                n = rowid - 1
                assert fts5.bm25(inst[n], len(phrases), WEIGHTS, hits, sum(map(len, tokens[n])), total,
                                 len(rows)) == score
                assert fts5.snippet(rows[n], [len(c) for c in tokens[n]], inst[n], [p.size for p in phrases],
                                    column, "[", "]", "…", n_token) == snip, expr
                compared += 1
    assert compared > 300


class _CountingInstances(list):
    """Instances that count every one handed out, by iteration or slicing."""

    handed = 0

    def __iter__(self):
        for item in super().__iter__():
            _CountingInstances.handed += 1
            yield item

    def __getitem__(self, key):
        got = super().__getitem__(key)
        if isinstance(key, slice):
            _CountingInstances.handed += len(got)
        return got


def test_a_snippet_looks_at_each_instance_a_bounded_number_of_times():
    """A section repeating one word made every window scan every instance: 8,000 matches, 10.6 s."""
    n, n_token = 4000, 16
    text = " ".join(["glossary"] * n)
    instances = _CountingInstances(fts5.Instance(0, offset, 0) for offset in range(n))
    _CountingInstances.handed = 0
    out = fts5.snippet([text], [n], instances, [1], 0, "[", "]", "…", n_token)
    assert out.startswith("[glossary]") and out.endswith("…")
    assert _CountingInstances.handed <= 4 * n_token * n  # was n * n: 16 million
