"""The token postings behind search_concepts: candidates never miss a row, exact answers are exact,
and a rebuild from a previous index equals a build from scratch."""

from __future__ import annotations

from array import array

import pytest
from hypothesis import given, settings, strategies as st

from knowspec.impl.okf.search import boundary_signatures as bs
from knowspec.impl.okf.search import concepts as sc
from knowspec.impl.okf.search import concepts_index as sci
from knowspec.impl.okf.search import id_typecode as ids
from knowspec.impl.okf.search import row_bitmaps as rb
from knowspec.impl.okf.search import token_postings as tp
from knowspec.impl.okf.search import vocabulary_index as vi
from knowspec.impl.rules.text import case_fold

# separators (space, '-', '.', NUL, newline), token bytes (letters, digits, '_', multi-byte UTF-8)
TEXT = st.text(alphabet="ab1_-. \x00\né€", max_size=24)
NEEDLE = st.text(alphabet="ab1_-. \x00\né€", min_size=1, max_size=5)


def _build(texts: list[bytes]) -> tp.TokenPostings:
    return tp.TokenPostings.build(len(texts), list(range(len(texts))), [tp.tokens(t) for t in texts])


def _holding(texts: list[bytes], needle: bytes) -> list[int]:
    return [row for row, text in enumerate(texts) if needle in text]


def _as_map(postings: tp.TokenPostings) -> dict[bytes, list[int]]:
    """Token -> its rows: the postings' content whatever their token numbering."""
    return {token: postings.rows_of(i) for i, token in enumerate(postings.tokens())}


@settings(max_examples=200, deadline=None)
@given(st.lists(TEXT, max_size=8), NEEDLE)
def test_candidates_hold_every_row_containing_the_query_and_exact_ones_only_those(texts, needle):
    encoded = [t.encode() for t in texts]
    query = needle.encode()
    found = _build(encoded).candidates(query)
    truth = _holding(encoded, query)
    if found.rows is not None:
        assert set(truth) <= set(rb.rows(found.rows))
    if found.exact:
        assert found.rows is not None and list(rb.rows(found.rows)) == truth


@settings(max_examples=100, deadline=None)
@given(st.lists(TEXT, max_size=8), st.text(alphabet="ab1_é€", min_size=1, max_size=3))
def test_a_one_token_query_is_answered_exactly_from_the_postings(texts, needle):
    encoded = [t.encode() for t in texts]
    rows = _build(encoded).exact_rows(needle.encode())
    assert rows is not None and list(rb.rows(rows)) == _holding(encoded, needle.encode())


def test_a_query_with_separators_needs_its_pieces_where_they_stand():
    texts = [b"merge partition", b"emerge partitions", b"merger partition", b"merge apartition"]
    found = _build(texts).candidates(b"merge partition")
    assert not found.exact
    assert list(rb.rows(found.rows)) == [0, 1]  # "merge" ends a token, "partition" starts the next


def test_a_piece_too_common_in_the_vocabulary_narrows_nothing(monkeypatch):
    monkeypatch.setattr(tp, "MAX_VOCABULARY_MATCHES", 2)
    monkeypatch.setattr(tp, "ROWS_PER_EXACT_MATCH", 1 << 30)
    postings = _build([b"ab", b"abc", b"xab", b"zz"])
    assert postings.exact_rows(b"ab") is None
    assert postings.candidates(b"ab") == tp.Candidates(None, False)
    assert list(rb.rows(postings.exact_rows(b"zz"))) == [3]


def test_a_one_piece_query_in_few_tokens_for_its_rows_is_answered_from_the_postings(monkeypatch):
    monkeypatch.setattr(tp, "MAX_VOCABULARY_MATCHES", 2)
    monkeypatch.setattr(tp, "ROWS_PER_EXACT_MATCH", 2)
    texts = [b"ab1 ab2", b"ab3", b"zz", b"ab1", b"q", b"x", b"y"]
    postings = _build(texts)
    assert list(rb.rows(postings.exact_rows(b"ab"))) == [0, 1, 3]  # three tokens, seven rows
    assert postings.candidates(b".ab") == tp.Candidates(None, False)  # a piece of a longer query: too common
    monkeypatch.setattr(tp, "ROWS_PER_EXACT_MATCH", 4)
    assert postings.exact_rows(b"ab") is None


def _same_postings(built: tp.TokenPostings, python: tp.TokenPostings) -> None:
    for name in ("vocabulary", "starts", "offsets", "rows", "dense_ids", "dense_counts", "dense_bits"):
        assert getattr(built, name) == getattr(python, name), name
        assert getattr(getattr(built, name), "typecode", "") == getattr(getattr(python, name), "typecode", ""), name
    for name in ("trigrams", "offsets", "token_ids"):
        assert getattr(built.words, name) == getattr(python.words, name), name
        assert getattr(built.words, name).typecode == getattr(python.words, name).typecode, name


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), TEXT), max_size=14), st.integers(1, 12), st.integers(1, 5))
def test_the_numpy_build_of_short_values_gives_the_postings_of_the_python_build(values, dense_at, batch):
    """Large indexes have their postings built by numpy in the helper process, small ones in
    Python: every buffer the same (token ids, dense bitmaps, vocabulary trigrams), whatever the
    batches the values are tokenised in."""
    from knowspec.impl.okf.search import postings_build

    values.sort(key=lambda pair: pair[0])
    rows, texts = [row for row, _ in values], [text.encode() for _, text in values]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tp, "DENSE_MIN_ROWS", dense_at)
        patch.setattr(postings_build, "_VALUES_PER_BATCH", batch)
        builder = tp.PostingsBuilder(10)
        builder.add_values(rows, texts)
        python = builder.finish()
        built = tp.TokenPostings.empty(10).fill_buffers(postings_build.build_values(10, rows, texts))
    _same_postings(built, python)


@settings(max_examples=150, deadline=None)
@given(st.lists(TEXT, max_size=10), st.integers(1, 12))
def test_the_numpy_build_of_bodies_gives_the_postings_of_the_python_build(texts, dense_at):
    from knowspec.impl.okf.search import postings_build

    bodies = [text.encode() for text in texts]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tp, "DENSE_MIN_ROWS", dense_at)
        builder = tp.PostingsBuilder(len(bodies))
        for row, body in enumerate(bodies):
            builder.add(row, tp.tokens(body))
        python = builder.finish()
        built = tp.TokenPostings.empty(len(bodies)).fill_buffers(postings_build.build_bodies(len(bodies), enumerate(bodies)))
    _same_postings(built, python)


WORDS = st.text(alphabet="ab1_-. é", max_size=16)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.text(alphabet="ab_-", min_size=1, max_size=4), WORDS, WORDS,
                          st.lists(WORDS, max_size=2), WORDS), max_size=10, unique_by=lambda r: r[0]),
       st.text(alphabet="ab1_-. é", min_size=1, max_size=4), st.integers(1, 12))
def test_index_answers_like_the_reference_scan_for_queries_with_punctuation(rows, query, limit):
    """Pieces at the query's edges, runs of separators, '_' and digits inside tokens: the postings
    path (exact or verified) gives the reference scan's page, total and truncation."""
    entries = [(cid, sc.SearchableConcept.of(cid, title, description, tags, body))
               for cid, title, description, tags, body in rows]
    folded = case_fold(query)
    assert sci.ConceptSearchIndex(entries).search(folded, limit) == sc.search(entries, folded, limit)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.text(alphabet="ab_-", min_size=1, max_size=4), WORDS, WORDS,
                          st.lists(WORDS, max_size=2), WORDS), max_size=10, unique_by=lambda r: r[0]),
       st.text(alphabet="ab1_-. é", min_size=1, max_size=4))
def test_an_index_of_32_bit_ids_answers_like_one_of_16_bit_ids(rows, query):
    """Row and token ids are 16-bit below 65,535 of them (``id_typecode``), 32-bit above: the same
    answers either way."""
    entries = [(cid, sc.SearchableConcept.of(cid, title, description, tags, body))
               for cid, title, description, tags, body in rows]
    folded = case_fold(query)
    narrow = sci.ConceptSearchIndex(entries)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ids, "SMALL_IDS", 0)
        wide = sci.ConceptSearchIndex(entries)
    assert narrow.postings[-1].rows.itemsize == 2 and wide.postings[-1].rows.itemsize == 4
    narrow_words, wide_words = narrow.postings[-1].words.token_ids, wide.postings[-1].words.token_ids
    assert wide_words.itemsize == 4 and narrow_words.itemsize == 2
    assert wide.search(folded, 12) == narrow.search(folded, 12) == sc.search(entries, folded, 12)


def test_id_typecode_holds_the_last_id_plus_one():
    assert ids.id_typecode(0) == ids.id_typecode(ids.SMALL_IDS - 1) == "H"
    array("H", [ids.SMALL_IDS])  # the last id + 1 (an offset's end) still fits
    assert array(ids.id_typecode(ids.SMALL_IDS)).itemsize == array(ids.id_typecode(10**6)).itemsize == 4


def test_index_searches_every_body_when_a_piece_is_too_common_to_narrow(monkeypatch):
    monkeypatch.setattr(tp, "MAX_VOCABULARY_MATCHES", 1)
    monkeypatch.setattr(tp, "ROWS_PER_EXACT_MATCH", 1 << 30)
    entries = [(cid, sc.SearchableConcept.of(cid, "", "", [], body))
               for cid, body in [("a", "data lake"), ("b", "database_x"), ("c", "metadata-lake"), ("d", "lake")]]
    index = sci.ConceptSearchIndex(entries)
    for query in ["data", "ata", "data lake", "a l", "lake", "-"]:
        folded = case_fold(query)
        assert index.search(folded, 10) == sc.search(entries, folded, 10), query


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.text(alphabet="ab_-", min_size=1, max_size=4), WORDS, WORDS,
                          st.lists(WORDS, max_size=2), WORDS), max_size=10, unique_by=lambda r: r[0]),
       st.text(alphabet="ab1_-. é", min_size=1, max_size=4))
def test_short_field_candidates_checked_one_by_one_answer_like_the_reference(rows, query):
    """With every candidate row of a short field checked one by one (instead of the blob scan),
    the answer is still the reference scan's."""
    entries = [(cid, sc.SearchableConcept.of(cid, title, description, tags, body))
               for cid, title, description, tags, body in rows]
    folded = case_fold(query)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sci, "FEW_CANDIDATES", 1)
        assert sci.ConceptSearchIndex(entries).search(folded, 12) == sc.search(entries, folded, 12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="ab1_é", min_size=1, max_size=6), max_size=12, unique=True),
       st.booleans(), st.text(alphabet="ab1_é", min_size=1, max_size=4), st.booleans())
def test_vocabulary_trigrams_find_exactly_the_tokens_holding_a_pattern(words, starts_token, piece, ends_token):
    postings = _build([" ".join(words).encode()])
    vocabulary = postings.tokens()
    pattern = (b"\x00" if starts_token else b"") + piece.encode() + (b"\x00" if ends_token else b"")
    found = postings.words.tokens_containing(pattern, limit=100)
    expected = [i for i, token in enumerate(vocabulary) if pattern in b"\x00" + token + b"\x00"]
    assert found == expected


def test_a_pattern_of_several_trigrams_needs_them_side_by_side_and_one_of_three_bytes_is_its_trigram():
    postings = _build([b"ab_aba aba9 xab"])
    tokens = postings.tokens()
    assert [tokens[i] for i in postings.words.tokens_containing(b"\x00aba", limit=10)] == [b"aba9"]  # not ab_aba
    assert sorted(tokens[i] for i in postings.words.tokens_containing(b"\x00ab", limit=10)) == [b"ab_aba", b"aba9"]


def test_vocabulary_trigrams_give_up_on_a_pattern_in_too_many_tokens():
    postings = _build([b"abc1 abc2 abc3 xyz"])
    assert postings.words.tokens_containing(b"abc", limit=2) is None
    found = postings.words.tokens_containing(b"abc", limit=3)
    assert sorted(postings.tokens()[i] for i in found) == [b"abc1", b"abc2", b"abc3"]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), TEXT), max_size=10))
def test_values_added_at_once_give_the_postings_of_values_added_one_by_one(values):
    one_by_one = tp.PostingsBuilder(6)
    for row, text in values:
        one_by_one.add(row, tp.tokens(text.encode()))
    at_once = tp.PostingsBuilder(6)
    at_once.add_values([row for row, _ in values], [text.encode() for _, text in values])
    assert _as_map(at_once.finish()) == _as_map(one_by_one.finish())


def test_a_short_pattern_past_the_recount_gives_up_when_more_occurrences_are_left_than_allowed(monkeypatch):
    words = vi.VocabularyIndex.empty().fill(b"\x00a1\x00a2\x00aaa\x00b\x00", array("I", [1, 4, 7, 11]))
    assert words.tokens_containing(b"a", 3) == [0, 1, 2]
    monkeypatch.setattr(vi, "RECOUNT_AFTER", 2)  # then three occurrences left, one token allowed
    assert words.tokens_containing(b"a", 3) is None
    assert words.tokens_containing(b"b", 1) == [3]
