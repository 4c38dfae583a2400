"""Contract revisions at codegen time: refuse an unannounced breaking change, keep CHANGES.md.

``spec/REVISION.toml`` numbers the contract (``contract-revision``) and keeps its history. When
the spec about to be generated breaks clients or implementations of the contract that
``generated/`` currently holds, the number must have gone up; the classified changes are then
added to ``generated/CHANGES.md`` under that revision. CHANGES.md is a log that accumulates over
regenerations, so ``codegen --check`` does not compare it.
"""

from __future__ import annotations

from pathlib import Path

from knowspec.codegen.contract_view import ContractView, from_generated_dir, from_spec_dir
from knowspec.codegen.spec_diff import Change, diff
from knowspec.codegen.spec_report import render_text
from knowspec.codegen.spec_rules import COMPATIBLE

CHANGES = "CHANGES.md"
HEADER = ("# Contract changes\n\nWritten by `knowspec codegen` each time the contract in spec/ changes: every "
          "change classified as `knowspec spec diff` does, under the contract revision it came with. Newest first.\n")


class UnannouncedBreakingChange(Exception):
    def __init__(self, number: int, breaking: list[Change]):
        lines = [f"the spec breaks the contract in generated/ (revision {number}) without a new revision:"]
        lines += [f"  {c.scope} {c.subject}: {c.kind} {c.where}" for c in breaking[:20]]
        lines.append("raise contract-revision in spec/REVISION.toml and add a [[history]] entry, then run codegen again")
        super().__init__("\n".join(lines))


def revision_files(spec_dir: Path, out_dir: Path) -> dict[str, str]:
    """CHANGES.md for generated/, after checking that a breaking change comes with a new revision."""
    previous = from_generated_dir(out_dir, label="generated/")
    existing = (out_dir / CHANGES).read_text("utf-8") if (out_dir / CHANGES).is_file() else HEADER
    if previous is None:
        return {CHANGES: existing}
    current = from_spec_dir(spec_dir, label="spec/")
    changes = diff(previous, current)
    breaking = [c for c in changes if c.cls != COMPATIBLE]
    if breaking and current.number <= previous.number:
        raise UnannouncedBreakingChange(previous.number, breaking)
    return {CHANGES: with_changes(existing, current, changes) if changes else existing}


def with_changes(log: str, current: ContractView, changes: list[Change]) -> str:
    """The log with a block of ``changes`` first under the current revision's heading (made when missing)."""
    heading = f"## Revision {current.number}"
    summary = next((h.get("summary", "") for h in current.revision.get("history", [])
                    if h.get("revision") == current.number), "")
    lines = render_text(changes, "generated/", "spec/").splitlines()[1:]  # drop the per-run count line
    block = "```\n" + "\n".join(lines) + "\n```\n"
    if heading in log:
        before, _, after = log.partition(heading)
        title, _, rest = after.partition("\n\n")
        return f"{before}{heading}{title}\n\n{block}\n{rest}"
    head, sep, rest = log.partition("\n## ")
    section = f"{heading}{': ' + summary if summary else ''}\n\n{block}"
    return head.rstrip("\n") + "\n\n" + section + ("\n## " + rest if sep else "")
