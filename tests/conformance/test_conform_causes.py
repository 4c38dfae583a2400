"""Failures that share one fault are reported as one shared cause (conformance/causes.py)."""

from __future__ import annotations

import json

import pytest

from knowspec.conformance.causes import MIN_SHARED, cause_by_case, cause_of, shared_causes
from knowspec.conformance.events import CheckFinished, RunFinished
from knowspec.conformance.failures import NO_ENVELOPE, NO_STRUCTURE, NO_SUCCESS_STRUCTURE, Failure


def _failed(check: str, tool: str, message: str) -> CheckFinished:
    return CheckFinished(check, "rule", tool, "failed", 0.1, calls=1, failure=Failure(check, "rule", tool, message))


def test_both_wordings_of_a_success_without_structured_content_are_one_cause():
    assert cause_of(f"nothing to judge: {NO_STRUCTURE}").key == cause_of(
        f"valid input: {NO_SUCCESS_STRUCTURE}").key == "no_structured_content"


def test_calls_refused_on_valid_fixtures_group_by_the_code_the_target_answered():
    a = cause_of("read_concept on a valid fixture bundle: it failed (path_outside_root: not under a root)")
    b = cause_of("valid input: it failed (path_outside_root: the bundle is elsewhere)")
    c = cause_of("valid input: it failed (schema_validation: bad)")
    assert a == b and a.key == "refused:path_outside_root" and c.key == "refused:schema_validation"


def test_other_messages_group_when_they_differ_only_in_the_tool_name():
    tools = ("search_concepts", "search")
    assert cause_of("search_concepts answers not_implemented", tools) == cause_of("search answers not_implemented",
                                                                                   tools)
    assert cause_of("search_concepts: order broken", tools) != cause_of("search_concepts: total too low", tools)


def test_a_tool_name_inside_a_longer_word_or_path_is_kept():
    assert cause_of("see docs/search/x.md and research", ("search",)).summary == "see docs/search/x.md and research"


def test_a_cause_fewer_than_min_shared_failures_share_is_no_group():
    few = [_failed("output_schema", f"t{i}", NO_ENVELOPE) for i in range(MIN_SHARED - 1)]
    assert shared_causes(few) == []
    assert [len(g.cases) for g in shared_causes([*few, _failed("determinism", "t9", NO_ENVELOPE)])] == [MIN_SHARED]


def test_groups_come_largest_first_and_name_their_checks_tools_and_cases():
    results = [_failed("output_schema", t, f"valid input: {NO_SUCCESS_STRUCTURE}") for t in ("a", "b", "c")]
    results += [_failed(c, "a", NO_ENVELOPE) for c in ("output_schema", "determinism", "truncation", "boundary")]
    results.append(CheckFinished("result_ordering", "rule", "a", "passed", 0.1))
    groups = shared_causes(results)
    assert [g.cause.key for g in groups] == ["no_error_envelope", "no_structured_content"]
    assert groups[0].checks == ("output_schema", "determinism", "truncation", "boundary") and groups[0].tools == ("a",)
    assert groups[1].cases == ("output_schema[a]", "output_schema[b]", "output_schema[c]")
    assert set(cause_by_case(groups)) == {r.case_id for r in results if r.status == "failed"}


@pytest.fixture(scope="module")
def text_only_run(toy_contract, target_for):
    from knowspec.conformance.config import RunConfig
    from knowspec.conformance.runner import run_to_end

    return run_to_end(RunConfig(target=target_for("text_only"), contract_path=toy_contract, max_examples=3))


def test_a_server_without_structured_content_has_its_failures_under_one_cause(text_only_run):
    failed = [r for r in text_only_run.results if r.status == "failed"]
    groups = shared_causes(text_only_run.results)
    assert len(failed) > 10 and groups[0].cause.key == "no_structured_content"
    assert len(groups[0].cases) == len(failed)  # every check that met it words it so


def test_the_reports_name_the_shared_cause_once_and_mark_its_cases(text_only_run, tmp_path):
    from knowspec.conformance.reporters import html, json_report, junit, text

    finished: RunFinished = text_only_run
    failed = sum(r.status == "failed" for r in finished.results)
    written = json_report.build(None, finished)
    assert [(c["cause"], c["failures"]) for c in written["shared_causes"]] == [("no_structured_content", failed)]
    assert {r["cause"] for r in written["results"] if r["status"] == "failed"} == {"no_structured_content"}
    plain = text.render(None, None, finished)
    assert plain.count(f"SHARED CAUSE of {failed} failures") == 1
    assert plain.count("one of a shared cause's failures") == 1   # one shown in full, not each
    assert "Shared causes" in html.render(None, finished)
    assert junit.render(finished).decode().count("failures share it") == failed
    assert json.dumps(written)  # still plain JSON
