"""Rules the input checks apply: declared handler re-checks, distinctive echoes, drawn kinds."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from knowspec.conformance.checks.common import NO_STRUCTURE, unsuccessful
from knowspec.conformance.checks.differential import _neighbor_cases
from knowspec.conformance.checks.inputs import _distinctive, invalid_arguments, violates_recheck
from knowspec.conformance.generate import acceptable_error_codes
from knowspec.conformance.target import CallOutcome

RECHECKS = ({"argument": "query", "rule": "non_blank"}, {"argument": "query", "rule": "letter_or_number"})


def test_declared_rechecks_excuse_only_the_inputs_they_name():
    assert violates_recheck(RECHECKS, {"query": "   "})
    assert violates_recheck(RECHECKS, {"query": ":"})
    assert not violates_recheck(RECHECKS, {"query": "çay"})
    assert not violates_recheck(RECHECKS, {"query": "٣"})  # an Arabic-Indic digit is a number
    assert not violates_recheck((), {"query": ":"})  # undeclared: a refusal is a failure


def test_plain_words_a_server_may_use_are_not_echo_evidence():
    assert not _distinctive("advertised")
    assert not _distinctive("short")
    assert _distinctive("/srv/secret/kb")
    assert _distinctive("x" * 30)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(_neighbor_cases(1, 100))
def test_generated_neighbour_calls_always_name_at_least_one_kind(case):
    _, calls = case
    assert all(kinds for _, _, kinds, _ in calls)


_CONTRACT = None


def _tool(name: str):
    from knowspec.conformance.contract import load_contract

    global _CONTRACT
    _CONTRACT = _CONTRACT or load_contract()
    return next(t for t in _CONTRACT.tools if t.name == name)


@pytest.mark.parametrize("name", ["list_concepts", "read_concept", "write_concept", "search_concepts"])
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_invalid_input_cases_stay_invalid_once_pointed_at_a_real_bundle(name, data):
    """Swapping in a real bundle path had made a quarter of the cases valid when the path was the
    invalid part, and their failures were reported as invalid-input ones."""
    tool = _tool(name)
    args = data.draw(invalid_arguments(tool, "/srv/conform/bundle"))
    assert acceptable_error_codes(tool.input_schema, args)


def test_a_call_that_gave_nothing_to_judge_says_whether_it_failed_or_lacked_structure():
    refused = CallOutcome({}, is_error=True, structured={"code": "concept_not_found", "message": "no such concept"},
                          raw={})
    assert unsuccessful(refused) == "it failed (concept_not_found: no such concept)"
    assert unsuccessful(CallOutcome({}, texts=('{"concepts": []}',), raw={})) == NO_STRUCTURE
    assert unsuccessful(CallOutcome({}, structured={"concepts": []}, raw={})) is None
