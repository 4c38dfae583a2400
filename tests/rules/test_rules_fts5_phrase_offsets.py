"""Where a phrase occurs in one column's tokens (``rules.fts5.phrase_offsets``): the offsets of a
token-by-token comparison at every offset, the last token a prefix for a prefix phrase."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from knowspec.impl.rules.fts5 import Phrase, phrase_offsets

TOKENS = ["a", "ab", "abc", "b", "ba", "c"]  # few, so that phrases occur, repeat, overlap and prefix


def offsets_token_by_token(p: Phrase, column: list[str]) -> list[int]:
    """The reference: every offset, every token compared in turn."""
    if not p.tokens:
        return []
    last = len(p.tokens) - 1
    return [off for off in range(len(column) - len(p.tokens) + 1)
            if all(column[off + k].startswith(tok) if (p.prefix and k == last) else column[off + k] == tok
                   for k, tok in enumerate(p.tokens))]


@settings(max_examples=500, deadline=None)
@given(column=st.lists(st.sampled_from(TOKENS), max_size=40),
       tokens=st.lists(st.sampled_from(TOKENS), max_size=4), prefix=st.booleans())
def test_offsets_are_those_of_a_token_by_token_comparison(column, tokens, prefix):
    p = Phrase(tuple(tokens), prefix)
    assert phrase_offsets(p, column) == offsets_token_by_token(p, column)


def test_a_prefix_phrase_matches_its_last_token_as_a_prefix_only():
    column = ["ab", "ba", "abc", "ab", "c"]
    assert phrase_offsets(Phrase(("ab",), True), column) == [0, 2, 3]
    assert phrase_offsets(Phrase(("ab", "b"), True), column) == [0]
    assert phrase_offsets(Phrase(("ab", "b"), False), column) == []
    assert phrase_offsets(Phrase(("a", "b"), True), column) == []  # only the last token is a prefix
    assert phrase_offsets(Phrase(("ab", "c"), False), column) == [3]
    assert phrase_offsets(Phrase(("ab", "c", "d"), False), ["ab", "c"]) == []  # longer than the column
