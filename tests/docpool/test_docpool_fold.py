"""Turkish / Latin accent folding: the table of letters and the token-boundary invariant."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings, strategies as st

from knowspec.impl.rules.fold import ascii_lower, fold


@pytest.mark.parametrize("text, folded", [
    ("ı", "i"), ("İ", "i"), ("I", "i"), ("ş", "s"), ("Ş", "s"), ("ğ", "g"), ("ç", "c"), ("ö", "o"),
    ("ü", "u"), ("â", "a"), ("î", "i"), ("û", "u"), ("ß", "ss"), ("œ", "oe"), ("æ", "ae"), ("ø", "o"),
    ("ł", "l"), ("đ", "d"), ("ð", "d"), ("þ", "th"), ("é", "e"), ("ñ", "n"),
    ("İSTANBUL IŞIK", "istanbul isik"), ("Çağrı Öğüt", "cagri ogut"), ("e\u0301", "e"),
    ("", ""), (None, ""),
])
def test_fold_table(text, folded):
    assert fold(text) == folded


def test_fold_keeps_non_latin_letters_and_punctuation():
    assert fold("Ωmega 東京, x-y") == "ωmega 東京, x-y"


def test_ascii_lower_leaves_non_ascii_alone():
    assert ascii_lower("SYSADMIN İk") == "sysadmin İk"


@pytest.fixture(scope="module")
def vocab():
    con = sqlite3.connect(":memory:")
    con.execute("create virtual table t using fts5(body, tokenize = 'unicode61 remove_diacritics 2')")
    con.execute("create virtual table v using fts5vocab(t, 'instance')")
    return con


def _token_offsets(con, text):
    con.execute("delete from t")
    con.execute("insert into t(rowid, body) values (1, ?)", [text])
    return [r[0] for r in con.execute("select offset from v order by offset")]


ALPHABET = "aıiİIşŞğĞçÇöÖüÜâîûßœæøłđðþéèñ .,:;-'\"/\t\n0123456789"


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=60))
def test_fold_never_changes_token_count_or_positions(vocab, text):
    """The external-content FTS index relies on this for correct snippets."""
    assert _token_offsets(vocab, fold(text)) == _token_offsets(vocab, text)


@given(st.text(max_size=50))
def test_fold_is_idempotent(text):
    assert fold(fold(text)) == fold(text)


def test_every_folded_code_point_keeps_fts5_token_positions(vocab):
    """Exhaustive over the code points fold changes (about 16k): none may move a token boundary."""
    texts = []
    for cp in range(0x80, 0x30000):
        if 0xD800 <= cp <= 0xDFFF or fold(chr(cp)) == chr(cp):
            continue
        texts.append((cp, f"ab {chr(cp)}x y{chr(cp)} q"))
    con = sqlite3.connect(":memory:")
    con.execute("create virtual table t using fts5(body, tokenize = 'unicode61 remove_diacritics 2')")
    con.execute("create virtual table v using fts5vocab(t, 'instance')")
    con.executemany("insert into t(rowid, body) values (?, ?)",
                    [(2 * i + k, fold(text) if k else text) for i, (_, text) in enumerate(texts) for k in (0, 1)])
    offsets: dict[int, list[int]] = {}
    for doc, off in con.execute("select doc, offset from v order by doc, offset"):
        offsets.setdefault(doc, []).append(off)
    moved = [hex(cp) for i, (cp, _) in enumerate(texts) if offsets.get(2 * i) != offsets.get(2 * i + 1)]
    assert len(texts) > 10000 and moved == []
