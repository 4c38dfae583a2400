"""The contract examples of list_concepts, read_concept and validate_bundle
(spec/okf/contract/read.md §3.1-3.3)."""

from __future__ import annotations

import json

import pytest

from knowspec.impl.errors import ToolError
from okf_helpers import list_concepts, read_concept, validate, write_bundle

RETRY = """---
type: Policy
title: Retry policy
stale_after: 2026-12-31
verified: {by: "human:ana", at: 2026-07-01T09:00:00Z}
sources:
  - id: req
    resource: https://example.invalid/req
generated: {by: writer/1.0, at: 2026-06-30T10:00:00Z}
---
Retry for 24 hours.[^req]

[^req]: Requirements
"""
ROOT_INDEX = '---\nokf_version: "0.2"\n---\n# Concepts\n\n- [Retry](ops/retry.md) - Retry policy.\n'


@pytest.fixture()
def kb(tmp_path):
    return write_bundle(tmp_path / "kb", {"index.md": ROOT_INDEX, "ops/retry.md": RETRY})


def test_list_concepts_example_structured_and_text(kb):
    out = list_concepts(kb, as_of="2026-07-29")
    assert out.structured == {
        "version": {"declared": "0.2", "effective": "0.2", "resolution": "declared", "compatibility": "native"},
        "version_declaration": {"present": True, "valid": True, "raw": "0.2", "value": "0.2"},
        "temporal_profile": "date-3fcbb9f",
        "as_of": "2026-07-29",
        "concepts": [{
            "id": "ops/retry", "type": "Policy", "title": "Retry policy", "path": "ops/retry.md",
            "status": "stable",
            "status_state": {"present": False, "valid": True, "raw": None, "effective": "stable"},
            "trust": "human-reviewed", "stale": False, "stale_after": "2026-12-31",
            "generated_at": "2026-06-30T10:00:00Z", "source_count": 1,
            "computation": {"present": False, "runtime": None, "executor": None, "attester": None},
            "legacy_derived": {"generated": False, "citations": False},
        }],
    }
    assert out.text == '{"concepts":[{"id":"ops/retry","type":"Policy","title":"Retry policy","path":"ops/retry.md"}]}'


def test_list_concepts_stale_at_inclusive_boundary(kb):
    card = list_concepts(kb, as_of="2026-12-31").structured["concepts"][0]
    assert card["stale"] is True
    assert list_concepts(kb, as_of="2026-12-30").structured["concepts"][0]["stale"] is False


def test_list_concepts_without_as_of_reports_null_stale(kb):
    out = list_concepts(kb)
    assert out.structured["as_of"] is None
    assert out.structured["concepts"][0]["stale"] is None


def test_list_quirk_date_profile_missing_stale_after_is_false_instant_is_null(tmp_path):
    kb = write_bundle(tmp_path / "kb", {"a.md": "---\ntype: Note\n---\nbody\n"})
    assert list_concepts(kb, as_of="2026-01-01").structured["concepts"][0]["stale"] is False
    inst = list_concepts(kb, temporal_profile="instant-0b87c52", as_of="2026-01-01T00:00:00Z")
    assert inst.structured["concepts"][0]["stale"] is None


def test_read_concept_example(kb):
    out = read_concept(kb, "ops/retry")
    s = out.structured
    assert out.text == RETRY
    assert s["id"] == "ops/retry" and s["path"] == "ops/retry.md"
    assert s["frontmatter_yaml"] == RETRY.split("---\n")[1]
    assert s["body"] == "Retry for 24 hours.[^req]\n\n[^req]: Requirements"
    p = s["projection"]
    source = {"id": "req", "resource": "https://example.invalid/req", "title": "", "author": "",
              "usage_count": None, "last_modified": None, "usage_window": None}
    assert p["sources"] == [source]
    assert p["attributions"] == [{
        "id": "req", "normalized_id": "req", "sources": [source],
        "references": [{"id": "req", "raw": "[^req]"}],
        "definitions": [{"id": "req", "text": "Requirements", "raw": "[^req]:"}],
    }]
    assert p["generated"] == {"by": "writer/1.0", "at": "2026-06-30T10:00:00Z"}
    assert p["verified"] == [{"by": "human:ana", "at": "2026-07-01T09:00:00Z"}]
    assert (p["trust"], p["status"], p["stale_after"], p["computation"]) == ("human-reviewed", "stable", "2026-12-31", None)
    assert (p["type"], p["title"], p["description"], p["resource"], p["tags"]) == ("Policy", "Retry policy", None, None, [])
    assert s["legacy_fallback"] == {"generated_from_timestamp": False, "sources_from_citations": False}
    assert "stale" not in p


def test_read_concept_unknown_id_is_concept_not_found_with_recovery_step(kb):
    with pytest.raises(ToolError) as exc:
        read_concept(kb, "ops/missing")
    assert exc.value.code == "concept_not_found"
    assert exc.value.message == "concept not found: ops/missing"
    assert exc.value.diagnostics[0]["code"] == "recovery_step"
    assert exc.value.diagnostics[0]["field"] == "concept_id"


@pytest.mark.parametrize(
    ("concept_id", "message"),
    [
        (" ops/retry", "concept_id must not contain surrounding whitespace"),
        ("/ops/retry", "concept_id must be bundle-relative"),
        ("ops/retry.md", "concept_id is not canonical"),
        ("ops//retry", "concept_id is not canonical"),
        ("a:b", "concept_id is not canonical"),
        ("ops/index", "concept_id contains a reserved segment"),
        (".hidden/x", "concept_id contains a reserved segment"),
    ],
)
def test_read_concept_rejects_non_canonical_ids(kb, concept_id, message):
    with pytest.raises(ToolError) as exc:
        read_concept(kb, concept_id)
    assert (exc.value.code, exc.value.message) == ("invalid_request", message)


def test_validate_example_missing_frontmatter(tmp_path):
    kb = write_bundle(tmp_path / "kb", {"a.md": "just text\n"})
    out = validate(kb)
    assert out.structured == {
        "version": {"declared": None, "effective": "0.2", "resolution": "default", "compatibility": "native"},
        "version_declaration": {"present": False, "valid": True, "raw": None, "value": None},
        "temporal_profile": "date-3fcbb9f",
        "scanned_files": 1,
        "conformance": {"conformant": False, "errors": 1},
        "guidance": {"warnings": 0, "info": 0},
        "diagnostics": [{"code": "concept_frontmatter_missing", "severity": "ERROR", "file": "a.md",
                         "field": "frontmatter", "message": "missing YAML frontmatter block",
                         "spec_ref": "okf-v0.2#11.1", "policy_failure": False}],
    }
    assert json.loads(out.text) == {"scanned_files": 1, "conformant": False, "errors": 1, "warnings": 0, "info": 0,
                                    "diagnostics": [{"severity": "ERROR", "file": "a.md",
                                                     "message": "missing YAML frontmatter block"}]}


def test_parse_error_envelope_for_list_and_read_but_not_validate(tmp_path):
    kb = write_bundle(tmp_path / "kb", {"a/b.md": "---\ntype: [x\n---\n", "ok.md": "---\ntype: T\n---\n"})
    for call in (lambda: list_concepts(kb), lambda: read_concept(kb, "ok")):
        with pytest.raises(ToolError) as exc:
            call()
        err = exc.value
        assert (err.code, err.message) == ("operation_rejected", "tool operation was rejected")
        assert json.loads(err.text) == {"status": "error", "diagnostics": [{
            "code": "invalid_frontmatter", "severity": "ERROR", "file": "a/b.md",
            "message": "unparseable concept document; inspect its frontmatter and encoding"}]}
        assert err.diagnostics[0]["field"] == "" and err.diagnostics[0]["spec_ref"] == ""
    diags = validate(kb).structured["diagnostics"]
    assert [d["code"] for d in diags] == ["concept_unparseable"]


def test_malformed_root_version_fails_list_but_not_read(tmp_path):
    kb = write_bundle(tmp_path / "kb", {"index.md": "---\nokf_version: 0.2\n---\n# A\n\n- [a](a.md)\n",
                                        "a.md": "---\ntype: T\n---\n"})
    with pytest.raises(ToolError) as exc:
        list_concepts(kb)
    assert exc.value.code == "invalid_request"
    assert exc.value.message == 'resolve bundle version: invalid OKF version declaration: "0.2"'
    out = read_concept(kb, "a").structured
    assert out["version"] == {"declared": None, "effective": None, "resolution": None, "compatibility": None}
    assert out["version_declaration"] == {"present": True, "valid": False, "raw": "0.2", "value": None}


def test_validate_selector_conflict_warns_policy_failure(tmp_path):
    kb = write_bundle(tmp_path / "kb", {"index.md": '---\nokf_version: "0.2"\n---\n# A\n\n- [a](a.md)\n',
                                        "a.md": "---\ntype: T\n---\n"})
    out = validate(kb, target_version="0.1").structured
    assert out["version"]["resolution"] == "declared"
    (d,) = out["diagnostics"]
    assert (d["code"], d["severity"], d["policy_failure"]) == ("version_assertion_failed", "WARN", True)
    assert d["message"] == 'OKF version selector conflicts with declaration: declared "0.2", selected "0.1"'


def test_hidden_and_colon_concepts_are_listed_but_not_readable(tmp_path):
    kb = write_bundle(tmp_path / "kb", {".hidden/a.md": "---\ntype: T\n---\n", "x:y.md": "---\ntype: T\n---\n"})
    ids = [c["id"] for c in list_concepts(kb).structured["concepts"]]
    assert ids == [".hidden/a", "x:y"]
    with pytest.raises(ToolError):
        read_concept(kb, ".hidden/a")



def _assert_instant_values_are_malformed_under_date_profile(bundle, concept_id, boundary, window):
    inst = list_concepts(bundle, temporal_profile="instant-0b87c52", as_of=boundary).structured
    (card,) = [c for c in inst["concepts"] if c["id"] == concept_id]
    assert (card["stale_after"], card["stale"], card["source_count"]) == (boundary, True, 1)
    assert inst["as_of"] == boundary
    date = [c for c in list_concepts(bundle, as_of=boundary[:10]).structured["concepts"] if c["id"] == concept_id][0]
    assert (date["stale_after"], date["source_count"]) == (None, 0)
    projection = read_concept(bundle, concept_id, temporal_profile="instant-0b87c52").structured["projection"]
    assert projection["usage_window"] == window
    assert read_concept(bundle, concept_id).structured["projection"]["usage_window"] is None


def test_instant_values_are_malformed_under_date_profile():
    from okf_helpers import OWN_FIXTURES

    _assert_instant_values_are_malformed_under_date_profile(
        OWN_FIXTURES / "v02" / "instant-profile", "cutover", "2026-11-05T09:30:00.250000001-03:00",
        {"from": "2026-10-20T08:00:00-03:00", "to": "2026-11-04T18:00:00Z"})


@pytest.mark.upstream_fixtures
def test_upstream_temporal_profile_fixture_instant_values_are_malformed_under_date_profile():
    from optional_data import UPSTREAM_FIXTURES

    _assert_instant_values_are_malformed_under_date_profile(
        UPSTREAM_FIXTURES / "v02" / "temporal-profiles" / "instant", "example", "2026-09-23T18:00:00.123456789+07:00",
        {"from": "2026-09-01T18:00:00+07:00", "to": "2026-09-23T12:00:00Z"})


def test_validate_strict_with_as_of_warns_stale(tmp_path):
    kb = write_bundle(tmp_path / "kb", {"a.md": "---\ntype: T\nstale_after: 2026-01-01\n---\n"})
    diags = validate(kb, strict=True, as_of="2026-01-01").structured["diagnostics"]
    assert [(d["code"], d["message"], d["spec_ref"]) for d in diags] == [
        ("stale", "concept is stale as of 2026-01-01", "okf-v0.2#5.5")]
    assert validate(kb, strict=True, as_of="2025-12-31").structured["diagnostics"] == []


def test_status_state_of_malformed_status(tmp_path):
    kb = write_bundle(tmp_path / "kb", {"a.md": "---\ntype: T\nstatus: 123\n---\n", "b.md": "---\ntype: T\nstatus: [x]\n---\n"})
    cards = list_concepts(kb).structured["concepts"]
    assert [(c["status"], c["status_state"]) for c in cards] == [
        (None, {"present": True, "valid": False, "raw": "123", "effective": None}),
        (None, {"present": True, "valid": False, "raw": "", "effective": None}),
    ]


def test_read_concept_frontmatter_over_limit_is_resource_limit(tmp_path, monkeypatch):
    from knowspec.impl.okf.tools import read as read_tools

    monkeypatch.setattr(read_tools, "MAX_FRONTMATTER_BYTES", 10)
    kb = write_bundle(tmp_path / "kb", {"a.md": "---\ntype: T\ntitle: long enough\n---\n"})
    with pytest.raises(ToolError) as exc:
        read_concept(kb, "a")
    assert (exc.value.code, exc.value.message) == ("resource_limit", "concept frontmatter exceeds the MCP limit")
