"""impl/server/json_size.py: a body's JSON values bounded from its bytes, strings left out."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, strategies as st

from knowspec.impl.server.arguments import MAX_VALUES
from knowspec.impl.server.json_size import _STRING, structural_count, surely_more_values_than

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


@pytest.mark.parametrize("text", [b'"abc', b'"a\\"b\\"c', b'"abc\\', b'"', b'"\\'])
def test_a_string_never_closed_runs_to_the_end_at_once(text):
    """Had the pattern to fail on it, re.sub would retry at every later quote, each retry
    scanning to the end: quadratic (a 232 KB login body held the interpreter for 3.9 s)."""
    assert _STRING.fullmatch(text)


def test_a_call_whose_arguments_hold_the_most_values_the_walk_allows_is_let_in():
    """The walk counts the arguments alone; the message around them has a few values more."""
    arguments = {"a": [[]] * (MAX_VALUES - 2)}  # the object, the list and its items: MAX_VALUES
    assert values(arguments) == MAX_VALUES
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x", "arguments": arguments}}
    assert not surely_more_values_than(json.dumps(message).encode(), MAX_VALUES)


def test_utf16_json_is_counted_as_its_text():
    """In UTF-16 the bytes of ordinary characters may read as brackets or quotes."""
    body = json.dumps({"user": "x", "password": "y", "z": "中" * 100_000}, ensure_ascii=False).encode("utf-16")
    assert structural_count(body) == 3 and not surely_more_values_than(body, 100)  # {, two commas
