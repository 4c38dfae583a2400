"""A kept answer holds its text as the JSON string ``json.dumps`` writes (``sliced_json``), a big one
in a nameless temporary file, and gives both back byte for byte."""

from __future__ import annotations

import gc
import json
import random

import lz4.block
import pytest
from hypothesis import given, settings, strategies as st

from knowspec.impl import kept_answers as kept
from knowspec.impl.kept_answers import KeptAnswer


def test_a_text_with_a_lone_surrogate_is_refused():
    with pytest.raises(UnicodeEncodeError):
        KeptAnswer.of("a\ud800", b"{}")


def test_an_answer_gives_back_its_text_and_values():
    answer = KeptAnswer.of("é \U0001F680 \"q\"\n", b'{"a":[1]}')
    assert answer.text == "é \U0001F680 \"q\"\n" and answer.structured == {"a": [1]}


def _big_json(seed: int) -> bytes:
    """JSON that LZ4 cannot shrink below ``SPILL_MIN_BYTES`` (random digits)."""
    digits = random.Random(seed).choices("0123456789", k=4 * kept.SPILL_MIN_BYTES)
    return json.dumps({"digits": "".join(digits)}).encode()


def test_a_big_answer_is_held_in_a_nameless_file_not_in_memory():
    text, structured = json.dumps("t" + _big_json(1).decode()).encode(), _big_json(2)
    answer = KeptAnswer(text, structured)
    assert answer.on_disk and isinstance(answer._pieces, int)  # no bytes object held
    assert answer.text_json() == text and answer.structured_json() == structured


@settings(max_examples=40, deadline=None)
@given(text=st.text(max_size=200), values=st.dictionaries(st.text(max_size=5), st.integers(), max_size=5),
       big=st.booleans())
def test_an_answer_comes_back_byte_for_byte_on_disk_or_in_memory(text, values, big):
    text_json = json.dumps(text + (_big_json(3).decode() if big else ""), ensure_ascii=False).encode()
    structured_json = json.dumps(values, separators=(",", ":")).encode()
    answer = KeptAnswer(text_json, structured_json)
    assert answer.on_disk == big
    assert answer.text_json() == text_json and answer.structured_json() == structured_json
    # the caches' budget counts what an answer keeps wherever it is
    assert answer.nbytes() == len(lz4.block.compress(text_json)) + len(lz4.block.compress(structured_json))


def test_a_small_answer_stays_in_memory():
    answer = KeptAnswer(b'"short"', b"{}")
    assert not answer.on_disk and answer.structured_json() == b"{}"


def test_a_big_answer_stays_in_memory_when_no_temporary_file_can_be_written(full_temporary_folder):
    structured = _big_json(4)
    answer = KeptAnswer(b'"t"', structured)
    assert not answer.on_disk and full_temporary_folder.closed and answer.nbytes() > kept.SPILL_MIN_BYTES // 2
    assert answer.structured_json() == structured


def test_the_file_is_closed_with_the_answer():
    answer = KeptAnswer(b'"t"', _big_json(5))
    file = answer._file
    assert file is not None and not file.closed
    del answer
    gc.collect()
    assert file.closed
