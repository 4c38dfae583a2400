"""What every benchmark result records beside its figures (``benchmarks/common.py``)."""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import common  # noqa: E402


def test_library_versions_name_what_is_installed_and_none_for_what_is_not():
    versions = common.library_versions(("pydantic", "mcp", "knowspec-no-such-distribution"))
    assert versions == {"pydantic": version("pydantic"), "mcp": version("mcp"), "knowspec-no-such-distribution": None}


def test_a_result_file_carries_the_library_versions(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    path = common.write_results("probe", {"figure": 1.0})
    written = json.loads(path.read_text())
    assert written["figure"] == 1.0
    assert written["libraries"]["mcp"] == version("mcp")
    assert set(written["libraries"]) == set(common.MEASURED_LIBRARIES)
