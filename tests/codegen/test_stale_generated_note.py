"""`knowspec serve` from a checkout says when spec/ changed since generated/ was made."""

from __future__ import annotations

import shutil
from pathlib import Path

from knowspec.impl.cli import stale_generated_note

ROOT = Path(__file__).resolve().parents[2]


def _checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    shutil.copytree(ROOT / "spec", root / "spec")
    (root / "generated").mkdir(parents=True)
    shutil.copy(ROOT / "generated" / "contract.json", root / "generated" / "contract.json")
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    return root


def test_a_checkout_whose_generated_code_matches_its_spec_gets_no_note(tmp_path):
    assert stale_generated_note(_checkout(tmp_path)) is None


def test_an_edited_or_added_spec_file_is_named(tmp_path):
    root = _checkout(tmp_path)
    table = root / "spec" / "okf" / "tools.toml"
    table.write_text(table.read_text() + "\n# a revision in progress\n")
    (root / "spec" / "okf" / "schemas" / "new_tool.input.schema.json").write_text("{}")
    note = stale_generated_note(root)
    assert note is not None and "spec/okf/schemas/new_tool.input.schema.json and 1 more" in note
    assert "knowspec codegen" in note


def test_an_installed_package_has_no_spec_to_drift_from(tmp_path):
    root = _checkout(tmp_path)
    (root / "pyproject.toml").unlink()
    (root / "spec" / "errors.toml").write_text("changed")
    assert stale_generated_note(root) is None


def test_a_missing_contract_says_to_run_codegen(tmp_path):
    root = _checkout(tmp_path)
    (root / "generated" / "contract.json").unlink()
    assert "run `knowspec codegen`" in stale_generated_note(root)
