"""The index builders' fast tokenising paths give exactly the tokens of the one rule,
``rules.fts5.token_texts(rules.fold.fold(text))``: folding and splitting in one pass
(``folded_separated``) and a batch of texts joined and split at once (``reader.token_ids``)."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from knowspec.impl.docpool.fulltext.reader import TOKEN_BATCH, token_ids
from knowspec.impl.rules.fold import fold
from knowspec.impl.rules.fts5_tokenizer import folded_separated, token_texts

# Letters that fold (Turkish, Latin accents, ligatures), combining marks, separators of every
# kind (ASCII NUL, the batch joiner, included), and anything else Unicode has.
FOLDING = "İIıŞşĞğÇçÖöÜüÂâßœÆØłĐðÞﬁ\u0301\u0327 \t\n\0-.'’…—\u3000\xa0"
texts = st.text(alphabet=st.one_of(st.sampled_from(FOLDING), st.characters()), max_size=40)


@settings(max_examples=300, deadline=None)
@given(text=texts)
def test_folded_separated_splits_into_the_tokens_of_the_rule(text):
    assert list(filter(None, folded_separated(text).split(" "))) == token_texts(fold(text))


@settings(max_examples=100, deadline=None)
@given(batch=st.lists(texts, max_size=12))
def test_token_ids_number_every_text_token_in_order(batch):
    terms, ids, lengths = token_ids(batch)
    want = [token_texts(fold(t)) for t in batch]
    assert lengths.tolist() == [len(w) for w in want]
    assert [terms[i] for i in ids.tolist()] == [tok for w in want for tok in w]
    assert terms == list(dict.fromkeys(tok for w in want for tok in w))  # in order of first sight


def test_token_ids_are_four_bytes_a_token():
    # an import holds one id per token of the whole pool: int64 ids had doubled its peak memory
    _, ids, lengths = token_ids(["alpha beta", "", "gamma"])
    assert ids.dtype.itemsize == 4 and ids.tolist() == [0, 1, 2] and lengths.tolist() == [2, 0, 1]


def test_token_ids_across_batches_keep_one_vocabulary():
    batch = ["Ağaç ve şüphe", "", "e-mail x1.2"] * (TOKEN_BATCH // 2 + 1)
    terms, ids, lengths = token_ids(batch)
    assert len(lengths) == len(batch)
    assert terms == ["agac", "ve", "suphe", "e", "mail", "x1", "2"]
    assert [terms[i] for i in ids[:8].tolist()] == ["agac", "ve", "suphe", "e", "mail", "x1", "2", "agac"]
