"""Go's encoding/json bytes: escaping and number format (spec/README.md#text-encoders)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from knowspec.impl.rules import go_json

# Values and the text Go 1.22 json.Marshal gives for them.
GO_FLOATS = [
    (0.0, "0"), (-0.0, "-0"), (1.0, "1"), (2.5, "2.5"), (0.5753, "0.5753"), (1e-6, "0.000001"),
    (1.5e-5, "0.000015"), (9.99e-7, "9.99e-7"), (1.234e-7, "1.234e-7"), (1e-100, "1e-100"),
    (1e20, "100000000000000000000"), (1e21, "1e+21"), (1.5e300, "1.5e+300"), (-3e-7, "-3e-7"),
    (123456789.125, "123456789.125"),
]


@pytest.mark.parametrize(("value", "text"), GO_FLOATS)
def test_floats_are_written_as_go_writes_them(value, text):
    assert go_json.go_float(value) == text


def test_html_characters_and_line_separators_are_escaped_inside_strings():
    text = go_json.dumps({"title": "Cost Allocation & Margin <b>\u2028\u2029", "n": [1, 2.0]})
    assert text == '{"title":"Cost Allocation \\u0026 Margin \\u003cb\\u003e\\u2028\\u2029","n":[1,2]}'


def test_non_ascii_stays_raw_and_lone_surrogates_become_replacement_characters():
    assert go_json.dumps(["ığüşöç", "\ud800x"]) == '["ığüşöç","\ufffdx"]'


def test_indented_form_matches_marshal_indent():
    assert go_json.dumps({"a": [1, {"b": "<"}]}, indent=2) == '{\n  "a": [\n    1,\n    {\n      "b": "\\u003c"\n    }\n  ]\n}'


def test_nan_has_no_encoding():
    with pytest.raises(ValueError):
        go_json.go_float(math.nan)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


def _same(decoded, value) -> bool:
    """Equal as JSON: a float comes back as an int when Go wrote it without a fraction."""
    if isinstance(value, float):
        return isinstance(decoded, (int, float)) and float(decoded) == value
    if isinstance(value, list):
        return isinstance(decoded, list) and len(decoded) == len(value) and all(map(_same, decoded, value))
    if isinstance(value, dict):
        return isinstance(decoded, dict) and decoded.keys() == value.keys() and all(
            _same(decoded[k], v) for k, v in value.items())
    return decoded == value and type(decoded) is type(value)


@given(json_values.filter(lambda v: not any("\ud800" <= ch <= "\udfff" for ch in json.dumps(v, ensure_ascii=False))))
def test_the_text_is_json_for_the_same_value_and_never_holds_raw_html_characters(value):
    text = go_json.dumps(value)
    assert _same(json.loads(text), value)
    assert not {"<", ">", "&", "\u2028", "\u2029"} & set(text)


def _holds_float(value) -> bool:
    if type(value) is float:
        return True
    if isinstance(value, dict):
        return any(map(_holds_float, value.values()))
    return isinstance(value, list) and any(map(_holds_float, value))


@given(json_values)
def test_a_float_is_found_at_any_depth(value):
    """Floats take Go's number format only when found: a float missed at any depth would be
    written in Python's format (1e-07 where Go writes 1e-7)."""
    assert go_json._has_float(value) == _holds_float(value)
