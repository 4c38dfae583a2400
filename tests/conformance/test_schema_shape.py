"""A target's advertised schemas are compared by meaning (``conformance.schema_shape``); a
recursive or self-multiplying schema from a hostile or careless server stays finite and cheap
(a probe's recursive ``$ref`` took a conformance run to 7 GB before)."""

from __future__ import annotations

import time

from knowspec.conformance.schema_shape import MAX_SHAPE_NODES, shape


def _count(node) -> int:
    if isinstance(node, dict):
        return 1 + sum(_count(v) for v in node.values())
    if isinstance(node, list):
        return 1 + sum(_count(v) for v in node)
    return 1


def test_local_refs_are_inlined_and_layout_ignored():
    by_ref = {"type": "object", "$defs": {"n": {"type": "integer", "description": "x"}},
              "properties": {"a": {"$ref": "#/$defs/n"}}}
    inline = {"properties": {"a": {"type": "integer"}}, "type": "object"}
    assert shape(by_ref) == shape(inline)


def test_an_all_of_one_reference_with_a_default_means_the_reference_itself():
    """pydantic 1 spells ``{$ref, default}`` as ``{allOf: [{$ref}], default}``: the same schema."""
    defs = {"Mode": {"type": "string", "enum": ["fts", "vector"]}}
    v1 = {"type": "object", "$defs": defs, "properties": {"m": {"allOf": [{"$ref": "#/$defs/Mode"}], "default": "fts"}}}
    v2 = {"type": "object", "$defs": defs, "properties": {"m": {"$ref": "#/$defs/Mode", "default": "fts"}}}
    assert shape(v1) == shape(v2)
    both = {"allOf": [{"$ref": "#/$defs/Mode"}, {"minLength": 2}], "$defs": defs}
    assert shape(both) != shape({"$ref": "#/$defs/Mode", "$defs": defs})  # two schemas: a real intersection
    clash = {"type": "integer", "allOf": [{"type": "string"}]}
    assert shape(clash) == {"type": ["integer"], "allOf": [{"type": ["string"]}]}  # not merged over its parent


def test_a_recursive_reference_stays_a_reference():
    recursive = {"type": "object", "$defs": {"a": {"anyOf": [
        {"$ref": "#/$defs/a"}, {"$ref": "#/$defs/a"}, {"type": "object", "properties": {"n": {"$ref": "#/$defs/a"}}}]}},
        "properties": {"rec": {"$ref": "#/$defs/a"}}}
    started = time.monotonic()
    canon = shape(recursive)
    assert time.monotonic() - started < 5  # a generous bound: before, this never finished
    assert canon["properties"]["rec"]["anyOf"][0] == {"$ref": "#/$defs/a"}


def test_a_definition_doubling_at_every_level_is_cut_at_the_node_limit():
    defs = {f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]} for i in range(30)}
    defs["d30"] = {"type": "string"}
    canon = shape({"$defs": defs, "properties": {"x": {"$ref": "#/$defs/d0"}}})
    assert _count(canon) <= 4 * MAX_SHAPE_NODES
