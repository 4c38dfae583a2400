"""codegen refuses a breaking change without a new contract revision, and logs changes in CHANGES.md."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from knowspec.impl.cli import main
from test_spec_diff_cli import set_limit_maximum

SPEC = Path(__file__).resolve().parents[2] / "spec"


def bump(spec: Path, number: int) -> None:
    path = spec / "REVISION.toml"
    text = path.read_text().replace("contract-revision = 1", f"contract-revision = {number}")
    path.write_text(text + f'\n[[history]]\nrevision = {number}\ndate = "2026-12-02"\nsummary = "narrower search limit"\n')


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
    bump(spec, 2)
    assert main(["codegen", "--spec", str(spec), "--out", str(out)]) == 0
    changes = (out / "CHANGES.md").read_text()
    assert "## Revision 2: narrower search limit" in changes
    assert "[BREAKING for clients] input.bound_narrowed input.limit.maximum: 100 -> 50" in changes
    assert main(["codegen", "--check", "--spec", str(spec), "--out", str(out)]) == 0
