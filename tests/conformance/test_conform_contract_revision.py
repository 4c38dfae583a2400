"""--contract git:REV: the suite judges a target against the contract a revision generated."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from knowspec.conformance.contract import ContractError, load_contract

CONTRACT = Path(__file__).resolve().parents[2] / "generated" / "contract.json"


def test_a_git_revision_gives_that_revisions_contract_and_names_it(tmp_path, monkeypatch):
    data = json.loads(CONTRACT.read_text())
    data["revision"]["contract-revision"] = 7
    data["tools"] = data["tools"][:3]
    (tmp_path / "generated").mkdir()
    (tmp_path / "generated" / "contract.json").write_text(json.dumps(data))
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "r7"], check=True)
    (tmp_path / "generated" / "contract.json").write_text("{}")  # the work tree is not what is read
    monkeypatch.chdir(tmp_path)
    contract = load_contract("git:HEAD")
    assert [t.name for t in contract.tools] == [t["name"] for t in data["tools"]]
    assert contract.source == "git:HEAD:generated/contract.json (contract revision 7)"


def test_an_unknown_revision_is_a_contract_error(tmp_path, monkeypatch):
    subprocess.run(["git", "-C", str(tmp_path), "init", "-q"], check=True)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ContractError, match="git:nope"):
        load_contract("git:nope")
