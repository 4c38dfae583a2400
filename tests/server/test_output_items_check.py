"""An answer checked a piece at a time (``ItemsCheck``: its array's items one by one, then the
rest) gets the verdict the whole answer's check would give (issue #18 goal 6: get_semantic_graph
is never held as values)."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from knowspec.generated.registry import BY_NAME
from knowspec.impl.errors import ToolError
from knowspec.impl.server.validation import ItemsCheck, SchemaCheck, output_error

GRAPH = BY_NAME["get_semantic_graph"].success_schema


def _tight(schema: dict) -> dict:
    """The graph's schema with limits small enough to reach: three nodes, @id of 4 characters."""
    tight = copy.deepcopy(schema)
    array = tight["properties"]["@graph"]
    array["maxItems"] = 3
    array["items"]["properties"]["@id"]["maxLength"] = 4
    return tight


scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=6)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.sampled_from(["@id", "projectionVersion", "x"]), inner, max_size=3),
                      max_leaves=8)
documents = st.fixed_dictionaries(
    {"@graph": st.lists(values, max_size=5)},
    optional={"@context": values, "extra": values},
)


def _verdict_whole(schema: dict, document: dict) -> str | None:
    errors = SchemaCheck(schema).errors(document)
    return output_error(errors).code if errors else None


def _verdict_by_items(schema: dict, document: dict) -> str | None:
    check = ItemsCheck(SchemaCheck(schema), "@graph")
    for item in document["@graph"]:
        check.item(item)
    try:
        check.finish({key: value for key, value in document.items() if key != "@graph"}, len(document["@graph"]))
    except ToolError as err:
        return err.code
    return None


@pytest.mark.parametrize("schema", [GRAPH, _tight(GRAPH)], ids=["graph", "tight limits"])
@given(document=documents)
def test_items_one_by_one_get_the_whole_answers_verdict(schema, document):
    assert _verdict_by_items(schema, document) == _verdict_whole(schema, document)


@pytest.mark.parametrize("keyword", [{"minItems": 1}, {"uniqueItems": True}, {"contains": {"type": "object"}}])
def test_an_array_whose_schema_speaks_of_its_items_together_is_refused(keyword):
    schema = copy.deepcopy(GRAPH)
    schema["properties"]["@graph"].update(keyword)
    with pytest.raises(ValueError):
        ItemsCheck(SchemaCheck(schema), "@graph")


@pytest.mark.parametrize("keyword", [
    {"allOf": [{"properties": {"@graph": {"minItems": 1}}}]},
    {"if": {"required": ["x"]}, "then": {"properties": {"@graph": {"maxItems": 0}}}},
    {"patternProperties": {"^@": {"maxProperties": 0}}},
])
def test_an_object_whose_schema_reaches_the_array_elsewhere_is_refused(keyword):
    schema = copy.deepcopy(GRAPH)
    schema.update(keyword)
    with pytest.raises(ValueError):
        ItemsCheck(SchemaCheck(schema), "@graph")


def test_list_concepts_conditional_items_are_refused():
    """Its profile chooses its items' date format (``if``/``then``): not a schema to take item by item."""
    with pytest.raises(ValueError):
        ItemsCheck(SchemaCheck(BY_NAME["list_concepts"].success_schema), "concepts")
