"""Generated arguments are classified by the schema, and limit keywords map to resource_limit."""

from __future__ import annotations

import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knowspec.conformance.contract import parse_contract
from knowspec.conformance.generate import (
    acceptable_error_codes, arguments, boundary_cases, expected_error_code, failing_keywords, validator,
)

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent / "targets"))
from toy_schemas import contract  # noqa: E402

SEARCH = parse_contract(contract()).tool("search_concepts")


def test_limit_keyword_failures_are_resource_limit():
    schema = SEARCH.input_schema
    assert expected_error_code(schema, {"bundle_path": "/x", "query": "q", "limit": 11}) == "resource_limit"
    assert expected_error_code(schema, {"bundle_path": "/x", "query": "q" * 65}) == "resource_limit"
    assert expected_error_code(schema, {"bundle_path": "/x", "query": "q", "limit": 0}) == "schema_validation"
    assert expected_error_code(schema, {"bundle_path": "/x", "query": "q"}) is None


def test_a_value_failing_both_kinds_accepts_either_code():
    codes = acceptable_error_codes(SEARCH.input_schema, {"bundle_path": "/x", "query": "q", "limit": 11, "x": 1})
    assert codes == {"resource_limit", "schema_validation"}


def test_boundary_cases_cover_zero_one_max_and_max_plus_one():
    labels = {c.label for c in boundary_cases(SEARCH, {"bundle_path": "/b"})}
    assert {"limit=0", "limit=1", "limit=10", "limit=11", "len(query)=64", "len(query)=65"} <= labels


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(arguments(SEARCH, "positive"))
def test_positive_generation_yields_json_objects(args):
    assert isinstance(args, dict)
    validator(SEARCH.input_schema).is_valid(args)  # classification never raises


MAPPINGS = {"type": "object", "properties": {"m": {"type": "array", "maxItems": 6, "items": {"$ref": "#/$defs/M"}}},
            "$defs": {"M": {"type": "object", "required": ["to"], "additionalProperties": False,
                            "properties": {"to": {"type": "string", "format": "date", "maxLength": 10},
                                           "n": {"type": "integer", "maximum": 3}}}}}
_items = st.one_of(st.fixed_dictionaries({"to": st.sampled_from(["2024-01-01", "bad", "2024-01-01T00:00"])},
                                         optional={"n": st.integers(0, 5), "x": st.just(1)}),
                   st.integers(), st.sampled_from([True, 1, 1.0, "1"]))


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(_items, max_size=9).flatmap(lambda pool: st.lists(st.sampled_from(pool), max_size=12)
                                             if pool else st.just([])))
def test_failing_keywords_equal_the_plain_validators_with_repeated_items(items):
    value = {"m": items}
    plain = {str(leaf.validator) for e in validator(MAPPINGS).iter_errors(value) for leaf in _leaves(e)}
    assert failing_keywords(MAPPINGS, value) == plain


def _leaves(error):
    return [leaf for sub in error.context for leaf in _leaves(sub)] if error.context else [error]


def test_a_boundary_array_of_one_repeated_item_is_judged_once_per_distinct_item():
    tool = parse_contract(contract()).tool("search_concepts")
    schema = {"type": "array", "maxItems": 10, "items": {"$ref": "#/$defs/S"}, "$defs": {"S": tool.input_schema}}
    good = {"bundle_path": "/b", "query": "q"}
    calls = []
    import knowspec.conformance.generate as generate

    original = generate._KeywordValidator.descend

    def counting(self, instance, schema, path=None, schema_path=None, resolver=None):
        calls.append(path)
        return original(self, instance, schema, path, schema_path, resolver)

    generate._KeywordValidator.descend = counting
    try:
        assert failing_keywords(schema, [good] * 10_001) == {"maxItems"}
    finally:
        generate._KeywordValidator.descend = original
    assert calls.count(0) == 1 and 1 not in calls
