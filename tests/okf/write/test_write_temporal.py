"""Temporal upgrade: explicit date -> instant mappings rewrite only the mapped scalar tokens."""

from __future__ import annotations


import pytest

from knowspec.impl.context import CallContext
from knowspec.impl.errors import ToolError
from knowspec.impl.okf.tools import write as write_tools
from write_helpers import assert_valid_output, make_bundle, tree_bytes, visible_bytes
from tool_args import tool_args

DOC = (
    "---\n"
    "type: Note\n"
    "stale_after: 2026-12-31  # review by then\n"
    "usage_window:\n"
    "  from: '2026-01-01'\n"
    '  to: !!str "2026-06-30"\n'
    "sources:\n"
    "  - resource: https://x\n"
    "    last_modified: 2026-03-01\n"
    "---\n"
    "Body 2026-12-31 stays.\n"
)
MAPPINGS = [
    {"concept": "c", "path": "stale_after", "from": "2026-12-31", "to": "2026-12-31T23:59:59+02:00"},
    {"concept": "c", "path": "usage_window.from", "from": "2026-01-01", "to": "2026-01-01T00:00:00Z"},
    {"concept": "c", "path": "usage_window.to", "from": "2026-06-30", "to": "2026-06-30T00:00:00Z"},
    {"concept": "c", "path": "sources[0].last_modified", "from": "2026-03-01", "to": "2026-03-01T12:00:00-05:00"},
]
EXPECTED = (DOC.replace("stale_after: 2026-12-31", "stale_after: 2026-12-31T23:59:59+02:00")
            .replace("'2026-01-01'", "'2026-01-01T00:00:00Z'")
            .replace('"2026-06-30"', '"2026-06-30T00:00:00Z"')
            .replace("last_modified: 2026-03-01", "last_modified: 2026-03-01T12:00:00-05:00"))


@pytest.fixture
def tbundle(tmp_path):
    return make_bundle(tmp_path / "t", {"index.md": '---\nokf_version: "0.2"\n---\n', "c.md": DOC})


def _args(bundle, mappings, **extra):
    tool = "apply_temporal_upgrade" if "base_revision" in extra else "preview_temporal_upgrade"
    return tool_args(tool, bundle_path=str(bundle), id="upgrade-1", actor="human:ops", mappings=mappings, **extra)


def _preview(bundle, mappings):
    out = write_tools.preview_temporal_upgrade(_args(bundle, mappings), CallContext())
    assert out.text == ""
    assert_valid_output("preview_temporal_upgrade", out.structured)
    return out.structured


def _apply(bundle, mappings, p):
    out = write_tools.apply_temporal_upgrade(
        _args(bundle, mappings, base_revision=p["base_revision"], plan_digest=p["plan_digest"]), CallContext())
    assert_valid_output("apply_temporal_upgrade", out.structured)
    return out.structured


def test_ready_preview_then_apply_rewrites_only_the_tokens(tbundle):
    p = _preview(tbundle, MAPPINGS)
    assert p["status"] == "ready" and p["unresolved"] == [] and p["result_revision"] != p["base_revision"]
    a = _apply(tbundle, MAPPINGS, p)
    assert a["status"] == "applied" and a["result_revision"] == p["result_revision"]
    assert (tbundle / "c.md").read_text() == EXPECTED
    assert _apply(tbundle, MAPPINGS, p) == a  # replay
    assert _preview(tbundle, [])["status"] == "noop"


def test_unmapped_legacy_dates_make_the_preview_incomplete(tbundle):
    p = _preview(tbundle, MAPPINGS[:1])
    assert p["status"] == "incomplete" and "plan_digest" not in p
    assert [u["path"] for u in p["unresolved"]] == ["usage_window.from", "usage_window.to", "sources[0].last_modified"]
    assert p["result_revision"] == p["base_revision"]


@pytest.mark.parametrize("mapping", [
    {"concept": "c", "path": "stale_after", "from": "2026-12-30", "to": "2026-12-30T00:00:00Z"},
    {"concept": "missing", "path": "stale_after", "from": "2026-12-31", "to": "2026-12-31T00:00:00Z"},
    {"concept": "c", "path": "sources[5].last_modified", "from": "2026-03-01", "to": "2026-03-01T00:00:00Z"},
])
def test_mapping_without_matching_legacy_date_is_operation_rejected(tbundle, mapping):
    with pytest.raises(ToolError) as err:
        _preview(tbundle, MAPPINGS[1:] + [mapping])
    assert err.value.code == "operation_rejected"


def test_bad_mapping_values_are_invalid_argument(tbundle):
    bad = dict(MAPPINGS[0], to="2026-12-31T23:59:59")  # no offset: never inferred
    with pytest.raises(ToolError) as err:
        _preview(tbundle, [bad])
    assert err.value.code == "invalid_argument"


def test_stale_base_is_rejected_without_writing(tbundle):
    p = _preview(tbundle, MAPPINGS)
    (tbundle / "other.md").write_text("---\ntype: Note\n---\n")
    before = tree_bytes(tbundle)
    with pytest.raises(ToolError) as err:
        _apply(tbundle, MAPPINGS, p)
    assert err.value.code == "operation_rejected" and err.value.retryable
    assert err.value.diagnostics[0]["field"] == "base_revision"
    assert tree_bytes(tbundle) == before


def test_wrong_digest_is_rejected_as_plan_mismatch(tbundle):
    p = _preview(tbundle, MAPPINGS)
    p = dict(p, plan_digest="sha256:" + "0" * 64)
    before = visible_bytes(tbundle)
    with pytest.raises(ToolError) as err:
        _apply(tbundle, MAPPINGS, p)
    assert err.value.code == "operation_rejected" and err.value.diagnostics[0]["field"] == "plan_digest"
    assert visible_bytes(tbundle) == before


def test_v01_bundle_cannot_be_upgraded(tmp_path):
    b = make_bundle(tmp_path / "v1", {"index.md": '---\nokf_version: "0.1"\n---\n', "c.md": DOC})
    with pytest.raises(ToolError) as err:
        _preview(b, MAPPINGS)
    assert err.value.code == "operation_rejected"
