"""The README's tool status table says which tools are real: it must match the server."""

from __future__ import annotations

import re
from pathlib import Path

from knowspec.impl.server.pipeline import ToolRuntime

README = Path(__file__).resolve().parent.parent / "README.md"


def expected_table() -> str:
    runtime = ToolRuntime()
    rows = ["| Family | Tool | Status |", "|---|---|---|"]
    for name, real in runtime.implemented().items():
        entry = runtime.entries[name]
        rows.append(f"| {entry.family} | `{name}` | {'implemented' if real else 'not implemented (answers not_implemented)'} |")
    return "\n".join(rows)


def test_status_table_matches_the_server():
    text = README.read_text(encoding="utf-8")
    match = re.search(r"<!-- status-table -->\n(.*?)\n<!-- /status-table -->", text, re.S)
    assert match, "README lacks the status-table markers"
    assert match.group(1).strip() == expected_table(), "update README's table to:\n" + expected_table()


def test_readme_names_the_two_commands():
    text = README.read_text(encoding="utf-8")
    assert "scripts/demo" in text and "scripts/test" in text
