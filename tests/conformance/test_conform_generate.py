"""Generated arguments are classified by the schema, and limit keywords map to resource_limit."""

from __future__ import annotations

import sys

from hypothesis import HealthCheck, given, settings

from knowspec.conformance.contract import parse_contract
from knowspec.conformance.generate import (
    acceptable_error_codes, arguments, boundary_cases, expected_error_code, validator,
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
