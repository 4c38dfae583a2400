"""Input rules the handlers no longer restate: the pipeline refuses these before any handler runs.

Handlers take their generated input model and trust it (ARCHITECTURE.md, "Handler contract"), so
each bound, enumeration and one-of rule a handler once re-checked is pinned here on the real
registry, with a handler that fails the test if it is ever reached.
"""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from knowspec.generated.registry import TOOLS
from knowspec.impl.context import ToolOutput
from knowspec.impl.server.pipeline import ToolRuntime

BUNDLE = "/nonexistent/bundle"


def _unreachable(args, ctx):
    raise AssertionError(f"handler reached with {args!r}")


def _accepting(args, ctx):
    return ToolOutput({})  # fails output validation, which only happens after the handler ran


RUNTIME = ToolRuntime(handlers={e.name: _unreachable for e in TOOLS})


def refusal(tool: str, arguments: dict) -> str:
    result = anyio.run(RUNTIME.call, tool, arguments)
    assert result.is_error is True
    return result.structured_content["code"]


CASES = [
    ("search_concepts", {"bundle_path": BUNDLE, "query": "q", "limit": 0}, "schema_validation"),
    ("search_concepts", {"bundle_path": BUNDLE, "query": "q", "limit": 101}, "resource_limit"),
    ("search_concepts", {"bundle_path": BUNDLE, "query": "q", "limit": True}, "schema_validation"),
    ("search_concepts", {"bundle_path": BUNDLE, "query": "q", "limit": "5"}, "schema_validation"),
    ("search_concepts", {"bundle_path": BUNDLE, "query": "x" * 513}, "resource_limit"),
    ("search_concepts", {"bundle_path": BUNDLE, "query": "q", "temporal_profile": None}, "schema_validation"),
    ("search_sections", {"bundle_path": BUNDLE, "query": "x" * 513}, "resource_limit"),
    ("search_sections", {"bundle_path": BUNDLE, "query": "q", "limit": 101}, "resource_limit"),
    ("get_neighbors", {"bundle_path": BUNDLE, "concept_id": "a", "direction": "up"}, "schema_validation"),
    ("get_neighbors", {"bundle_path": BUNDLE, "concept_id": "a", "direction": None}, "schema_validation"),
    ("get_neighbors", {"bundle_path": BUNDLE, "concept_id": "a", "kinds": []}, "schema_validation"),
    ("get_neighbors", {"bundle_path": BUNDLE, "concept_id": "a", "kinds": ["source", "source"]}, "schema_validation"),
    ("get_neighbors", {"bundle_path": BUNDLE, "concept_id": "a", "kinds": ["parent"]}, "schema_validation"),
    ("get_neighbors", {"bundle_path": BUNDLE, "concept_id": "a", "limit": 0}, "schema_validation"),
    ("get_neighbors", {"bundle_path": BUNDLE}, "schema_validation"),
    ("list_concepts", {"bundle_path": BUNDLE, "temporal_profile": "date"}, "schema_validation"),
    ("list_concepts", {"bundle_path": ""}, "schema_validation"),
    ("list_concepts", {"bundle_path": "/" + "a" * 4096}, "resource_limit"),
    ("read_concept", {"bundle_path": BUNDLE, "concept_id": "a" * 4097}, "resource_limit"),
    ("validate_bundle", {"bundle_path": BUNDLE, "strict": "yes"}, "schema_validation"),
    ("validate_bundle", {"bundle_path": BUNDLE, "check_links": None}, "schema_validation"),
    ("validate_bundle", {"bundle_path": BUNDLE, "target_version": "0.3"}, "schema_validation"),
    ("preview_v02_migration", {"bundle_path": BUNDLE, "from": "1.0", "timestamp_policy": "preserve",
                               "citation_mappings": []}, "schema_validation"),
    ("preview_v02_migration", {"bundle_path": BUNDLE, "timestamp_policy": "drop", "citation_mappings": []},
     "schema_validation"),
    ("preview_v02_migration", {"bundle_path": BUNDLE, "timestamp_policy": "preserve", "citation_mappings": [],
                               "timestamp_conflict_policy": "guess"}, "schema_validation"),
    ("preview_concept_patch", {"bundle_path": BUNDLE, "actor": "human:a", "temporal_profile": "day",
                               "operations": [{"kind": "set_bundle_version", "version": "0.2"}]}, "schema_validation"),
    ("preview_concept_patch", {"bundle_path": BUNDLE, "actor": "human:a", "operations": []}, "schema_validation"),
    ("apply_concept_patch", {"bundle_path": BUNDLE, "actor": "human:a", "expected_revision": "sha256:" + "0" * 64,
                             "expected_plan_digest": "sha256:" + "0" * 64,
                             "operations": [{"kind": "set_bundle_version", "version": "0.2"}] * 257}, "resource_limit"),
    ("doc_get", {}, "schema_validation"),
    ("doc_get", {"kind": "form_class"}, "schema_validation"),
    ("doc_get", {"slug": ""}, "schema_validation"),
    ("help_get_topic", {}, "schema_validation"),
    ("help_get_topic", {"islem_kodu": ""}, "schema_validation"),
    ("doc_search", {"query": "q", "mode": "semantic"}, "schema_validation"),
    ("doc_search", {"query": "q", "limit": 51}, "resource_limit"),
    ("doc_entities", {"limit": 201}, "resource_limit"),
    ("help_search", {"query": "q", "limit": 0}, "schema_validation"),
]


@pytest.mark.parametrize(("tool", "arguments", "code"), CASES, ids=[f"{t}-{i}" for i, (t, _, _) in enumerate(CASES)])
def test_the_pipeline_refuses_before_the_handler(tool, arguments, code):
    assert refusal(tool, arguments) == code


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=-(1 << 40), max_value=1 << 40))
def test_a_search_limit_reaches_the_handler_only_within_its_bounds(limit):
    runtime = ToolRuntime(handlers={"search_concepts": _accepting})
    result = anyio.run(runtime.call, "search_concepts", {"bundle_path": BUNDLE, "query": "q", "limit": limit})
    code = result.structured_content["code"]
    if 1 <= limit <= 100:
        assert code == "schema_validation" and "output" in result.structured_content["message"].lower()
    else:
        assert code == ("resource_limit" if limit > 100 else "schema_validation")
