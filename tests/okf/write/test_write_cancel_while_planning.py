"""A write tool polls the call's cancellation while it reads, plans and validates the bundle,
as often as the bundle is big: a cancel (or an abandoned HTTP call) stops it within a few
documents, not after seconds of whole-bundle work.

Before, ``staged_validation`` got no checker from write_concept and the migration, the
migration and temporal plans looped over every document without one, and the bundle walk had
none: on databricks-okf a cancelled ``apply_v02_migration`` burned ~9 CPU seconds more.
"""

from __future__ import annotations

import pytest

from knowspec.impl import runtime as process
from knowspec.impl.context import CallContext
from knowspec.impl.errors import ToolError
from knowspec.impl.okf.tools import write as write_tools
from write_helpers import make_bundle, visible_bytes
from tool_args import tool_args

SMALL, BIG = 4, 400
DATED = "---\ntype: Note\ntitle: N{i}\nstale_after: 2026-12-31\n---\nBody {i}.\n"
INDEX_02 = '---\nokf_version: "0.2"\n---\n# Index\n'
INDEX_01 = '---\nokf_version: "0.1"\n---\n# Index\n'
LEGACY = "---\ntype: Note\ntitle: N{i}\ntimestamp: 2026-01-02T03:04:05Z\n---\nBody {i}.\n"


class _Counting(CallContext):
    """Counts the cancellation polls; cancels at poll ``cancel_at`` when given."""

    def __init__(self, cancel_at: int | None = None) -> None:
        super().__init__()
        self.polls, self.cancel_at = 0, cancel_at

    def check_cancelled(self, operation: str = "operation") -> None:
        self.polls += 1
        if self.cancel_at is not None and self.polls >= self.cancel_at:
            self.cancel_event.set()
        super().check_cancelled(operation)


def _bundle(root, n: int, template: str, index: str):
    entries = "".join(f"\n- [N{i}](n{i:03d}.md)" for i in range(n))
    return make_bundle(root, {"index.md": index + entries + "\n",
                              **{f"n{i:03d}.md": template.format(i=i) for i in range(n)}})


def _write_concept(bundle, ctx):
    args = tool_args("write_concept", bundle_path=str(bundle), concept_id="notes/new",
                     frontmatter="type: Note\ntitle: New\n", body="# New\n")
    return write_tools.write_concept(args, ctx)


def _preview_migration(bundle, ctx):
    args = tool_args("preview_v02_migration", bundle_path=str(bundle), timestamp_policy="preserve",
                     citation_mappings=[], generated_by="human:migrator")
    return write_tools.preview_v02_migration(args, ctx)


def _mappings(n: int) -> list[dict]:
    return [{"concept": f"n{i:03d}", "path": "stale_after", "from": "2026-12-31", "to": "2026-12-31T00:00:00Z"}
            for i in range(n)]


def _preview_temporal(bundle, ctx, n: int):
    args = tool_args("preview_temporal_upgrade", bundle_path=str(bundle), id="u-1", actor="human:ops",
                     mappings=_mappings(n))
    return write_tools.preview_temporal_upgrade(args, ctx)


def _patch_preview(bundle, ctx):
    args = tool_args("preview_concept_patch", bundle_path=str(bundle), actor="human:reviewer", operations=[
        {"kind": "set_lifecycle", "concept_id": "n000", "lifecycle": {"status": "deprecated", "stale_after": None}}])
    return write_tools.preview_concept_patch(args, ctx)


CASES = {
    "write_concept": (DATED, INDEX_02, lambda bundle, ctx, n: _write_concept(bundle, ctx)),
    "preview_v02_migration": (LEGACY, INDEX_01, lambda bundle, ctx, n: _preview_migration(bundle, ctx)),
    "preview_temporal_upgrade": (DATED, INDEX_02, _preview_temporal),
    "preview_concept_patch": (DATED, INDEX_02, lambda bundle, ctx, n: _patch_preview(bundle, ctx)),
}


@pytest.mark.parametrize("tool", CASES)
def test_cancellation_is_polled_in_proportion_to_the_bundle(tool, tmp_path):
    template, index, call = CASES[tool]
    polls = {}
    for n in (SMALL, BIG):
        ctx = _Counting()
        call(_bundle(tmp_path / f"{tool}-{n}", n, template, index), ctx, n)
        polls[n] = ctx.polls
    # at least one poll per 64 documents more (planner.CHECK_EVERY), whatever else polls
    assert polls[BIG] - polls[SMALL] >= (BIG - SMALL) // 64, polls


@pytest.mark.parametrize("tool", CASES)
def test_a_cancel_while_planning_ends_the_call_and_writes_nothing(tool, tmp_path):
    template, index, call = CASES[tool]
    bundle = _bundle(tmp_path / tool, BIG, template, index)
    before = visible_bytes(bundle)
    with pytest.raises(ToolError) as err:
        call(bundle, _Counting(cancel_at=3), BIG)
    assert err.value.code == "operation_cancelled"
    assert visible_bytes(bundle) == before


def test_the_temporal_plan_polls_per_concept_while_it_scans_and_while_it_rewrites(tmp_path):
    ctx = _Counting()
    out = _preview_temporal(_bundle(tmp_path / "t", BIG, DATED, INDEX_02), ctx, BIG)
    assert out.structured["status"] == "ready"
    assert ctx.polls >= 2 * BIG


def _write_linked_concept(bundle, ctx, links: int):
    body = "# Many links\n\n" + "".join(f"- [N{i % SMALL}](n{i % SMALL:03d}.md)\n" for i in range(links))
    args = tool_args("write_concept", bundle_path=str(bundle), concept_id="notes/linked",
                     frontmatter="type: Note\ntitle: Linked\n", body=body)
    return write_tools.write_concept(args, ctx)


def test_the_link_check_polls_within_one_concept_with_many_links(tmp_path):
    # One big concept: the link check polls per 1,024 links (diagnostics.LINKS_PER_CHECK), not
    # only between documents (a 5 MB body's links went ~1 s unchecked).
    polls = {}
    for links in (10, 10_240):
        ctx = _Counting()
        with process.activated():  # the base's findings are not kept from the other run
            _write_linked_concept(_bundle(tmp_path / f"l{links}", SMALL, DATED, INDEX_02), ctx, links)
        polls[links] = ctx.polls
    assert polls[10_240] - polls[10] >= 10, polls


def test_a_cancel_during_one_concepts_link_check_ends_the_call_and_writes_nothing(tmp_path):
    bundle = _bundle(tmp_path / "b", SMALL, DATED, INDEX_02)
    before = visible_bytes(bundle)
    ctx = _Counting()
    with process.activated():
        _write_linked_concept(_bundle(tmp_path / "probe", SMALL, DATED, INDEX_02), ctx, 10_240)
    with process.activated(), pytest.raises(ToolError) as err:  # cancelled halfway through the polls
        _write_linked_concept(bundle, _Counting(cancel_at=ctx.polls // 2), 10_240)
    assert err.value.code == "operation_cancelled"
    assert visible_bytes(bundle) == before
