"""The ``no_mixed_reads_during_apply`` check: it passes on the real server and on a toy that locks
its applies, and fails on a toy whose listings run through an apply's file-by-file rewrite."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from knowspec.conformance.config import RunConfig
from knowspec.conformance.events import CheckFinished
from knowspec.conformance.runner import run_to_end
from toy_apply_server import contract
from toy_paths import TARGETS

CHECK = "no_mixed_reads_during_apply"
KNOWSPEC = shutil.which("knowspec") or str(Path(sys.executable).parent / "knowspec")


def _run(target: str, **options) -> CheckFinished:
    finished = run_to_end(RunConfig(target=target, family="okf", checks=(CHECK,), **options))
    [result] = finished.results
    return result


@pytest.fixture(scope="module")
def apply_contract(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("contract") / "contract.json"
    path.write_text(json.dumps(contract()), encoding="utf-8")
    return path


def _toy(variant: str) -> str:
    return f"stdio:{sys.executable} {TARGETS / 'toy_apply_server.py'} --variant {variant}"


@pytest.mark.slow
def test_passes_on_a_toy_that_locks_its_applies(apply_contract):
    result = _run(_toy("good"), contract_path=apply_contract)
    assert result.status == "passed", result.failure.message if result.failure else result.reason


@pytest.mark.slow
def test_fails_on_a_toy_whose_reads_run_through_an_apply(apply_contract):
    result = _run(_toy("torn"), contract_path=apply_contract)
    assert result.status == "failed", result.reason
    assert "mixed" in result.failure.message and result.failure.rule


@pytest.mark.slow
def test_passes_on_the_real_server():
    if not Path(KNOWSPEC).exists():
        pytest.skip("knowspec console script not installed")
    result = _run(f"stdio:{KNOWSPEC} serve --stdio")
    assert result.status == "passed", result.failure.message if result.failure else result.reason
