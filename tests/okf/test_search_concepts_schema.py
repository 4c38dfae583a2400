"""The four query tools' structured results validate against their advertised output schemas."""

import json
import pathlib

import pytest
from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from knowspec.impl.context import CallContext
from knowspec.impl.okf.tools import query as q
from tool_args import tool_args

SCHEMAS = pathlib.Path(__file__).resolve().parents[2] / "spec" / "okf" / "schemas"
SCORECARD = str(pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "okf" / "v02" / "scorecard")


def validator(tool):
    registry = Registry()
    for path in SCHEMAS.glob("*.json"):
        doc = json.loads(path.read_text())
        resource = Resource.from_contents(doc, default_specification=DRAFT202012)
        registry = registry.with_resource(path.name, resource)
        if "$id" in doc:
            registry = registry.with_resource(doc["$id"], resource)
    schema = json.loads((SCHEMAS / f"{tool}.output.schema.json").read_text())
    return Draft202012Validator(schema, registry=registry, format_checker=FormatChecker())


CALLS = [
    ("search_concepts", q.search_concepts, dict(query="parcels", limit=2, as_of="2026-06-15", temporal_profile=None)),
    ("search_concepts", q.search_concepts,
     dict(query="a", limit=100, as_of="2026-06-15T10:00:00+02:00", temporal_profile="instant-0b87c52")),
    ("get_neighbors", q.get_neighbors, dict(concept_id="metrics/delivery-scorecard", direction="both", kinds=None,
                                            limit=20, as_of=None, temporal_profile=None)),
    ("search_sections", q.search_sections, dict(query="delivered", limit=3)),
    ("get_semantic_graph", q.get_semantic_graph, dict(as_of="2026-06-15", temporal_profile=None)),
]


@pytest.mark.parametrize("tool,handler,kwargs", CALLS, ids=[c[0] for c in CALLS])
def test_output_matches_the_advertised_schema(tool, handler, kwargs):
    out = handler(tool_args(tool, bundle_path=SCORECARD, **kwargs), CallContext())
    errors = [e.message for e in validator(tool).iter_errors(out.structured)]
    assert errors == []
