"""Fixtures: the toy contract on disk and target strings for the toy server's variants."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "targets"))

from toy_paths import toy_target  # noqa: E402
from toy_schemas import contract  # noqa: E402


@pytest.fixture(scope="session")
def toy_contract(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("contract") / "contract.json"
    path.write_text(json.dumps(contract()), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def target_for():
    return toy_target
