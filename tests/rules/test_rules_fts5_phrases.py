"""Phrases found in a batch of texts at once (``rules.fts5.phrase_offsets_in_texts``, the
row-by-row full-text path's search) are exactly the instances of the one rule,
``phrase_offsets(p, token_texts(fold(text)))`` text by text: overlapping instances, prefixes,
texts with NULs, runs of separators and folding letters included."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from knowspec.impl.rules.fold import fold
from knowspec.impl.rules.fts5 import Phrase, phrase_offsets, phrase_offsets_in_texts
from knowspec.impl.rules.fts5_tokenizer import token_texts

# A small vocabulary so that phrases occur, repeat and overlap; folding letters, NUL and other
# separators between them.
WORDS = ["a", "ab", "abc", "b", "İs", "is", "ağaç", "agac", "x1", "2"]
SEPARATORS = [" ", "  ", "\0", "-", ".", "\t\n", "\u3000", "’"]
texts = st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(SEPARATORS)), max_size=30).map(
    lambda pairs: "".join(w + s for w, s in pairs))
phrases = st.builds(lambda words, prefix: Phrase(tuple(token_texts(fold(" ".join(words)))), prefix),
                    st.lists(st.sampled_from(WORDS), min_size=0, max_size=3), st.booleans())


def _one_text_at_a_time(p: Phrase, batch: list[str]) -> list[tuple[int, int]]:
    return [(i, off) for i, text in enumerate(batch) for off in phrase_offsets(p, token_texts(fold(text)))]


@settings(max_examples=400, deadline=None)
@given(batch=st.lists(texts, max_size=8), wanted=st.lists(phrases, min_size=1, max_size=4))
def test_a_batch_finds_every_instance_the_rule_finds_text_by_text(batch, wanted):
    assert phrase_offsets_in_texts(wanted, batch) == [_one_text_at_a_time(p, batch) for p in wanted]


@settings(max_examples=200, deadline=None)
@given(batch=st.lists(st.text(max_size=30), max_size=6), wanted=st.lists(phrases, min_size=1, max_size=2))
def test_any_unicode_text_gives_the_rules_instances(batch, wanted):
    assert phrase_offsets_in_texts(wanted, batch) == [_one_text_at_a_time(p, batch) for p in wanted]


def test_overlapping_instances_and_a_phrase_across_two_texts():
    a_a = Phrase(("a", "a"), False)
    assert phrase_offsets_in_texts([a_a], ["a a a", "a", "a"]) == [[(0, 0), (0, 1)]]  # never across texts
    assert phrase_offsets_in_texts([Phrase(("a", "b"), True)], ["x a bc", "a-b"]) == [[(0, 1), (1, 0)]]
