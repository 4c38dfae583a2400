"""The README's main command: `knowspec demo` builds the pools and calls tools over real stdio."""

from __future__ import annotations

import subprocess
import sys


def test_demo_builds_pools_and_calls_tools_over_stdio(tmp_path):
    out = subprocess.run([sys.executable, "-m", "knowspec.impl.cli", "demo", "--appdir", str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert any(line.startswith("built help pool netsim-help: 20 topics") for line in lines)
    assert any('IMPORTDOC into database demo: {"result": true' in line for line in lines)
    assert "over stdio: 25 tools" in out.stdout
    calls = [line.strip() for line in lines if line.startswith("  ")]
    assert len(calls) == 8
    assert all("-> ok" in line for line in calls[:-1]), calls
    assert calls[0].startswith('list_concepts({"bundle_path": "<sample bundle>"})'), calls  # as called, not ({})
    assert calls[-1].endswith("isError resource_limit: tool input exceeds the advertised schema limits")
    again = subprocess.run([sys.executable, "-m", "knowspec.impl.cli", "demo", "--appdir", str(tmp_path)],
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "built help pool" not in again.stdout  # set-up is reused
