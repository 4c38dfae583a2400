"""Opt-in, slow: the server built at an older revision passes that revision's whole OKF contract,
today's server fails it exactly on the breaking changes the contract drift lists.

``KNOWSPEC_REVISION_DEMO=<folder>`` names where revision 245a297 is checked out (``git worktree
add``) and installed into its own virtualenv; a second run reuses both. 245a297 already publishes
applies atomically for readers, and its contract still has plain-JSON text fallbacks (Go's bytes
came in 2c72a25, on the other side of that merge): the 14 ``tool.text_changed`` changes of
``knowspec spec diff git:245a297 spec`` are the only breaking ones.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
OLD = "245a297"
PLACE = os.environ.get("KNOWSPEC_REVISION_DEMO")

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
    done = subprocess.run(args, cwd=REPO, capture_output=True, text=True)
    return done.returncode, json.loads(report.read_text())


def _spec_diff() -> dict:
    knowspec = Path(sys.executable).parent / "knowspec"
    done = subprocess.run([str(knowspec), "spec", "diff", f"git:{OLD}", "spec", "--json"], cwd=REPO,
                          capture_output=True, text=True)
    return json.loads(done.stdout)


def _breaking(changes: list[dict]) -> list[tuple]:
    return sorted((c["kind"], c["subject"], c["where"]) for c in changes if c["class"] == "breaking")


def test_old_build_passes_its_contract_and_todays_server_fails_exactly_the_observable_drift(tmp_path):
    """Every OKF check of the suite, judged against the old revision's contract."""
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
    assert _breaking(drift["breaking"]) == _breaking(_spec_diff()["changes"])
    json_tools = {r["tool"] for r in new["results"] if r["check"] == "text_encoding"}
    assert failed == sorted(f"text_encoding[{tool}]" for tool in json_tools)
