"""Rules the input checks apply: declared handler re-checks, distinctive echoes, drawn kinds."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from knowspec.conformance.checks.differential import _neighbor_cases
from knowspec.conformance.checks.inputs import _distinctive, violates_recheck

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
