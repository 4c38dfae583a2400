"""generated/constants.py: the input enumerations by name, taken from the schemas, never restated."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import get_args

import pytest

from knowspec.codegen.constants import EnumConflict, input_enums
from knowspec.generated import constants

SPEC = Path(__file__).resolve().parents[2] / "spec"


def _tool(name: str, properties: dict, defs: dict) -> SimpleNamespace:
    return SimpleNamespace(name=name, input_schema={"properties": properties, "$defs": defs})


def _spec(*tools: SimpleNamespace) -> SimpleNamespace:
    return SimpleNamespace(tools=list(tools))


def test_members_are_named_by_their_first_word_when_it_is_unique():
    defs = {"Profile": {"enum": ["date-1", "instant-2"]}}
    (enum,) = input_enums(_spec(_tool("t", {"p": {"$ref": "#/$defs/Profile", "default": "date-1"}}, defs)))
    assert enum.members == (("DATE", "date-1"), ("INSTANT", "instant-2"))
    assert enum.prefix == "PROFILE" and enum.default == "date-1"


def test_members_fall_back_to_the_whole_value_when_first_words_collide():
    defs = {"Version": {"enum": ["v-1", "v-2"]}}
    (enum,) = input_enums(_spec(_tool("t", {"v": {"$ref": "#/$defs/Version"}}, defs)))
    assert enum.members == (("V_1", "v-1"), ("V_2", "v-2"))


def test_a_default_is_given_only_when_every_tool_agrees():
    defs = {"Mode": {"enum": ["a", "b"]}}
    one = _tool("one", {"m": {"$ref": "#/$defs/Mode", "default": "a"}}, defs)
    two = _tool("two", {"m": {"$ref": "#/$defs/Mode", "default": "b"}}, defs)
    assert input_enums(_spec(one))[0].default == "a"
    assert input_enums(_spec(one, two))[0].default is None


def test_array_items_and_titled_inline_enumerations_are_collected():
    props = {"kinds": {"type": "array", "items": {"$ref": "#/$defs/Kind"}},
             "mode": {"title": "Mode", "enum": ["x", "y"], "default": "x"}}
    enums = {e.name: e for e in input_enums(_spec(_tool("t", props, {"Kind": {"enum": ["k"]}})))}
    assert enums["Kind"].values == ("k",) and enums["Mode"].default == "x"


def test_one_name_with_two_value_sets_is_refused():
    a = _tool("a", {"m": {"$ref": "#/$defs/Mode"}}, {"Mode": {"enum": ["x"]}})
    b = _tool("b", {"m": {"$ref": "#/$defs/Mode"}}, {"Mode": {"enum": ["y"]}})
    with pytest.raises(EnumConflict, match="Mode"):
        input_enums(_spec(a, b))


def test_generated_temporal_profiles_are_the_common_schema_enumeration():
    common = json.loads((SPEC / "okf" / "schemas" / "common.schema.json").read_text("utf-8"))
    values = tuple(common["$defs"]["TemporalProfile"]["enum"])
    assert constants.TEMPORAL_PROFILE_VALUES == values == get_args(constants.TemporalProfile)
    assert (constants.TEMPORAL_PROFILE_DATE, constants.TEMPORAL_PROFILE_INSTANT) == values
