"""How a run is planned and reported: only real cases, loud skipped areas, bounded evidence,
orders read from the contract."""

from __future__ import annotations

import json

import pytest

from knowspec.conformance.areas import skipped_areas
from knowspec.conformance.checks import CHECKS
from knowspec.conformance.contract import load_contract
from knowspec.conformance.events import CheckFinished
from knowspec.conformance.failures import Failure
from knowspec.conformance.generate import boundary_cases
from knowspec.conformance.oracles.contract_ordering import rules, violations
from knowspec.conformance.runner import plan

CONTRACT = load_contract()


def test_a_check_that_cannot_apply_to_a_tool_is_not_a_planned_case():
    cases = plan([CHECKS["truncation"], CHECKS["differential_search"], CHECKS["determinism"]], CONTRACT)
    planned = {(spec.id, tool.name) for spec, tool in cases}
    assert ("truncation", "list_concepts") not in planned          # no limit argument
    assert ("truncation", "search_concepts") in planned
    assert {t for c, t in planned if c == "differential_search"} == {"search_concepts"}
    assert ("determinism", "write_concept") not in planned         # not read-only


def _everything_present(tool):
    """A context in which the target advertises every tool and was started on the suite's pools:
    whatever a planned tool-scoped case skips for then would be a non-case, not a real skip."""
    from pathlib import Path

    from knowspec.conformance.checks.docpool_import import PoolRun
    from knowspec.conformance.checks.registry import BundleStore, CheckContext
    from knowspec.conformance.config import RunConfig

    pool = PoolRun("fixture", "started on the fixture", fixture=object(), database="conform", help=object())
    config = RunConfig(target="stdio:x", pool=pool, pool_fixture=Path("/srv/conform-pool"))
    advertised = {t.name: {"name": t.name} for t in CONTRACT.tools}
    return CheckContext(None, CONTRACT, config, advertised, BundleStore(Path("/nonexistent")), tool)


def test_a_planned_tool_case_never_skips_for_judging_another_tool():
    cases = [(spec, tool) for spec, tool in plan(list(CHECKS.values()), CONTRACT) if tool and spec.applies]
    non_cases = [(spec.id, tool.name, spec.applies(_everything_present(tool))) for spec, tool in cases]
    assert [c for c in non_cases if c[2]] == []


def test_an_oracle_is_planned_only_on_the_tools_it_judges():
    planned = {(spec.id, tool.name) for spec, tool in plan(list(CHECKS.values()), CONTRACT) if tool}
    assert {t for c, t in planned if c == "oracle_list_concepts"} == {"list_concepts"}
    assert {t for c, t in planned if c == "oracle_concept_patch"} == {"preview_concept_patch",
                                                                       "apply_concept_patch"}
    assert {t for c, t in planned if c == "oracle_doc_get"} == {"doc_get"}
    assert {t for c, t in planned if c == "oracle_pool_defaults"} == {"doc_search", "help_search", "doc_entities"}
    oracle_cases = [(c, t) for c, t in planned if c.startswith("oracle_")]
    # three oracles judge a tool pair, and oracle_pool_defaults the three tools with a default
    assert len(oracle_cases) == len({c for c, _ in oracle_cases}) + 3 + 2


def test_every_tool_with_a_declared_sort_order_is_ordering_checked():
    planned = {tool.name for spec, tool in plan([CHECKS["result_ordering"]], CONTRACT)}
    declared = {t.name for t in CONTRACT.tools if t.ordering}
    # write_concept's order ("store diagnostics first") is not a sort over result fields
    assert declared - planned == {"write_concept"}
    assert len(planned) >= 15


@pytest.mark.parametrize("tool,out,broken", [
    ("doc_links", {"results": [{"confidence": 0.9, "collection": "b", "slug": "a"},
                               {"confidence": 0.9, "collection": "a", "slug": "z"}]}, "collection tie-break"),
    ("validate_bundle", {"diagnostics": [{"severity": "WARN", "file": "a"}, {"severity": "ERROR", "file": "a"}]},
     "severity rank"),
    ("apply_concept_patch", {"changed_paths": ["a.md", "a.md"]}, "strictly ascending"),
    ("get_neighbors", {"kinds": ["relation", "navigation"]}, "value rank of a string array"),
    ("doc_search", {"results": [{"method": "fts", "score": 2.0, "collection": "a", "slug": "a"},
                                {"method": "fts", "score": 1.0, "collection": "a", "slug": "a"}]}, "fts ascending"),
    ("help_get_topic", {"related": [{"slug": str(i), "title": "t"} for i in range(11)]}, "at most 10"),
])
def test_contract_orders_catch_a_violation(tool, out, broken):
    assert violations(rules(CONTRACT.tool(tool)), out), broken


@pytest.mark.parametrize("tool,out", [
    ("doc_links", {"results": [{"confidence": 0.9, "collection": "a", "slug": "z"},
                               {"confidence": 0.9, "collection": "b", "slug": "a"},
                               {"confidence": 0.1, "collection": "a", "slug": "a"}]}),
    ("doc_search", {"results": [{"method": "vector", "score": 0.9, "collection": "a", "slug": "b"},
                                {"method": "vector", "score": 0.5, "collection": "a", "slug": "a"}]}),
    ("get_neighbors", {"edges": [{"kind": "navigation", "from": "b", "to": "a", "relation_type": None},
                                 {"kind": "relation", "from": "a", "to": "b", "relation_type": "x"}]}),
    ("doc_collections", {"results": [{"id": "netsim-help"}, {"id": "a"}, {"id": "b"}]}),
])
def test_contract_orders_accept_a_well_ordered_result(tool, out):
    assert violations(rules(CONTRACT.tool(tool)), out) == []


def _finished(check, tool, status, reason="", calls=1, successes=1):
    return CheckFinished(check, "rule", tool, status, 0.1, calls=calls, reason=reason, successes=successes)


def test_a_whole_skipped_area_is_named_with_what_to_pass():
    results = [_finished(c, "", "skipped", "document-pool fixture discovered", calls=0, successes=0)
               for c in ("docpool_import", "docpool_import_answers")]
    results.append(_finished("output_schema", "search_concepts", "passed"))
    areas = dict(skipped_areas(results))
    assert "--rest-url" in areas["document-pool content"]


def test_a_tool_that_never_succeeded_is_a_skipped_area():
    results = [_finished("output_schema", "write_concept", "passed", successes=0),
               _finished("input_valid_accepted", "write_concept", "passed", successes=0),
               _finished("output_schema", "search_concepts", "passed")]
    assert [a for a, _ in skipped_areas(results)] == ["successful results of write_concept"]


def test_an_interrupted_run_names_the_cases_it_did_not_run_not_fixtures_or_data():
    """After SIGTERM a tool whose only finished case met errors, and a pool area whose first
    case skipped, had been given advice about fixtures: they were not judged because the run ended."""
    results = [_finished("docpool_import", "", "skipped", "document-pool fixture discovered", calls=0, successes=0),
               _finished("input_invalid_rejected", "write_concept", "passed", successes=0),
               _finished("output_schema", "search_concepts", "passed")]
    not_run = (("docpool_import_answers", ""), ("output_schema", "write_concept"))
    assert [a for a, _ in skipped_areas(results)] == ["document-pool content", "successful results of write_concept"]
    areas = skipped_areas(results, not_run=not_run)
    assert [a for a, _ in areas] == ["2 case(s) not run"]
    assert "interrupted" in areas[0][1] and "write_concept" in areas[0][1] and "docpool_import_answers" in areas[0][1]


def test_cases_the_time_budget_cut_get_no_advice_about_fixtures_or_data():
    from knowspec.conformance.areas import BUDGET

    results = [_finished("docpool_import", "", "skipped", f"{BUDGET} during a call", calls=0, successes=0),
               _finished("input_invalid_rejected", "write_concept", "passed", successes=0),
               _finished("output_schema", "write_concept", "skipped", f"{BUDGET}: raise it", calls=0, successes=0)]
    assert [a for a, _ in skipped_areas(results)] == ["2 case(s) cut by the time budget"]


def test_strict_fails_a_run_with_a_skipped_area(tmp_path):
    import sys
    from pathlib import Path

    from knowspec.conformance.config import RunConfig
    from knowspec.conformance.runner import EXIT_FAILURES, EXIT_OK, run_to_end
    sys.path.insert(0, str(Path(__file__).parent / "targets"))
    from toy_paths import toy_target
    from toy_schemas import contract

    path = tmp_path / "contract.json"
    path.write_text(json.dumps(contract()), encoding="utf-8")
    config = dict(target=toy_target("crashing_neighbors"), contract_path=path, checks=("tools_list", "output_schema"),
                  tools=("get_neighbors",), max_examples=3)
    assert run_to_end(RunConfig(**config)).exit_code == EXIT_OK
    strict = run_to_end(RunConfig(**config, strict=True))
    assert strict.exit_code == EXIT_FAILURES
    assert [a for a, _ in strict.skipped_areas] == ["successful results of get_neighbors"]
    assert [a for a, _ in strict.strict_failed] == ["successful results of get_neighbors"]


def test_a_strict_failure_is_a_failing_case_in_junit():
    """CI reads JUnit: a run that --strict failed had reported failures=0 errors=0."""
    import xml.etree.ElementTree as ET

    from knowspec.conformance.events import RunFinished
    from knowspec.conformance.reporters.junit import render

    area = ("successful results of get_neighbors", "no call succeeded")
    root = ET.fromstring(render(RunFinished((), 1.0, 1, skipped_areas=(area,), strict_failed=(area,))))
    assert root.get("failures") == "1"
    case = root.find("testsuite[@name='strict']/testcase")
    assert case.get("name") == area[0] and "no call succeeded" in case.find("failure").get("message")
    assert ET.fromstring(render(RunFinished((), 1.0, 0, skipped_areas=(area,)))).get("failures") == "0"


def test_strict_asks_no_rest_surface_of_a_stdio_target():
    """--family all --strict over stdio could never pass: the REST area has nothing to judge there."""
    from knowspec.conformance.areas import REST_AREA, UNOFFERED_AREA, strict_failing

    areas = ((REST_AREA, "pass --rest-url"), (UNOFFERED_AREA, "x"), ("document-pool content", "y"))
    assert [a for a, _ in strict_failing(areas, stdio=True)] == ["document-pool content"]
    assert [a for a, _ in strict_failing(areas, stdio=False)] == [REST_AREA, "document-pool content"]


def test_failure_evidence_is_capped_in_reports():
    huge = {"items": ["x" * 5000] * 3000, "nested": {"deep": list(range(50_000))}}
    data = Failure("c", "r", "t", "m", arguments=huge, response=huge).to_dict()
    assert len(json.dumps(data)) < 60_000
    assert "items" in data["arguments"] and data["arguments"]["items"][-1].startswith("…(+")


def test_boundary_lengths_of_a_bundle_path_stay_absolute_paths():
    tool = CONTRACT.tool("list_concepts")
    cases = [c for c in boundary_cases(tool, {"bundle_path": "/tmp/some/bundle"}) if "bundle_path" in c.label]
    assert cases
    for case in cases:
        assert case.arguments["bundle_path"].startswith("/")
    assert sorted(len(c.arguments["bundle_path"]) for c in cases) == [4096, 4097]


def test_a_given_bundle_dir_keeps_what_was_there_and_loses_what_the_run_wrote(tmp_path):
    import sys
    from pathlib import Path

    from knowspec.conformance.config import RunConfig
    from knowspec.conformance.runner import EXIT_OK, run_to_end
    sys.path.insert(0, str(Path(__file__).parent / "targets"))
    from toy_paths import toy_target
    from toy_schemas import contract

    path = tmp_path / "contract.json"
    path.write_text(json.dumps(contract()), encoding="utf-8")
    given = tmp_path / "bundles"
    (given / "mine").mkdir(parents=True)
    (given / "w7").mkdir()  # named like a worker's folder, but the user's: kept
    finished = run_to_end(RunConfig(target=toy_target("good"), contract_path=path, bundle_dir=given,
                                    checks=("tools_list", "output_schema"), workers=2))
    assert finished.exit_code == EXIT_OK
    assert sorted(p.name for p in given.iterdir()) == ["mine", "w7"]


@pytest.fixture
def toy_config(toy_contract, target_for):
    """A run's settings against a variant of the toy server, on the toy contract."""
    from knowspec.conformance.config import RunConfig

    def make(variant: str, **config) -> RunConfig:
        return RunConfig(target=target_for(variant), contract_path=toy_contract, **config)

    return make


def test_advertised_only_judges_what_a_partial_server_offers_and_names_the_rest(toy_config):
    from knowspec.conformance.areas import NOT_ADVERTISED, UNOFFERED_AREA
    from knowspec.conformance.runner import EXIT_FAILURES, EXIT_OK, run_to_end

    checks = ("tools_list", "output_schema")
    plain = run_to_end(toy_config("missing_tool", checks=checks))
    assert plain.exit_code == EXIT_FAILURES  # get_neighbors is not listed
    partial = run_to_end(toy_config("missing_tool", checks=checks, advertised_only=True, strict=True))
    assert partial.exit_code == EXIT_OK
    listing = {r.tool: r for r in partial.results if r.check_id == "tools_list"}
    assert listing["get_neighbors"].status == "skipped" and listing["get_neighbors"].reason == NOT_ADVERTISED
    assert all(r.status == "passed" for name, r in listing.items() if name != "get_neighbors")
    assert dict(partial.skipped_areas)[UNOFFERED_AREA].endswith(": get_neighbors")
    broken = run_to_end(toy_config("bad_output", checks=checks, advertised_only=True))
    assert broken.exit_code == EXIT_FAILURES  # what is offered is still judged


@pytest.mark.parametrize("checks", [("tools_list",), ("output_schema", "result_ordering", "truncation")])
def test_advertised_only_ends_a_run_that_would_judge_nothing(toy_config, checks):
    """Whatever checks run: with tools_list left out, every case had skipped and the run passed."""
    from knowspec.conformance.runner import EXIT_UNREACHABLE, run_to_end

    finished = run_to_end(toy_config("missing_tool", checks=checks, tools=("get_neighbors",), advertised_only=True,
                                     strict=True))
    assert finished.exit_code == EXIT_UNREACHABLE and "advertises none" in finished.unreachable


def test_checks_that_judge_structure_fail_a_success_without_it(toy_config):
    """A server answering with text alone had passed result_ordering with nothing judged."""
    from knowspec.conformance.failures import NO_STRUCTURE
    from knowspec.conformance.runner import run_to_end

    finished = run_to_end(toy_config("text_only", checks=("result_ordering", "truncation", "text_encoding",
                                                          "differential_search"),
                                     tools=("search_concepts",), max_examples=3))
    verdicts = {r.check_id: r for r in finished.results}
    for check_id in ("result_ordering", "truncation"):
        assert verdicts[check_id].status == "failed"
        assert verdicts[check_id].failure.message == f"nothing to judge: {NO_STRUCTURE}"
    assert verdicts["differential_search"].status == "failed"  # not an error: an AttributeError had ended it
    assert NO_STRUCTURE in verdicts["differential_search"].failure.message
    assert verdicts["text_encoding"].status == "passed"  # it judges the text's bytes alone


def test_a_run_without_tools_list_still_names_the_tools_the_target_lacks(toy_config):
    from knowspec.conformance.areas import UNLISTED_AREA, UNOFFERED_AREA
    from knowspec.conformance.runner import EXIT_FAILURES, EXIT_OK, run_to_end

    checks = ("result_ordering",)
    plain = run_to_end(toy_config("missing_tool", checks=checks, max_examples=3))
    assert plain.exit_code == EXIT_OK and "get_neighbors" in dict(plain.skipped_areas)[UNLISTED_AREA]
    assert run_to_end(toy_config("missing_tool", checks=checks, max_examples=3,
                                  strict=True)).exit_code == EXIT_FAILURES
    declared = run_to_end(toy_config("missing_tool", checks=checks, max_examples=3, strict=True,
                                      advertised_only=True))
    assert declared.exit_code == EXIT_OK and [a for a, _ in declared.skipped_areas] == [UNOFFERED_AREA]
    listed = run_to_end(toy_config("missing_tool", checks=("tools_list",)))
    assert listed.exit_code == EXIT_FAILURES and listed.skipped_areas == ()  # failed there: reported once


def test_a_tool_answering_not_implemented_fails_saying_so(toy_config):
    """An honest stub had failed as "not among the tool's contract errors", wrongly worded."""
    from knowspec.conformance.runner import EXIT_FAILURES, run_to_end

    finished = run_to_end(toy_config("unwritten_neighbors", checks=("input_valid_accepted", "output_schema"),
                                     tools=("get_neighbors",), max_examples=3))
    assert finished.exit_code == EXIT_FAILURES
    messages = [r.failure.message for r in finished.results if r.failure]
    assert messages and all("get_neighbors answers not_implemented" in m for m in messages)


def test_a_tool_that_never_succeeds_is_named_with_the_codes_it_answered(toy_config):
    from knowspec.conformance.runner import run_to_end

    finished = run_to_end(toy_config("crashing_neighbors", checks=("output_schema",), tools=("get_neighbors",),
                                     max_examples=3))
    why = dict(finished.skipped_areas)["successful results of get_neighbors"]
    assert "every answer was an error: operation_rejected" in why


def test_a_server_scoped_check_is_planned_only_when_the_contract_holds_what_it_calls():
    everything = {spec.id for spec, tool in plan(list(CHECKS.values()), CONTRACT) if tool is None}
    okf = {spec.id for spec, tool in plan(list(CHECKS.values()), CONTRACT.for_family("okf")) if tool is None}
    one_tool = {spec.id for spec, tool in plan(list(CHECKS.values()), CONTRACT.only(("list_concepts",)))
                if tool is None}
    pool_checks = {"docpool_import", "docpool_import_answers", "docpool_import_acl", "docpool_import_refusals",
                   "docpool_import_non_admin", "rest_importdoc"}
    assert pool_checks | {"cancellation", "no_mixed_reads_during_apply"} <= everything
    assert not pool_checks & okf and "cancellation" in okf
    assert not (pool_checks | {"cancellation", "no_mixed_reads_during_apply"}) & one_tool


def test_a_selection_that_plans_no_case_ends_the_run_with_exit_2(toy_config):
    from knowspec.conformance.runner import EXIT_UNREACHABLE, run_to_end

    finished = run_to_end(toy_config("good", checks=("differential_search",), tools=("get_neighbors",)))
    assert finished.exit_code == EXIT_UNREACHABLE and "plans no case" in finished.unreachable


def _revised(tool_name: str, edit) -> "object":
    """The shipped contract with one tool's input schema and limits edited as a revision would."""
    import copy
    import dataclasses

    tools = []
    for tool in CONTRACT.tools:
        if tool.name == tool_name:
            schema, limits = copy.deepcopy(tool.input_schema), copy.deepcopy(tool.limits)
            edit(schema, limits)
            tool = dataclasses.replace(tool, input_schema=schema, limits=limits)
        tools.append(tool)
    return dataclasses.replace(CONTRACT, tools=tuple(tools))


def _context(contract, tool_name: str):
    from pathlib import Path

    from knowspec.conformance.checks.registry import BundleStore, CheckContext
    from knowspec.conformance.config import RunConfig

    return CheckContext(None, contract, RunConfig(target="stdio:x"), {}, BundleStore(Path("/nonexistent")),
                        contract.tool(tool_name))


def test_a_checks_own_call_past_a_revised_limit_skips_as_stale():
    from knowspec.conformance.areas import STALE_CHECK
    from knowspec.conformance.failures import CheckSkipped

    def tighten(schema, limits):
        schema["properties"]["limit"]["maximum"] = limits["limit"]["maximum"] = 50

    ctx = _context(_revised("search_sections", tighten), "search_sections")
    assert ctx.fitted("search_sections", {"bundle_path": "/b", "query": "q", "limit": 7})["limit"] == 7
    with pytest.raises(CheckSkipped) as info:
        ctx.fitted("search_sections", {"bundle_path": "/b", "query": "q", "limit": 100})
    assert info.value.reason.startswith(STALE_CHECK) and "limit" in info.value.reason


def test_a_checks_own_call_that_no_longer_fits_the_contract_skips_as_stale_not_failed():
    from knowspec.conformance.areas import STALE_CHECK
    from knowspec.conformance.failures import CheckSkipped

    def rename(schema, limits):
        schema["properties"]["text"] = schema["properties"].pop("query")
        schema["required"] = ["text" if r == "query" else r for r in schema["required"]]

    ctx = _context(_revised("search_sections", rename), "search_sections")
    with pytest.raises(CheckSkipped) as info:
        ctx.fitted("search_sections", {"bundle_path": "/b", "query": "q"})
    assert info.value.reason.startswith(STALE_CHECK)
    result = CheckFinished("oracle_search_sections", "r", "search_sections", "skipped", 0.0, reason=info.value.reason)
    assert [area for area, _ in skipped_areas([result])] == [f"1 case(s) of {STALE_CHECK}"]


def test_an_okf_error_whose_text_is_not_its_message_fails(toy_config):
    from knowspec.conformance.runner import EXIT_FAILURES, run_to_end

    finished = run_to_end(toy_config("error_text_prefixed", checks=("input_invalid_rejected",),
                                     tools=("search_concepts",), max_examples=3))
    assert finished.exit_code == EXIT_FAILURES
    assert "content must be one text item equal to its message" in finished.results[0].failure.message
