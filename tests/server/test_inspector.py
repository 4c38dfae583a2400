"""Interoperability with the MCP Inspector CLI (npm), which validates structuredContent strictly."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INSPECTOR = REPO / ".tools" / "node_modules" / ".bin" / "mcp-inspector"
SAMPLE = REPO / "examples" / "okf-sample"

pytestmark = [pytest.mark.inspector]


@pytest.fixture(autouse=True)
def inspector_installed():
    if not INSPECTOR.exists() or shutil.which("node") is None:
        reason = "MCP Inspector CLI not installed (scripts/setup installs it with npm)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


def inspector(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    server = [sys.executable, "-m", "knowspec.impl.cli", "serve", "--stdio", "--appdir", str(tmp_path)]
    return subprocess.run([str(INSPECTOR), "--cli", "-q", "--format", "json", *server, *args],
                          capture_output=True, text=True, timeout=120)


def test_lists_every_tool(tmp_path):
    out = inspector("--method", "tools/list", tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr + out.stdout
    assert len(json.loads(out.stdout)["result"]["tools"]) == 25


def test_strict_schema_lint_reports_nothing(tmp_path):
    out = inspector("--strict", "--method", "tools/list", tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr + out.stdout


def test_successful_call_passes_output_validation(tmp_path):
    out = inspector("--method", "tools/call", "--tool-name", "list_concepts",
                    "--tool-args-json", json.dumps({"bundle_path": str(SAMPLE)}), tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr + out.stdout
    result = json.loads(out.stdout)["result"]
    assert result["isError"] is False
    assert result["structuredContent"]["concepts"]


def test_error_result_passes_output_validation(tmp_path):
    """Exit 5 is the Inspector's 'tool returned isError'; 1 would be a schema complaint."""
    out = inspector("--method", "tools/call", "--tool-name", "search_concepts",
                    "--tool-args-json", json.dumps({"bundle_path": str(SAMPLE), "query": "x", "limit": 101}),
                    tmp_path=tmp_path)
    assert out.returncode == 5, out.stderr + out.stdout
    assert "resource_limit" in out.stdout + out.stderr
