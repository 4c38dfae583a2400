"""Every patch operation kind, previewed then applied: the file changes exactly as named.

Expected bytes are written by hand from the fixture text, so any extra byte the editor
touches (comments, quoting, key order, unknown keys, the body) fails the comparison.
"""

from __future__ import annotations

import pytest

from write_helpers import CONCEPT, INDEX, preview_and_apply, visible_bytes

C = "arch/cache"


def _expect_only(bundle, before, path, new_text):
    after = visible_bytes(bundle)
    assert after[path] == new_text.encode("utf-8")
    assert {k: v for k, v in after.items() if k != path} == {k: v for k, v in before.items() if k != path}


CASES = [
    pytest.param(
        {"kind": "set_generated", "concept_id": C, "generated": {"by": "human:ana", "at": "2026-07-02T10:00:00Z"}},
        CONCEPT.replace("status: draft\n", 'status: draft\ngenerated:\n  by: human:ana\n  at: "2026-07-02T10:00:00Z"\n'),
        id="set_generated",
    ),
    pytest.param(
        {"kind": "ensure_verification", "concept_id": C, "verification": {"by": "process:ci", "at": "2026-08-01T00:00:00Z"}},
        CONCEPT.replace(
            "verified:\n  by: human:ana\n  at: 2026-07-01T09:00:00Z\n",
            'verified:\n  - by: human:ana\n    at: 2026-07-01T09:00:00Z\n  - by: process:ci\n    at: "2026-08-01T00:00:00Z"\n',
        ),
        id="ensure_verification_bare_becomes_sequence",
    ),
    pytest.param(
        {"kind": "remove_verification", "concept_id": C, "verification": {"by": "human:ana", "at": "2026-07-01T09:00:00Z"}},
        CONCEPT.replace("verified:\n  by: human:ana\n  at: 2026-07-01T09:00:00Z\n", ""),
        id="remove_verification",
    ),
    pytest.param(
        {"kind": "put_source", "concept_id": C, "source": {"id": "rfc", "resource": "https://example.invalid/rfc2", "title": "RFC"}},
        CONCEPT.replace(
            "    resource: https://example.invalid/rfc\n    x-note: keep me   # unknown nested key\n",
            "    resource: https://example.invalid/rfc2\n    x-note: keep me   # unknown nested key\n    title: RFC\n",
        ),
        id="put_source_update_by_id_keeps_unknown",
    ),
    pytest.param(
        {"kind": "put_source", "concept_id": C, "source": {"resource": "https://example.invalid/new", "usage_count": "7"}},
        CONCEPT.replace(
            "  - resource: https://example.invalid/anon\n",
            "  - resource: https://example.invalid/anon\n  - resource: https://example.invalid/new\n    usage_count: 7\n",
        ),
        id="put_source_append_anonymous",
    ),
    pytest.param(
        {"kind": "remove_source", "concept_id": C, "source_id": "rfc"},
        CONCEPT.replace(
            "  - id: rfc\n    resource: https://example.invalid/rfc\n    x-note: keep me   # unknown nested key\n", ""
        ),
        id="remove_source_by_id",
    ),
    pytest.param(
        {"kind": "remove_source", "concept_id": C, "source": {"resource": "https://example.invalid/anon"}},
        CONCEPT.replace("  - resource: https://example.invalid/anon\n", ""),
        id="remove_source_exact",
    ),
    pytest.param(
        {"kind": "set_usage_window", "concept_id": C, "usage_window": {"from": "2026-01-01", "to": "2026-06-30"}},
        CONCEPT.replace("status: draft\n", 'status: draft\nusage_window:\n  from: "2026-01-01"\n  to: "2026-06-30"\n'),
        id="set_usage_window_root",
    ),
    pytest.param(
        {"kind": "set_usage_window", "concept_id": C, "source_id": "rfc", "usage_window": {"from": "2026-01-01", "to": "2026-01-01"}},
        CONCEPT.replace(
            "    x-note: keep me   # unknown nested key\n",
            '    x-note: keep me   # unknown nested key\n    usage_window:\n      from: "2026-01-01"\n      to: "2026-01-01"\n',
        ),
        id="set_usage_window_source",
    ),
    pytest.param(
        {"kind": "set_lifecycle", "concept_id": C, "lifecycle": {"status": "stable", "stale_after": "2027-01-31"}},
        CONCEPT.replace("status: draft\n", 'status: stable\nstale_after: "2027-01-31"\n'),
        id="set_lifecycle",
    ),
    pytest.param(
        {"kind": "set_lifecycle", "concept_id": C, "lifecycle": {"status": None, "stale_after": None}},
        CONCEPT.replace("status: draft\n", ""),
        id="set_lifecycle_remove_family",
    ),
    pytest.param(
        {"kind": "put_attested_computation", "concept_id": C, "attested_computation": {
            "mode": "file", "runtime": "postgres", "parameters": [{"name": "id", "type": "string", "required": True}],
            "computation_path": "../sql/q.sql", "executor": {"resource": "../bin/run.py", "receipt": ["query_id"]},
            "attester": {"resource": "../bin/attest.py"}}},
        CONCEPT.replace("type: Note  # the kind\n", "type: Attested Computation\n").replace(
            "status: draft\n",
            "status: draft\nruntime: postgres\nparameters:\n  - name: id\n    type: string\n    required: true\n"
            "computation: ../sql/q.sql\nexecutor:\n  resource: ../bin/run.py\n  receipt:\n    - query_id\n"
            "attester:\n  resource: ../bin/attest.py\n",
        ),
        id="put_attested_computation_file",
    ),
    pytest.param(
        {"kind": "put_attested_computation", "concept_id": C, "attested_computation": {
            "mode": "inline", "runtime": "python", "parameters": [], "inline_computation": "print(1)\n",
            "inline_language": "python", "executor": {"resource": "x", "receipt": ["r"]}, "attester": {"resource": "y"}}},
        CONCEPT.replace("type: Note  # the kind\n", "type: Attested Computation\n").replace(
            "status: draft\n",
            "status: draft\nruntime: python\nparameters: []\nexecutor:\n  resource: x\n  receipt:\n    - r\n"
            "attester:\n  resource: y\n",
        ) + "\n# Computation\n\n```python\nprint(1)\n```\n",
        id="put_attested_computation_inline",
    ),
]


@pytest.mark.parametrize("op,expected", CASES)
def test_operation_changes_exactly_what_it_names(bundle, op, expected):
    before = visible_bytes(bundle)
    p, a = preview_and_apply(bundle, [op])
    assert p["status"] == "applicable" and p["affected_paths"] == ["arch/cache.md"]
    assert a["status"] == "applied" and a["changed_paths"] == ["arch/cache.md"]
    assert a["result_revision"] == p["result_revision"]
    _expect_only(bundle, before, "arch/cache.md", expected)


def test_set_bundle_version_edits_only_the_root_index(bundle):
    before = visible_bytes(bundle)
    p, a = preview_and_apply(bundle, [{"kind": "set_bundle_version", "version": "0.1"}])
    assert a["changed_paths"] == ["index.md"]
    _expect_only(bundle, before, "index.md", INDEX.replace('"0.2"', '"0.1"'))


@pytest.mark.parametrize("op", [
    {"kind": "put_source", "concept_id": C, "source": {"resource": "https://example.invalid/anon"}},
    {"kind": "ensure_verification", "concept_id": C, "verification": {"by": "human:ana", "at": "2026-07-01T09:00:00Z"}},
    {"kind": "remove_source", "concept_id": C, "source_id": "absent"},
    {"kind": "set_lifecycle", "concept_id": C, "lifecycle": {"status": "draft", "stale_after": None}},
    {"kind": "set_bundle_version", "version": "0.2"},
])
def test_desired_state_already_present_is_a_noop(bundle, op):
    before = visible_bytes(bundle)
    p, a = preview_and_apply(bundle, [op])
    assert p["status"] == "noop" and p["diff"] == "" and p["affected_paths"] == []
    assert a["status"] == "noop" and a["base_revision"] == a["result_revision"] == p["base_revision"]
    assert visible_bytes(bundle) == before
    assert not (bundle / ".okf").exists()  # a noop apply never opens the store


def test_operations_compose_in_order_on_one_document(bundle):
    ops = [
        {"kind": "put_source", "concept_id": C, "source": {"id": "new", "resource": "https://n"}},
        {"kind": "set_usage_window", "concept_id": C, "source_id": "new", "usage_window": {"from": "2026-01-01", "to": "2026-02-01"}},
        {"kind": "remove_source", "concept_id": C, "source_id": "new"},
    ]
    before = visible_bytes(bundle)
    p, _ = preview_and_apply(bundle, ops)
    assert p["status"] == "noop"
    assert visible_bytes(bundle) == before


def test_crlf_document_keeps_crlf(tmp_path):
    from write_helpers import make_bundle
    text = CONCEPT.replace("\n", "\r\n")
    b = make_bundle(tmp_path / "crlf", {"arch/cache.md": text})
    preview_and_apply(b, [{"kind": "set_lifecycle", "concept_id": C, "lifecycle": {"status": "stable", "stale_after": None}}])
    assert (b / "arch/cache.md").read_bytes() == text.replace("status: draft", "status: stable").encode()
