"""The raw-argument walk: what no tool may receive, before schema validation."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from knowspec.impl.errors import ToolError
from knowspec.impl.server.arguments import MAX_DEPTH, MAX_VALUES, walk_arguments


def nested(depth: int):
    value: object = "leaf"
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def code_of(arguments) -> str | None:
    try:
        walk_arguments(arguments)
    except ToolError as err:
        return err.code
    return None


def test_depth_at_the_limit_passes_and_one_more_is_resource_limit():
    assert code_of(nested(MAX_DEPTH)) is None
    assert code_of(nested(MAX_DEPTH + 1)) == "resource_limit"


def test_value_count_limit():
    assert code_of({"a": list(range(MAX_VALUES - 2))}) is None
    assert code_of({"a": list(range(MAX_VALUES))}) == "resource_limit"


def test_lone_surrogate_is_invalid_utf8():
    with pytest.raises(ToolError) as info:
        walk_arguments({"q": "bad \ud800"})
    assert info.value.code == "invalid_request"
    assert info.value.message == "MCP arguments contain invalid UTF-8"


def test_invalid_key_is_reported_as_a_key():
    with pytest.raises(ToolError) as info:
        walk_arguments({"\udfff": 1})
    assert info.value.message == "MCP argument key contains invalid UTF-8"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), object()])
def test_values_json_cannot_carry_are_refused(bad):
    assert code_of({"x": bad}) == "invalid_request"


def test_cycles_are_refused():
    loop: dict = {}
    loop["self"] = loop
    assert code_of(loop) == "invalid_request"


def test_a_container_shared_by_two_branches_is_not_a_cycle():
    shared = {"x": [1, 2]}
    assert code_of({"a": shared, "b": shared}) is None


def test_size_estimate_caps_huge_strings():
    assert code_of({"q": "x" * (65 * 1024 * 1024)}) == "resource_limit"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=30,
)


@given(json_values)
def test_ordinary_json_always_passes(value):
    walk_arguments({"v": value})
