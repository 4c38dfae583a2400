"""A kept answer holds its text as the JSON string ``json.dumps`` writes (``sliced_json``)."""

from __future__ import annotations

import pytest

from knowspec.impl.kept_answers import KeptAnswer


def test_a_text_with_a_lone_surrogate_is_refused():
    with pytest.raises(UnicodeEncodeError):
        KeptAnswer.of("a\ud800", b"{}")


def test_an_answer_gives_back_its_text_and_values():
    answer = KeptAnswer.of("é \U0001F680 \"q\"\n", b'{"a":[1]}')
    assert answer.text == "é \U0001F680 \"q\"\n" and answer.structured == {"a": [1]}
