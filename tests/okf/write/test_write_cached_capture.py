"""Writes capture through the read side's cached snapshot: everything the walk refused or
noticed, the cached capture refuses or notices too."""

from __future__ import annotations

import pytest

from knowspec.impl.errors import ToolError
from knowspec.impl.okf.write import patch_flow
from knowspec.impl.okf.write.revision import revision_of
from write_helpers import apply, preview, tree_bytes, visible_bytes

C = "arch/cache"
OP = [{"kind": "set_lifecycle", "concept_id": C, "lifecycle": {"status": "stable", "stale_after": None}}]


def test_a_symlink_made_after_the_preview_still_blocks_the_store(bundle, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    p = preview(bundle, OP)  # the bundle is now cached and watched
    (bundle / "ext").symlink_to(outside)
    (bundle / ".okf").mkdir(exist_ok=True)
    with pytest.raises(ToolError) as err:
        apply(bundle, OP, p["base_revision"], p["plan_digest"])
    assert err.value.code == "operation_rejected"
    assert list(outside.iterdir()) == []


def test_an_edit_after_the_apply_planned_is_caught_by_the_stores_own_capture(bundle, monkeypatch):
    """The compare-and-swap under the writers' lock sees a change the flow's capture did not."""
    planned = patch_flow.plan_change_set

    def plan_then_someone_edits(*args, **kwargs):
        plan = planned(*args, **kwargs)
        (bundle / "other.md").write_text("---\ntype: Note\n---\nedited meanwhile\n")
        return plan

    p = preview(bundle, OP)
    monkeypatch.setattr(patch_flow, "plan_change_set", plan_then_someone_edits)
    with pytest.raises(ToolError) as err:
        apply(bundle, OP, p["base_revision"], p["plan_digest"])
    assert err.value.code == "revision_conflict"
    assert b"edited meanwhile" in tree_bytes(bundle)["other.md"]


def test_successive_applies_publish_the_previewed_revisions(bundle):
    """Each preview after an apply plans on the published bundle (no stale cached capture)."""
    for date in ("2031-01-01", "2032-01-01", "2033-01-01"):
        ops = [{"kind": "set_lifecycle", "concept_id": C, "lifecycle": {"status": "stable", "stale_after": date}}]
        p = preview(bundle, ops)
        assert p["base_revision"] == revision_of(visible_bytes(bundle))
        a = apply(bundle, ops, p["base_revision"], p["plan_digest"])
        assert a["status"] == "applied" and a["result_revision"] == revision_of(visible_bytes(bundle))


def test_the_store_sizes_the_result_from_the_kept_records_without_reading_the_other_files(bundle, monkeypatch):
    """The result's limits need sizes, which the capture kept: reading every file again to
    measure it made each apply cost the whole bundle."""
    from knowspec.impl.okf.bundle import captured_files

    for n in range(20):
        (bundle / f"extra-{n}.md").write_text(f"---\ntype: Note\ntitle: Extra {n}\n---\nBody {n}\n")
    ops = [{"kind": "set_lifecycle", "concept_id": C, "lifecycle": {"status": "stable", "stale_after": "2031-01-01"}}]
    p = preview(bundle, ops)
    read = []
    real = captured_files._read_verified
    monkeypatch.setattr(captured_files, "_read_verified", lambda record: read.append(record.path) or real(record))
    assert apply(bundle, ops, p["base_revision"], p["plan_digest"])["status"] == "applied"
    assert not [path for path in read if path.startswith("extra-")]
