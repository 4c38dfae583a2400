"""Opt-in, slow: the server built at an older revision passes that revision's contract, today's
server fails it exactly on the breaking changes the contract drift lists.

``KNOWSPEC_REVISION_DEMO=<folder>`` names where revision 003f28b (the last one before the OKF
text fallbacks became Go's bytes) is checked out (``git worktree add``) and installed into its
own virtualenv; a second run reuses both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
OLD = "003f28b"
PLACE = os.environ.get("KNOWSPEC_REVISION_DEMO")
CHECKS = ("text_encoding", "text_fallback", "tools_list", "output_schema")

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not PLACE, reason=f"set KNOWSPEC_REVISION_DEMO=<folder> to build revision {OLD} there and run the "
                      "contract-revision demo (slow: a virtualenv install and two conformance runs)")]


def _old_server() -> str:
    tree = Path(PLACE) / f"ks-{OLD}"
    if not (tree / ".git").exists():
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), OLD], check=True)
    venv = tree / ".venv"
    if not (venv / "bin" / "knowspec").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "-e", ".[test]"], cwd=tree, check=True)
    return f"{venv / 'bin' / 'knowspec'} serve --stdio --appdir {tree / '.knowspec'}"


def _conform(server: str, report: Path) -> tuple[int, dict]:
    knowspec = Path(sys.executable).parent / "knowspec"
    args = [str(knowspec), "conform", "--target", f"stdio:{server}", "--contract", f"git:{OLD}",
            "--family", "okf", "--max-examples", "5", "--json", str(report)]
    for check_id in CHECKS:
        args += ["--check", check_id]
    done = subprocess.run(args, cwd=REPO, capture_output=True, text=True)
    return done.returncode, json.loads(report.read_text())


def test_old_build_passes_its_contract_and_todays_server_fails_exactly_the_observable_drift(tmp_path):
    """The schema and text checks only (CHECKS): a full run of the old build also fails
    no_mixed_reads_during_apply, a real defect of that build (its applies tore reads)."""
    code, old = _conform(_old_server(), tmp_path / "old.json")
    assert code == 0, [r for r in old["results"] if r["status"] not in ("passed", "skipped")]
    assert not any(c["observed"] for c in old["contract_drift"]["breaking"])

    today = f"{Path(sys.executable).parent / 'knowspec'} serve --stdio --appdir {tmp_path / 'app'}"
    code, new = _conform(today, tmp_path / "new.json")
    drift = new["contract_drift"]
    failed = sorted(f"{r['check']}[{r['tool']}]" for r in new["results"] if r["status"] == "failed")
    observed = sorted(case for c in drift["breaking"] for case in c["cases"])
    assert code == 1
    assert failed == observed and drift["unexplained"] == []
    assert {c["kind"] for c in drift["breaking"]} == {"tool.text_changed"}
    json_tools = {r["tool"] for r in new["results"] if r["check"] == "text_encoding"}
    assert failed == sorted(f"text_encoding[{tool}]" for tool in json_tools)
