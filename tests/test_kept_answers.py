"""A kept answer's text is the JSON string ``json.dumps`` writes, encoded a slice at a time."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from knowspec.impl import kept_answers
from knowspec.impl.kept_answers import KeptAnswer, json_string_utf8


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",))))
def test_the_text_is_json_dumps_encoded_whatever_its_slices(text):
    saved = kept_answers.TEXT_SLICE
    kept_answers.TEXT_SLICE = 3  # slices cut between escapes and between characters past the BMP
    try:
        assert json_string_utf8(text) == json.dumps(text, ensure_ascii=False).encode("utf-8")
    finally:
        kept_answers.TEXT_SLICE = saved


def test_a_text_with_a_lone_surrogate_is_refused():
    with pytest.raises(UnicodeEncodeError):
        KeptAnswer.of("a\ud800", b"{}")


def test_an_answer_gives_back_its_text_and_values():
    answer = KeptAnswer.of("é \U0001F680 \"q\"\n", b'{"a":[1]}')
    assert answer.text == "é \U0001F680 \"q\"\n" and answer.structured == {"a": [1]}
