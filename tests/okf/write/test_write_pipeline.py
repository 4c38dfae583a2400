"""The write tools through the real call pipeline: generated input models, schema checks."""

from __future__ import annotations

import json

import anyio
import pytest

from knowspec.impl.server.pipeline import ToolRuntime

C = "arch/cache"


@pytest.fixture(scope="module")
def runtime():
    return ToolRuntime()


def _call(runtime, name, arguments):
    return anyio.run(runtime.call, name, arguments)


def test_preview_apply_and_replay_through_the_pipeline(runtime, bundle):
    ops = [
        {"kind": "set_usage_window", "concept_id": C, "usage_window": None},
        {"kind": "put_source", "concept_id": C, "source": {"id": "rfc", "resource": "https://example.invalid/rfc", "usage_count": "3"}},
        {"kind": "set_lifecycle", "concept_id": C, "lifecycle": {"status": "stable", "stale_after": "2027-01-01"}},
    ]
    base = {"bundle_path": str(bundle), "actor": "human:reviewer", "operations": ops}
    p = _call(runtime, "preview_concept_patch", base)
    assert not p.is_error, p.structured_content
    preview = p.structured_content
    assert preview["status"] == "applicable"
    args = dict(base, expected_revision=preview["base_revision"], expected_plan_digest=preview["plan_digest"])
    a = _call(runtime, "apply_concept_patch", args)
    assert not a.is_error, a.structured_content
    assert a.structured_content["status"] == "applied"
    assert _call(runtime, "apply_concept_patch", args).structured_content == a.structured_content
    text = (bundle / "arch/cache.md").read_text()
    assert "usage_count: 3\n" in text and 'stale_after: "2027-01-01"' in text


def test_conflict_through_the_pipeline_is_an_error_envelope(runtime, bundle):
    ops = [{"kind": "set_generated", "concept_id": C, "generated": {"by": "human:x"}}]
    base = {"bundle_path": str(bundle), "actor": "human:reviewer", "operations": ops}
    preview = _call(runtime, "preview_concept_patch", base).structured_content
    (bundle / "other.md").write_text("---\ntype: Note\n---\nmoved\n")
    args = dict(base, expected_revision=preview["base_revision"], expected_plan_digest=preview["plan_digest"])
    result = _call(runtime, "apply_concept_patch", args)
    assert result.is_error and result.structured_content["code"] == "revision_conflict"


def test_write_concept_through_the_pipeline(runtime, bundle):
    result = _call(runtime, "write_concept", {"bundle_path": str(bundle), "concept_id": "notes/x",
                                              "frontmatter": "type: Note\n", "body": "# X\n"})
    assert not result.is_error, result.structured_content
    assert result.structured_content["path"] == "notes/x.md"


def test_migration_preview_and_apply_through_the_pipeline(runtime, tmp_path):
    from write_helpers import make_bundle

    b = make_bundle(tmp_path / "m", {"index.md": '---\nokf_version: "0.1"\n---\n# Index\n\n- [A](a.md)\n',
                                     "a.md": "---\ntype: Note\ntimestamp: 2026-01-02T03:04:05Z\n---\nA\n"})
    args = {"bundle_path": str(b), "from": "auto", "timestamp_policy": "preserve", "citation_mappings": [],
            "generated_by": "human:m"}
    p = _call(runtime, "preview_v02_migration", args)
    assert not p.is_error, p.structured_content
    preview = p.structured_content
    apply_args = dict(args, expected_source=preview["source"], proof=preview["proof"],
                      expected_plan_digest=preview["plan_digest"])
    a = _call(runtime, "apply_v02_migration", json.loads(json.dumps(apply_args)))  # as off the wire
    assert not a.is_error, a.structured_content
    assert a.structured_content["status"] == "applied"


def test_temporal_preview_through_the_pipeline_has_empty_text(runtime, bundle):
    result = _call(runtime, "preview_temporal_upgrade", {"bundle_path": str(bundle), "id": "u1", "actor": "human:x",
                                                         "mappings": []})
    assert not result.is_error, result.structured_content
    assert result.structured_content["status"] == "noop"
    assert result.content[0].text == ""
