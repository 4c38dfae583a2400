"""impl/server/json_size.py: a body's JSON values bounded from its bytes, strings left out."""

from __future__ import annotations

import json

from hypothesis import given, strategies as st

from knowspec.impl.server.json_size import structural_count, surely_more_values_than

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{},"\\ab\n'),
                    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=4), inner, max_size=6),
                    max_leaves=60)


def values(v) -> int:
    if isinstance(v, list):
        return 1 + sum(map(values, v))
    if isinstance(v, dict):
        return 1 + sum(map(values, v.values()))
    return 1


@given(JSON, st.booleans())
def test_the_count_is_never_over_twice_the_values(v, ascii_only):
    assert structural_count(json.dumps(v, ensure_ascii=ascii_only).encode()) <= 2 * values(v)


@given(JSON, st.integers(0, 50))
def test_surely_more_is_only_said_of_more(v, limit):
    if surely_more_values_than(json.dumps(v).encode(), limit):
        assert values(v) > limit


def test_brackets_and_commas_inside_strings_do_not_count():
    assert structural_count(json.dumps({"a": "[,{]" * 1000, "b": 'x\\"[,' * 10}).encode()) == 2


def test_empty_lists_count_past_the_bound():
    body = b"[" + b"[]," * 1000 + b"[]]"
    assert surely_more_values_than(body, 900) and not surely_more_values_than(body, 1001)
