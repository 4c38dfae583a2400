"""The token postings behind search_concepts: candidates never miss a row, exact answers are exact,
and a rebuild from a previous index equals a build from scratch."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from knowspec.impl.okf.search import boundary_signatures as bs
from knowspec.impl.okf.search import concepts as sc
from knowspec.impl.okf.search import concepts_index as sci
from knowspec.impl.okf.search import id_dtype as ids
from knowspec.impl.okf.search import token_postings as tp
from knowspec.impl.okf.search.sorted_unique import sorted_unique
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
    return {token: postings.rows[postings.offsets[i]:postings.offsets[i + 1]].tolist()
            for i, token in enumerate(postings.tokens())}


@settings(max_examples=200, deadline=None)
@given(st.lists(TEXT, max_size=8), NEEDLE)
def test_candidates_hold_every_row_containing_the_query_and_exact_ones_only_those(texts, needle):
    encoded = [t.encode() for t in texts]
    query = needle.encode()
    found = _build(encoded).candidates(query)
    truth = _holding(encoded, query)
    if found.rows is not None:
        assert set(truth) <= set(found.rows.tolist())
        assert found.rows.tolist() == sorted(set(found.rows.tolist()))
    if found.exact:
        assert found.rows is not None and found.rows.tolist() == truth


@settings(max_examples=100, deadline=None)
@given(st.lists(TEXT, max_size=8), st.text(alphabet="ab1_é€", min_size=1, max_size=3))
def test_a_one_token_query_is_answered_exactly_from_the_postings(texts, needle):
    encoded = [t.encode() for t in texts]
    rows = _build(encoded).exact_rows(needle.encode())
    assert rows is not None and rows.tolist() == _holding(encoded, needle.encode())


def test_a_query_with_separators_needs_its_pieces_where_they_stand():
    texts = [b"merge partition", b"emerge partitions", b"merger partition", b"merge apartition"]
    found = _build(texts).candidates(b"merge partition")
    assert not found.exact
    assert found.rows.tolist() == [0, 1]  # "merge" ends a token, "partition" starts the next


def test_a_piece_too_common_in_the_vocabulary_narrows_nothing(monkeypatch):
    monkeypatch.setattr(tp, "MAX_VOCABULARY_MATCHES", 2)
    postings = _build([b"ab", b"abc", b"xab", b"zz"])
    assert postings.exact_rows(b"ab") is None
    assert postings.candidates(b"ab") == tp.Candidates(None, False)
    assert postings.exact_rows(b"zz").tolist() == [3]


@settings(max_examples=100, deadline=None)
@given(st.lists(TEXT, max_size=8), st.lists(st.one_of(st.none(), TEXT), max_size=8), st.randoms())
def test_rebuild_from_a_previous_index_equals_a_build_from_scratch(old_texts, new_texts, rng):
    """Rows kept from the previous postings (``None`` in ``new_texts``: the old text of some row,
    moved to this place) plus freshly tokenised ones give the same postings as a fresh build."""
    previous = _build([t.encode() for t in old_texts])
    old_rows = list(range(len(old_texts)))
    rng.shuffle(old_rows)
    texts, fresh_rows, fresh, moved_from, moved_to = [], [], [], [], []
    for row, text in enumerate(new_texts):
        if text is None and old_rows:
            j = old_rows.pop()
            texts.append(old_texts[j].encode())
            moved_from.append(j)
            moved_to.append(row)
        else:
            texts.append((text or "").encode())
            fresh_rows.append(row)
            fresh.append(tp.tokens(texts[-1]))
    rebuilt = tp.TokenPostings.build(len(texts), fresh_rows, fresh, previous, moved_from, moved_to)
    assert _as_map(rebuilt) == _as_map(_build(texts))
    assert rebuilt.rows.dtype == np.uint16  # fewer than 65,535 rows: two bytes a row id


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
    """Row and token ids are 16-bit below 65,535 of them (``id_dtype``), 32-bit above: the same
    answers either way."""
    entries = [(cid, sc.SearchableConcept.of(cid, title, description, tags, body))
               for cid, title, description, tags, body in rows]
    folded = case_fold(query)
    narrow = sci.ConceptSearchIndex(entries)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ids, "SMALL_IDS", 0)
        wide = sci.ConceptSearchIndex(entries)
    assert narrow.postings[-1].rows.dtype == np.uint16 and wide.postings[-1].rows.dtype == np.uint32
    narrow_words, wide_words = narrow.postings[-1].words.token_ids, wide.postings[-1].words.token_ids
    assert wide_words.dtype == np.uint32 and (narrow_words.dtype == np.uint16 or not len(narrow_words))
    assert wide.search(folded, 12) == narrow.search(folded, 12) == sc.search(entries, folded, 12)


def test_id_dtype_holds_the_last_id_plus_one():
    assert ids.id_dtype(0) == ids.id_dtype(ids.SMALL_IDS - 1) == np.uint16
    assert np.iinfo(np.uint16).max >= ids.SMALL_IDS  # the last id + 1 (an offset's end) still fits
    assert ids.id_dtype(ids.SMALL_IDS) == ids.id_dtype(10**6) == np.uint32


def test_index_searches_every_body_when_a_piece_is_too_common_to_narrow(monkeypatch):
    monkeypatch.setattr(tp, "MAX_VOCABULARY_MATCHES", 1)
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
@given(st.lists(st.text(alphabet="ab1_-. \n)é", max_size=40), max_size=8), NEEDLE)
def test_boundary_signatures_never_drop_a_body_holding_the_query(texts, needle):
    bodies = [t.encode() for t in texts]
    query = needle.encode()
    kept = bs.narrow(bs.sign(bodies), np.arange(len(bodies)), query).tolist()
    assert set(_holding(bodies, query)) <= set(kept)


def test_boundary_signatures_drop_bodies_without_the_join():
    bodies = [b"sql warehouse", b"sql and warehouse", b"warehouse sql"]
    assert bs.narrow(bs.sign(bodies), np.arange(3), b"sql warehouse").tolist() == [0]


def test_boundary_signatures_tell_a_join_apart_by_the_two_bytes_either_side():
    bodies = [b"create table", b"the table", b"one note tab"]  # the same trigram "e t" in each
    assert bs.narrow(bs.sign(bodies), np.arange(3), b"create table").tolist() == [0, 2]  # "te ta"


def test_boundary_signatures_are_signed_in_chunks_like_one_by_one(monkeypatch):
    bodies = [f"{'-' if i % 3 else ''}w{i} x-{i}. y{'.' if i % 2 else ''}".encode() for i in range(50)] + [b"", b"a b", b"."]
    whole = bs.sign(bodies)
    monkeypatch.setattr(bs, "_CHUNK_BODIES", 3)
    assert np.array_equal(bs.sign(bodies), whole)
    assert np.array_equal(np.vstack([bs.sign([b]) for b in bodies]), whole)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="ab1_é", min_size=1, max_size=6), max_size=12, unique=True),
       st.booleans(), st.text(alphabet="ab1_é", min_size=1, max_size=4), st.booleans())
def test_vocabulary_trigrams_find_exactly_the_tokens_holding_a_pattern(words, starts_token, piece, ends_token):
    postings = _build([" ".join(words).encode()])
    vocabulary = postings.tokens()
    pattern = (b"\x00" if starts_token else b"") + piece.encode() + (b"\x00" if ends_token else b"")
    found = postings.words.tokens_containing(pattern, limit=100)
    expected = [i for i, token in enumerate(vocabulary) if pattern in b"\x00" + token + b"\x00"]
    assert found is not None and found.tolist() == expected


def test_vocabulary_trigrams_give_up_on_a_pattern_in_too_many_tokens():
    postings = _build([b"abc1 abc2 abc3 xyz"])
    assert postings.words.tokens_containing(b"abc", limit=2) is None
    found = postings.words.tokens_containing(b"abc", limit=3).tolist()
    assert sorted(postings.tokens()[i] for i in found) == [b"abc1", b"abc2", b"abc3"]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), TEXT), max_size=10))
def test_values_added_at_once_give_the_postings_of_values_added_one_by_one(values):
    one_by_one = tp.PostingsBuilder()
    for row, text in values:
        one_by_one.add(row, tp.tokens(text.encode()))
    at_once = tp.PostingsBuilder()
    at_once.add_values([row for row, _ in values], [text.encode() for _, text in values])
    assert _as_map(at_once.finish(6)) == _as_map(one_by_one.finish(6))


@given(st.lists(st.integers(min_value=0, max_value=2**32 - 1), max_size=40))
def test_sorted_unique_is_np_unique(values):
    array = np.asarray(values, dtype=np.uint32)
    expected = np.unique(array)
    got = sorted_unique(array)
    assert got.dtype == expected.dtype and got.tolist() == expected.tolist()


@given(st.lists(st.tuples(st.integers(0, 5), TEXT), max_size=12), st.integers(1, 4))
def test_short_texts_tokenised_a_batch_at_a_time_give_the_postings_of_one_pass(values, batch):
    values.sort(key=lambda pair: pair[0])
    rows, texts = [row for row, _ in values], [text.encode() for _, text in values]

    def postings(per_batch: int) -> dict[bytes, list[int]]:
        saved = tp.VALUES_PER_BATCH
        tp.VALUES_PER_BATCH = per_batch
        try:
            builder = tp.PostingsBuilder()
            builder.add_values(rows, texts)
            return _as_map(builder.finish(6))
        finally:
            tp.VALUES_PER_BATCH = saved

    assert postings(batch) == postings(10_000)
