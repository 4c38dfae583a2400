"""Preview -> apply binding: CAS on the revision, plan digest, replay, cancellation."""

from __future__ import annotations

import os

import pytest

from knowspec.impl.context import CallContext
from knowspec.impl.errors import ToolError
from write_helpers import apply, commit_leftovers, preview, tree_bytes, visible_bytes

C = "arch/cache"
OP = [{"kind": "set_lifecycle", "concept_id": C, "lifecycle": {"status": "stable", "stale_after": None}}]


def test_edit_between_preview_and_apply_is_a_revision_conflict(bundle):
    p = preview(bundle, OP)
    (bundle / "other.md").write_text("---\ntype: Note\n---\nedited\n")
    before = tree_bytes(bundle)
    with pytest.raises(ToolError) as err:
        apply(bundle, OP, p["base_revision"], p["plan_digest"])
    assert err.value.code == "revision_conflict" and err.value.retryable
    assert err.value.diagnostics[0]["code"] == "recovery_step"
    assert err.value.diagnostics[0]["field"] == "expected_revision"
    assert tree_bytes(bundle) == before


def test_conflict_after_an_earlier_commit_still_refuses_a_different_plan(bundle):
    p1 = preview(bundle, OP)
    other = [{"kind": "set_lifecycle", "concept_id": C, "lifecycle": {"status": "deprecated", "stale_after": None}}]
    p2 = preview(bundle, other)
    apply(bundle, OP, p1["base_revision"], p1["plan_digest"])
    before = tree_bytes(bundle)
    with pytest.raises(ToolError) as err:
        apply(bundle, other, p2["base_revision"], p2["plan_digest"])
    assert err.value.code == "revision_conflict"
    assert tree_bytes(bundle) == before


@pytest.mark.parametrize("mutate", [
    lambda d: "sha256:" + ("0" if d[7] != "0" else "1") + d[8:],
    lambda d: d.upper(),
])
def test_wrong_plan_digest_is_plan_mismatch_and_writes_nothing(bundle, mutate):
    p = preview(bundle, OP)
    before = tree_bytes(bundle)
    with pytest.raises(ToolError) as err:
        apply(bundle, OP, p["base_revision"], mutate(p["plan_digest"]))
    assert err.value.code == "plan_mismatch"
    assert tree_bytes(bundle) == before


def test_changed_operations_with_old_digest_is_plan_mismatch(bundle):
    p = preview(bundle, OP)
    changed = [{"kind": "set_lifecycle", "concept_id": C, "lifecycle": {"status": "deprecated", "stale_after": None}}]
    with pytest.raises(ToolError) as err:
        apply(bundle, changed, p["base_revision"], p["plan_digest"])
    assert err.value.code == "plan_mismatch"


def test_non_canonical_expected_revision_is_invalid_revision(bundle):
    p = preview(bundle, OP)
    with pytest.raises(ToolError) as err:
        apply(bundle, OP, "sha256:xyz", p["plan_digest"])
    assert err.value.code == "invalid_revision"


def test_repeated_apply_replays_the_first_receipt(bundle):
    p = preview(bundle, OP)
    first = apply(bundle, OP, p["base_revision"], p["plan_digest"])
    after_first = visible_bytes(bundle)
    second = apply(bundle, OP, p["base_revision"], p["plan_digest"])
    assert second == first
    assert visible_bytes(bundle) == after_first


def test_replay_survives_later_unrelated_edits(bundle):
    p = preview(bundle, OP)
    first = apply(bundle, OP, p["base_revision"], p["plan_digest"])
    (bundle / "other.md").write_text("---\ntype: Note\n---\nlater\n")
    assert apply(bundle, OP, p["base_revision"], p["plan_digest"]) == first


def test_preview_writes_nothing_and_is_deterministic(bundle):
    before = tree_bytes(bundle)
    assert preview(bundle, OP) == preview(bundle, OP)
    assert tree_bytes(bundle) == before
    assert not (bundle / ".okf").exists()


def test_plan_digest_depends_on_actor_and_base(bundle):
    a = preview(bundle, OP)
    b = preview(bundle, OP, actor="human:someone-else")
    assert a["plan_digest"] != b["plan_digest"] and a["result_revision"] == b["result_revision"]
    (bundle / "other.md").write_text("---\ntype: Note\n---\nmoved\n")
    assert preview(bundle, OP)["plan_digest"] != a["plan_digest"]


def test_planner_rejection_is_structured_in_preview_and_apply(bundle):
    ops = [{"kind": "remove_source", "concept_id": "missing/concept", "source_id": "x"}]
    p = preview(bundle, ops)
    assert p["status"] == "rejected" and p["result_revision"] is None
    assert any(d["severity"] == "ERROR" for d in p["diagnostics"])
    a = apply(bundle, ops, p["base_revision"], p["plan_digest"])
    assert a["status"] == "rejected" and a["changed_paths"] == []
    assert a["base_revision"] == a["result_revision"] == p["base_revision"]


class _CancelAfter(CallContext):
    def __init__(self, checks: int) -> None:
        super().__init__()
        self.left = checks

    def check_cancelled(self, operation: str = "operation") -> None:
        if self.left <= 0:
            self.cancel_event.set()
        self.left -= 1
        super().check_cancelled(operation)


def test_cancellation_before_the_commit_point_changes_nothing(bundle):
    p = preview(bundle, OP)
    before = visible_bytes(bundle)
    outcomes = []
    for checks in range(0, 40):
        try:
            result = apply(bundle, OP, p["base_revision"], p["plan_digest"], ctx=_CancelAfter(checks))
        except ToolError as err:
            assert err.code == "operation_cancelled" and err.retryable
            assert visible_bytes(bundle) == before
            assert not commit_leftovers(bundle)
            outcomes.append("cancelled")
            continue
        assert result["status"] == "applied"
        outcomes.append("applied")
        break
    assert outcomes[0] == "cancelled" and outcomes[-1] == "applied" and len(outcomes) > 2


def test_private_store_files_are_invisible_to_readers(bundle):
    from knowspec.impl.okf.model import load_snapshot

    p = preview(bundle, OP)
    apply(bundle, OP, p["base_revision"], p["plan_digest"])
    assert (bundle / ".okf" / "receipts").is_dir()
    snap = load_snapshot(str(bundle), CallContext())
    assert not any(path.startswith(".okf") for path in snap.files)
    assert sorted(snap.concepts.keys()) == ["arch/cache", "other"]


def test_strict_warnings_on_the_edited_document_are_reported_but_do_not_block(tmp_path):
    from write_helpers import make_bundle

    b = make_bundle(tmp_path / "w", {"c.md": "---\ntype: Note\nverified: {by: 'team:x', at: 2026-01-01T00:00:00Z}\n---\n"})
    p = preview(b, [{"kind": "set_lifecycle", "concept_id": "c", "lifecycle": {"status": "stable", "stale_after": None}}])
    assert p["status"] == "applicable"
    assert [d["code"] for d in p["diagnostics"]] == ["actor_invalid"]
    assert p["diagnostics"][0]["severity"] == "WARN"


def test_errors_elsewhere_in_the_bundle_block_a_patch(tmp_path):
    """The staged bundle must be conformant as a whole: a base ERROR in another file rejects."""
    from write_helpers import make_bundle

    b = make_bundle(tmp_path / "e", {"c.md": "---\ntype: Note\n---\n", "broken.md": "---\ntitle: no type\n---\n"})
    p = preview(b, [{"kind": "set_lifecycle", "concept_id": "c", "lifecycle": {"status": "stable", "stale_after": None}}])
    assert p["status"] == "rejected" and p["result_revision"] is None
    assert ("broken.md", "concept_type_invalid") in {(d["file"], d["code"]) for d in p["diagnostics"]}
