"""Fixtures for the OKF write-side tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from write_helpers import CONCEPT, INDEX, make_bundle


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return make_bundle(tmp_path / "b", {"index.md": INDEX, "arch/cache.md": CONCEPT, "other.md": "---\ntype: Note\n---\nx\n"})
