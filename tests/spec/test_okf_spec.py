"""The OKF half of spec/: schemas are valid, self-consistent, and say what okf-mcp 61e75e9 says.

Examples below are the contract examples of spec/okf/contract/read.md and write.md,
completed only where the notes abridge them ("…"), so a wrong field name, enum value or bound in a
schema makes one of these tests fail.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from knowspec.codegen.bundle import advertised_output_schema, bundle_schema
from knowspec.codegen.load import load_spec
from knowspec.codegen.pydantic_models import generate_models

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "spec"
OKF = SPEC / "okf"
SCHEMAS = OKF / "schemas"
TABLE = tomllib.loads((OKF / "tools.toml").read_text(encoding="utf-8"))
ERROR_CODES = tomllib.loads((SPEC / "errors.toml").read_text(encoding="utf-8"))["codes"]
ENVELOPE = json.loads((SPEC / "common" / "error.schema.json").read_text(encoding="utf-8"))

REGISTRATION_ORDER = [
    "list_concepts", "search_sections", "search_concepts", "read_concept", "get_neighbors",
    "validate_bundle", "get_semantic_graph", "write_concept", "preview_concept_patch",
    "apply_concept_patch", "preview_v02_migration", "apply_v02_migration",
    "preview_temporal_upgrade", "apply_temporal_upgrade",
]
HANDLER_MODULE = {
    **dict.fromkeys(["list_concepts", "read_concept", "validate_bundle"], "tools.read"),
    **dict.fromkeys(["search_concepts", "get_neighbors", "search_sections", "get_semantic_graph"], "tools.query"),
}
LIMIT_KEYWORDS = ("default", "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems")
HEX = "0123456789abcdef" * 4
REV = "sha256:" + HEX
ALL_SCHEMA_FILES = sorted(SCHEMAS.glob("*.json"))
TOOLS = {row["name"]: row for row in TABLE["tool"]}


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


@cache
def validator(tool: str, kind: str) -> Draft202012Validator:
    """A format-asserting validator for a tool's bundled (self-contained) input or output schema."""
    schema = bundle_schema(SCHEMAS / TOOLS[tool][kind])
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def failing_keywords(tool: str, kind: str, instance: Any) -> set[str]:
    found: set[str] = set()
    stack = list(validator(tool, kind).iter_errors(instance))
    while stack:
        err = stack.pop()
        found.add(str(err.validator))
        stack.extend(err.context or ())
    return found


def is_valid(tool: str, kind: str, instance: Any) -> bool:
    return validator(tool, kind).is_valid(instance)


def refs_in(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return own + [r for v in node.values() for r in refs_in(v)]
    if isinstance(node, list):
        return [r for v in node for r in refs_in(v)]
    return []


def resolve_pointer(doc: Any, pointer: str) -> Any:
    for raw in [p for p in pointer.split("/") if p]:
        doc = doc[raw.replace("~1", "/").replace("~0", "~")]
    return doc


def input_property(tool: str, name: str) -> dict[str, Any]:
    """The bundled input property as codegen's limit check sees it: its own keywords, no $ref merge."""
    return bundle_schema(SCHEMAS / TOOLS[tool]["input"])["properties"][name]


# --- schema files -------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ALL_SCHEMA_FILES, ids=lambda p: p.name)
def test_every_schema_is_valid_2020_12(path: Path) -> None:
    schema = load(path)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("path", ALL_SCHEMA_FILES, ids=lambda p: p.name)
def test_every_relative_ref_resolves_to_an_existing_definition(path: Path) -> None:
    for ref in refs_in(load(path)):
        file_part, _, fragment = ref.partition("#")
        target = (path.parent / file_part) if file_part else path
        assert target.is_file(), f"{path.name}: {ref} names a missing file"
        resolve_pointer(load(target), fragment)  # KeyError when the pointer is dangling


def titled_nodes(node: Any, inside_condition: bool = False) -> list[tuple[dict[str, Any], bool]]:
    """Every schema node with its flag "sits inside if/then/else/not/contains" (pure constraints)."""
    if isinstance(node, list):
        return [n for v in node for n in titled_nodes(v, inside_condition)]
    if not isinstance(node, dict):
        return []
    found = [(node, inside_condition)]
    for key, value in node.items():
        if key in {"properties", "$defs"} and isinstance(value, dict):
            found += [n for v in value.values() for n in titled_nodes(v, inside_condition)]
        elif key not in {"const", "default", "examples", "enum", "required"}:
            found += titled_nodes(value, inside_condition or key in {"if", "then", "else", "not", "contains"})
    return found


@pytest.mark.parametrize("path", ALL_SCHEMA_FILES, ids=lambda p: p.name)
def test_every_object_and_enum_has_a_camelcase_title(path: Path) -> None:
    for node, conditional in titled_nodes(load(path)):
        declares = "object" in node.get("type", ()) or "enum" in node
        if declares and not conditional:
            assert re.fullmatch(r"[A-Z][A-Za-z0-9]*", node.get("title", "")), node


@pytest.mark.parametrize("tool", REGISTRATION_ORDER)
def test_ids_follow_okf_mcp_except_search_sections(tool: str) -> None:
    for kind in ("input", "output"):
        schema = load(SCHEMAS / TOOLS[tool][kind])
        if tool == "search_sections":
            assert "$id" not in schema
        else:
            assert schema["$id"] == f"https://okf.dev/mcp/v0.2/{tool}.{kind}.schema.json"


@pytest.mark.parametrize("tool", REGISTRATION_ORDER)
def test_input_schemas_are_closed_objects(tool: str) -> None:
    schema = load(SCHEMAS / TOOLS[tool]["input"])
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) <= set(schema["properties"])


@pytest.mark.parametrize("tool", REGISTRATION_ORDER)
def test_bundled_schemas_merge_with_the_error_envelope(tool: str) -> None:
    success = bundle_schema(SCHEMAS / TOOLS[tool]["output"])
    advertised = advertised_output_schema(success, ENVELOPE)
    Draft202012Validator.check_schema(advertised)
    assert not [r for r in refs_in(advertised) if not r.startswith("#/")]
    envelope = {"code": "resource_limit", "message": "too big", "retryable": False, "diagnostics": []}
    assert Draft202012Validator(advertised).is_valid(envelope)


def test_wire_diagnostic_is_the_envelope_diagnostic() -> None:
    ours = dict(load(SCHEMAS / "common.schema.json")["$defs"]["WireDiagnostic"])
    theirs = dict(ENVELOPE["$defs"]["Diagnostic"])
    for shape in (ours, theirs):
        shape.pop("title"), shape.pop("description", None)
    assert ours == theirs


# --- tool table ---------------------------------------------------------------------------------

def test_table_lists_the_fourteen_tools_in_registration_order() -> None:
    assert TABLE["family"] == {"name": "okf", "order": 1, "text_encoder": "go"}
    assert [row["name"] for row in TABLE["tool"]] == REGISTRATION_ORDER


@pytest.mark.parametrize("tool", REGISTRATION_ORDER)
def test_table_row_is_complete_and_names_existing_files(tool: str) -> None:
    row = TOOLS[tool]
    assert (SCHEMAS / row["input"]).is_file() and (SCHEMAS / row["output"]).is_file()
    assert row["input"] == f"{tool}.input.schema.json" and row["output"] == f"{tool}.output.schema.json"
    assert row["impl"] == f"knowspec.impl.okf.{HANDLER_MODULE.get(tool, 'tools.write')}:{tool}"
    assert row["title"] and len(row["description"]) > 80
    assert row["text_fallback"] in {"json", "custom"} and row["text_fallback_doc"]
    assert set(row["errors"]) <= {c for c, v in ERROR_CODES.items() if "okf" in v["families"]}
    assert row["read_only"] == row["idempotent"] == (tool.startswith("preview_") or tool in HANDLER_MODULE)


@pytest.mark.parametrize("tool", REGISTRATION_ORDER)
def test_table_limits_agree_with_schema_keywords(tool: str) -> None:
    limits = TOOLS[tool].get("limits", {})
    for name, bounds in limits.items():
        assert set(bounds) <= set(LIMIT_KEYWORDS), name
        prop = input_property(tool, name)
        for keyword, value in bounds.items():
            assert prop.get(keyword) == value, f"{tool}.{name}.{keyword}"


@pytest.mark.parametrize("tool", REGISTRATION_ORDER)
def test_every_numeric_input_bound_is_in_the_table(tool: str) -> None:
    limits = TOOLS[tool].get("limits", {})
    for name in load(SCHEMAS / TOOLS[tool]["input"])["properties"]:
        prop = input_property(tool, name)
        numeric = {k: v for k, v in prop.items()
                   if k in LIMIT_KEYWORDS and isinstance(v, int) and not isinstance(v, bool)}
        assert numeric == limits.get(name, {}), f"{tool}.{name}"


@pytest.mark.parametrize("tool", REGISTRATION_ORDER)
def test_ordering_names_only_result_arrays(tool: str) -> None:
    props = load(SCHEMAS / TOOLS[tool]["output"])["properties"]
    for name in TOOLS[tool].get("ordering", {}):
        head = name.split(".")[0]
        assert head in props, f"{tool}: ordering of unknown array {name}"


CODEGEN_ARGS = ["--input-file-type", "jsonschema", "--output-model-type", "pydantic_v2.BaseModel",
                "--target-python-version", "3.11", "--disable-timestamp", "--field-constraints", "--use-annotated",
                "--use-title-as-name", "--enum-field-as-literal", "all", "--formatters", "builtin"]


def test_datamodel_codegen_accepts_the_folder(tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "datamodel-codegen"
    out = tmp_path / "m"
    done = subprocess.run([str(exe), "--input", str(SCHEMAS), "--output", str(out), *CODEGEN_ARGS],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert {f"{t}_input_schema.py" for t in REGISTRATION_ORDER} <= {p.name for p in out.iterdir()}


def test_codegen_pipeline_gives_plain_input_models() -> None:
    """knowspec codegen (collapse root models, formats stripped) yields str/Literal attributes."""
    spec = load_spec(SPEC)
    spec.families = [family for family in spec.families if family.name == "okf"]
    files = generate_models(spec, SPEC)
    for tool in REGISTRATION_ORDER:
        stem = "".join(part.capitalize() for part in tool.split("_"))
        source = files[f"models/okf/{tool}_input_schema.py"]
        assert f"class {stem}Input(BaseModel)" in source, tool
        assert "RootModel" not in source and "datetime" not in source, tool


# --- contract examples (spec/okf/contract/read.md §3, write.md §4-6) ----------------------------

VERSION_02 = {"declared": "0.2", "effective": "0.2", "resolution": "declared", "compatibility": "native"}
DECLARED_02 = {"present": True, "valid": True, "raw": "0.2", "value": "0.2"}
ABSENT_STATUS = {"present": False, "valid": True, "raw": None, "effective": "stable"}

LIST_EXAMPLE = {  # spec/okf/contract/read.md §3.1, verbatim
    "version": VERSION_02, "version_declaration": DECLARED_02,
    "temporal_profile": "date-3fcbb9f", "as_of": "2026-07-29",
    "concepts": [{
        "id": "ops/retry", "type": "Policy", "title": "Retry policy", "path": "ops/retry.md",
        "status": "stable", "status_state": ABSENT_STATUS, "trust": "human-reviewed", "stale": False,
        "stale_after": "2026-12-31", "generated_at": "2026-06-30T10:00:00Z", "source_count": 1,
        "computation": {"present": False, "runtime": None, "executor": None, "attester": None},
        "legacy_derived": {"generated": False, "citations": False}}]}

SOURCE_REQ = {"id": "req", "resource": "https://example.invalid/req", "title": "", "author": "",
              "usage_count": None, "last_modified": None, "usage_window": None}
READ_EXAMPLE = {  # spec/okf/contract/read.md §3.2, with the abridged parts filled in
    "id": "ops/retry", "path": "ops/retry.md", "version": VERSION_02, "version_declaration": DECLARED_02,
    "temporal_profile": "date-3fcbb9f", "frontmatter_yaml": "type: Policy\ntitle: Retry policy\n",
    "body": "Retry for 24 hours.[^req]\n\n[^req]: Requirements",
    "projection": {
        "type": "Policy", "title": "Retry policy", "description": None, "resource": None, "tags": [],
        "sources": [SOURCE_REQ],
        "attributions": [{"id": "req", "normalized_id": "req", "sources": [SOURCE_REQ],
                          "references": [{"id": "req", "raw": "[^req]"}],
                          "definitions": [{"id": "req", "text": "Requirements", "raw": "[^req]:"}]}],
        "usage_window": None, "generated": {"by": "writer/1.0", "at": "2026-06-30T10:00:00Z"},
        "verified": [{"by": "human:ana", "at": "2026-07-01T09:00:00Z"}], "trust": "human-reviewed",
        "status": "stable", "status_state": ABSENT_STATUS, "stale_after": "2026-12-31", "computation": None},
    "legacy_fallback": {"generated_from_timestamp": False, "sources_from_citations": False}}

VALIDATE_EXAMPLE = {  # spec/okf/contract/read.md §3.3, version filled in for an undeclared bundle
    "version": {"declared": None, "effective": "0.2", "resolution": "default", "compatibility": "native"},
    "version_declaration": {"present": False, "valid": True, "raw": None, "value": None},
    "temporal_profile": "date-3fcbb9f", "scanned_files": 1,
    "conformance": {"conformant": False, "errors": 1}, "guidance": {"warnings": 0, "info": 0},
    "diagnostics": [{"code": "concept_frontmatter_missing", "severity": "ERROR", "file": "a.md",
                     "field": "frontmatter", "message": "missing YAML frontmatter block",
                     "spec_ref": "okf-v0.2#11.1", "policy_failure": False}]}

SECTIONS_EXAMPLE = {  # spec/okf/contract/read.md §3.7, placeholders replaced by real hex
    "query": "jitter deadline", "terms": ["jitter", "deadline"], "snapshot_revision": HEX, "total": 1,
    "truncated": False,
    "hits": [{"concept_id": "a", "path": "a.md", "heading": "Retry", "locator": "a.md#L4-L5",
              "line_start": 4, "line_end": 5, "content_sha256": HEX,
              "snippet": "# Retry\nDeadline permits jitter.", "score": 0.5753,
              "matched_terms": ["jitter", "deadline"]}]}


def card(cid: str) -> dict[str, Any]:
    return {"id": cid, "path": f"{cid}.md", "type": "Note", "title": "", "description": "", "tags": [],
            "status": "stable", "trust": "unverified", "stale": None, "stale_after": None,
            "status_state": ABSENT_STATUS}


NEIGHBORS_EXAMPLE = {  # spec/okf/contract/read.md §3.6, direction both
    "concept": card("a"), "temporal_profile": "date-3fcbb9f", "as_of": None, "direction": "both",
    "kinds": ["navigation", "relation", "source"], "total": 3, "truncated": False,
    "edges": [
        {"from": "a", "to": "b", "kind": "navigation", "relation_type": None, "source": card("a"), "target": card("b")},
        {"from": "b", "to": "a", "kind": "navigation", "relation_type": None, "source": card("b"), "target": card("a")},
        {"from": "b", "to": "a#section", "kind": "relation", "relation_type": "uses",
         "source": card("b"), "target": card("a")}],
    "sources": [{"id": "doc", "resource": "https://example.com/doc", "title": ""}]}

SEARCH_EXAMPLE = {"query": "needle", "temporal_profile": "date-3fcbb9f", "as_of": None, "total": 2,
                  "truncated": True, "hits": [{"concept": card("needle"), "match": "id"}]}


@pytest.mark.parametrize(("tool", "example"), [
    ("list_concepts", LIST_EXAMPLE), ("read_concept", READ_EXAMPLE), ("validate_bundle", VALIDATE_EXAMPLE),
    ("search_sections", SECTIONS_EXAMPLE), ("get_neighbors", NEIGHBORS_EXAMPLE),
    ("search_concepts", SEARCH_EXAMPLE),
])
def test_contract_examples_validate_against_output_schemas(tool: str, example: dict[str, Any]) -> None:
    assert failing_keywords(tool, "output", example) == set()


@pytest.mark.parametrize(("tool", "example"), [
    ("list_concepts", LIST_EXAMPLE), ("read_concept", READ_EXAMPLE), ("get_neighbors", NEIGHBORS_EXAMPLE),
])
def test_jsonschema_rs_agrees_on_examples_and_profile_formats(tool: str, example: dict[str, Any]) -> None:
    rs = pytest.importorskip("jsonschema_rs")
    check = rs.validator_for(bundle_schema(SCHEMAS / TOOLS[tool]["output"]), validate_formats=True)
    assert check.is_valid(example)
    instant = example | {"temporal_profile": "instant-0b87c52"}
    assert check.is_valid(instant) == validator(tool, "output").is_valid(instant)


def test_list_output_requires_datetimes_under_the_instant_profile() -> None:
    instant = copy.deepcopy(LIST_EXAMPLE) | {"temporal_profile": "instant-0b87c52"}
    assert "format" in failing_keywords("list_concepts", "output", instant)
    instant["as_of"] = "2026-07-29T00:00:00Z"
    instant["concepts"][0]["stale_after"] = "2026-12-31T00:00:00+03:00"
    assert is_valid("list_concepts", "output", instant)


def test_read_output_forces_the_profile_format_on_nested_sources() -> None:
    dated = copy.deepcopy(READ_EXAMPLE)
    dated["projection"]["attributions"][0]["sources"][0]["last_modified"] = "2026-01-02T00:00:00Z"
    assert "format" in failing_keywords("read_concept", "output", dated)
    dated["temporal_profile"] = "instant-0b87c52"
    dated["projection"]["stale_after"] = "2026-12-31T00:00:00Z"
    assert is_valid("read_concept", "output", dated)


def test_write_concept_success_example_validates() -> None:
    ok = {"status": "success", "path": "architecture/cache.md",
          "diagnostics": [{"severity": "WARN", "message": "orphan file (not linked in index.md)"}]}
    assert is_valid("write_concept", "output", ok)
    assert not is_valid("write_concept", "output", ok | {"status": "noop"})


# --- input rules --------------------------------------------------------------------------------

@given(st.integers(min_value=-1000, max_value=1000))
def test_limit_is_accepted_exactly_between_1_and_100(limit: int) -> None:
    args = {"bundle_path": "/srv/kb", "query": "retry", "limit": limit}
    assert is_valid("search_concepts", "input", args) == (1 <= limit <= 100)
    if limit > 100:  # limit keywords decide resource_limit vs schema_validation
        assert failing_keywords("search_concepts", "input", args) == {"maximum"}


SEGMENT = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zs", "Zl", "Zp"), blacklist_characters="/\\:"),
                  min_size=1, max_size=8).filter(lambda seg: not seg.startswith("."))


@settings(max_examples=60)
@given(st.lists(SEGMENT, min_size=1, max_size=4))
def test_canonical_concept_ids_are_accepted(segments: list[str]) -> None:
    cid = "/".join(segments)
    expected = not any(s in {"index", "log"} for s in segments) and not cid.endswith(".md")
    assert is_valid("read_concept", "input", {"bundle_path": "/srv/kb", "concept_id": cid}) == expected


@pytest.mark.parametrize("cid", ["", "index", "a/log", "a/.hidden", "a.md", "a:b", " a", "a ", "/a", "a//b", "a\\b"])
def test_non_canonical_concept_ids_are_rejected(cid: str) -> None:
    assert not is_valid("write_concept", "input", {"bundle_path": "/kb", "concept_id": cid, "frontmatter": "", "body": ""})


@pytest.mark.parametrize(("profile", "as_of", "ok"), [
    (None, "2026-07-29", True), (None, "2026-07-29T00:00:00Z", False), ("date-3fcbb9f", "2026-7-1", False),
    ("instant-0b87c52", "2026-07-29T10:00:00.123456789+07:00", True), ("instant-0b87c52", "2026-07-29", False),
    ("instant-0b87c52", "2026-07-29T10:00:00-00:00", False), ("instant-0b87c52", "2026-07-29t10:00:00z", False),
])
def test_as_of_format_follows_the_temporal_profile(profile: str | None, as_of: str, ok: bool) -> None:
    args = {"bundle_path": "/srv/kb", "as_of": as_of} | ({"temporal_profile": profile} if profile else {})
    for tool in ("list_concepts", "validate_bundle", "get_semantic_graph"):
        assert is_valid(tool, "input", args) == ok, tool


def test_read_concept_rejects_as_of_and_search_sections_rejects_temporal_inputs() -> None:
    assert not is_valid("read_concept", "input", {"bundle_path": "/kb", "concept_id": "a", "as_of": "2026-01-01"})
    assert not is_valid("search_sections", "input", {"bundle_path": "/kb", "query": "x", "temporal_profile": "date-3fcbb9f"})


def test_neighbor_kinds_are_unique_and_at_most_three() -> None:
    base = {"bundle_path": "/kb", "concept_id": "a"}
    assert is_valid("get_neighbors", "input", base | {"kinds": ["relation", "navigation"]})
    assert not is_valid("get_neighbors", "input", base | {"kinds": ["relation", "relation"]})
    assert not is_valid("get_neighbors", "input", base | {"kinds": []})
    assert not is_valid("get_neighbors", "input", base | {"direction": "sideways"})


PATCH = {"bundle_path": "/kb", "actor": "human:reviewer"}


@pytest.mark.parametrize(("op", "ok"), [
    ({"kind": "set_lifecycle", "concept_id": "a", "lifecycle": {"status": "stable", "stale_after": None}}, True),
    ({"kind": "set_bundle_version", "version": "0.2"}, True),
    ({"kind": "set_bundle_version", "version": "0.2", "concept_id": "a"}, False),
    ({"kind": "set_generated", "generated": {"by": "writer/1.0"}}, False),
    ({"kind": "remove_source", "concept_id": "a", "source_id": "req"}, True),
    ({"kind": "remove_source", "concept_id": "a", "source_id": "req", "source": {"resource": "x"}}, False),
    ({"kind": "remove_source", "concept_id": "a", "source": {"id": "req", "resource": "x"}}, False),
    ({"kind": "set_usage_window", "concept_id": "a", "usage_window": None}, True),
    ({"kind": "put_source", "concept_id": "a", "source": {"resource": "x", "usage_count": "012"}}, False),
    ({"kind": "put_attested_computation", "concept_id": "a", "attested_computation": {
        "mode": "file", "runtime": "python", "parameters": [], "computation_path": "c.py",
        "inline_language": "python", "executor": {"resource": "e", "receipt": ["r"]}, "attester": {"resource": "t"}}}, False),
])
def test_patch_operations_take_exactly_their_own_payload(op: dict[str, Any], ok: bool) -> None:
    assert is_valid("preview_concept_patch", "input", PATCH | {"operations": [op]}) == ok


def test_patch_temporal_values_follow_the_profile() -> None:
    op = {"kind": "set_lifecycle", "concept_id": "a", "lifecycle": {"status": None, "stale_after": "2026-12-31"}}
    assert is_valid("preview_concept_patch", "input", PATCH | {"operations": [op]})
    assert not is_valid("preview_concept_patch", "input", PATCH | {"operations": [op], "temporal_profile": "instant-0b87c52"})
    apply = PATCH | {"operations": [op], "expected_revision": REV, "expected_plan_digest": REV}
    assert is_valid("apply_concept_patch", "input", apply)
    assert not is_valid("apply_concept_patch", "input", apply | {"expected_revision": REV.upper()})


TARGET_NOOP = {"requested_selector": "auto", "declaration_present": True, "declaration_valid": True,
               "declaration_raw": "0.2", "declared_version": "0.2", "resolved_source": "0.2",
               "resolution_source": "declared", "from_version": "0.2", "to_version": "0.2",
               "transition": "target-noop", "candidates": [], "blockers": []}
V01 = TARGET_NOOP | {"declaration_raw": "0.1", "declared_version": "0.1", "resolved_source": "0.1",
                     "from_version": "0.1", "transition": "v0.1-to-v0.2"}
PROOF = {"format_version": 2, "request_digest": REV, "resolution_digest": REV, "base_revision": REV,
         "result_revision": REV, "reads": ["index.md"], "writes": [{"path": "index.md", "digest": HEX}],
         "deletes": [], "renames": [], "affected_refs": [], "reverse_impact": [],
         "changed_files": [{"kind": "write", "path": "index.md", "from": ""}], "changed_refs": []}
MIGRATE = {"bundle_path": "/kb", "timestamp_policy": "preserve", "citation_mappings": []}


def test_migration_apply_binds_proof_to_the_transition() -> None:
    assert is_valid("apply_v02_migration", "input", MIGRATE | {"expected_source": TARGET_NOOP})
    assert not is_valid("apply_v02_migration", "input", MIGRATE | {"expected_source": TARGET_NOOP, "proof": PROOF})
    assert not is_valid("apply_v02_migration", "input", MIGRATE | {"expected_source": V01})
    full = MIGRATE | {"expected_source": V01, "proof": PROOF, "expected_plan_digest": REV}
    assert is_valid("apply_v02_migration", "input", full)
    assert not is_valid("apply_v02_migration", "input", full | {"from": "0.2"})


def test_migration_preview_outputs_follow_their_status_branch() -> None:
    noop = {"status": "noop", "source": TARGET_NOOP, "base_revision": REV, "result_revision": REV,
            "plan_digest": "", "affected_paths": [], "diff": "", "diff_truncated": False,
            "blockers": [], "manual_actions": [], "diagnostics": []}
    assert is_valid("preview_v02_migration", "output", noop)
    assert not is_valid("preview_v02_migration", "output", noop | {"proof": PROOF})
    applicable = noop | {"status": "applicable", "source": V01, "proof": PROOF, "plan_digest": REV,
                         "affected_paths": ["index.md"], "diff": "--- a/index.md\n"}
    assert is_valid("preview_v02_migration", "output", applicable)
    assert not is_valid("preview_v02_migration", "output", applicable | {"manual_actions": [
        {"code": "provide_generated_at", "path": "a.md", "message": "supply generated_at"}]})


@pytest.mark.parametrize(("to", "ok"), [
    ("2026-01-02T12:00:00Z", True), ("2026-01-02T12:00:00+14:00", True), ("2026-01-02T12:00:00-13:59", True),
    ("2026-01-02T12:00:00+14:01", False), ("2026-01-02T12:00:00-00:00", False), ("2026-01-02T24:00:00Z", False),
    ("2026-01-02", False),
])
def test_temporal_mapping_targets_are_explicit_instants(to: str, ok: bool) -> None:
    mapping = {"concept": "a", "path": "stale_after", "from": "2026-01-02", "to": to}
    args = {"bundle_path": "/kb", "id": "up-1", "actor": "human:ana", "mappings": [mapping]}
    assert is_valid("preview_temporal_upgrade", "input", args) == ok
    full = args | {"base_revision": REV, "plan_digest": REV}
    assert is_valid("apply_temporal_upgrade", "input", full) == ok
