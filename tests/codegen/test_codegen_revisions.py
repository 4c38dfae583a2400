"""codegen refuses a breaking change without a new contract revision, and logs changes in CHANGES.md."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from knowspec.impl.cli import main
from test_spec_diff_cli import set_limit_maximum

SPEC = Path(__file__).resolve().parents[2] / "spec"


def bump(spec: Path) -> int:
    """Raise the copy's contract-revision by one, with its history entry; the new number."""
    path = spec / "REVISION.toml"
    text = path.read_text()
    number = int(re.search(r"^contract-revision = (\d+)$", text, re.M)[1]) + 1
    text = re.sub(r"^contract-revision = \d+$", f"contract-revision = {number}", text, flags=re.M)
    path.write_text(text + f'\n[[history]]\nrevision = {number}\ndate = "2026-12-02"\nsummary = "narrower search limit"\n')
    return number


@pytest.mark.slow
def test_breaking_change_needs_a_new_revision_and_lands_in_changes(tmp_path, capsys):
    spec, out = tmp_path / "spec", tmp_path / "generated"
    shutil.copytree(SPEC, spec, symlinks=False)
    assert main(["codegen", "--spec", str(spec), "--out", str(out)]) == 0
    before = (out / "contract.json").read_text()
    set_limit_maximum(spec, 50)
    capsys.readouterr()
    assert main(["codegen", "--spec", str(spec), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "without a new revision" in err and "search_concepts: input.bound_narrowed input.limit.maximum" in err
    assert (out / "contract.json").read_text() == before  # nothing was written
    number = bump(spec)
    assert main(["codegen", "--spec", str(spec), "--out", str(out)]) == 0
    changes = (out / "CHANGES.md").read_text()
    assert f"## Revision {number}: narrower search limit" in changes
    assert "[BREAKING for clients] input.bound_narrowed input.limit.maximum: 100 -> 50" in changes
    assert main(["codegen", "--check", "--spec", str(spec), "--out", str(out)]) == 0
