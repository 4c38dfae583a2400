"""Every read-tool result validates against the advertised output schema in ``spec/okf``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource

from okf_helpers import OWN_FIXTURES, list_concepts, read_concept, validate
from optional_data import UPSTREAM_FIXTURES

SCHEMAS = Path(__file__).resolve().parents[2] / "spec" / "okf" / "schemas"
SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "okf-sample"
BUNDLES = [SAMPLE, *(OWN_FIXTURES / rel for rel in (
    "v02/scorecard", "v02/instant-profile", "compat/declared-v01", "compat/undeclared-v01",
    "compat/mixed-provenance", "compat/future-version", "interop/foreign-tool"))]
UPSTREAM_BUNDLES = [UPSTREAM_FIXTURES / "v02" / rel for rel in (
    "positive/appendix-a", "positive/canonical", "positive/durability", "compat/declared-v01",
    "compat/undeclared-v01", "compat/mixed-provenance", "compat/future-version", "adversarial/optional-shapes",
    "adversarial/trust-signals", "strict", "strict-boundaries/families", "strict-footnote-integrity",
    "temporal-profiles/instant")]
PROFILES = [("date-3fcbb9f", "2026-06-15"), ("instant-0b87c52", "2026-09-23T18:00:00.123456789+07:00")]


def _validator(tool: str) -> Draft202012Validator:
    registry = Registry()
    for path in SCHEMAS.glob("*.json"):
        doc = json.loads(path.read_text())
        registry = registry.with_resource(path.name, Resource.from_contents(doc))
        if "$id" in doc:
            registry = registry.with_resource(doc["$id"], Resource.from_contents(doc))
    schema = json.loads((SCHEMAS / f"{tool}.output.schema.json").read_text())
    return Draft202012Validator(schema, registry=registry, format_checker=FormatChecker())


def _errors(tool: str, instance: dict) -> list[str]:
    return [f"{list(e.path)}: {e.message[:200]}" for e in _validator(tool).iter_errors(instance)]


@pytest.mark.parametrize("bundle", BUNDLES, ids=lambda b: b.name)
@pytest.mark.parametrize(("profile", "as_of"), PROFILES, ids=["date", "instant"])
def test_read_tool_outputs_match_their_schemas(bundle, profile, as_of):
    _assert_outputs_match(bundle, profile, as_of)


@pytest.mark.upstream_fixtures
@pytest.mark.parametrize("bundle", UPSTREAM_BUNDLES, ids=lambda b: "/".join(b.parts[-2:]))
@pytest.mark.parametrize(("profile", "as_of"), PROFILES, ids=["date", "instant"])
def test_read_tool_outputs_on_upstream_fixtures_match_their_schemas(bundle, profile, as_of):
    _assert_outputs_match(bundle, profile, as_of)


def _assert_outputs_match(bundle, profile, as_of):
    bundle = Path(os.path.realpath(bundle))
    listed = list_concepts(bundle, temporal_profile=profile, as_of=as_of).structured
    assert _errors("list_concepts", listed) == []
    for card in listed["concepts"]:
        assert _errors("read_concept", read_concept(bundle, card["id"], temporal_profile=profile).structured) == []
    report = validate(bundle, strict=True, check_links=True, check_orphans=True, temporal_profile=profile, as_of=as_of)
    assert _errors("validate_bundle", report.structured) == []
