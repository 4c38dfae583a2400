"""Event consumers: console progress and the JUnit, JSON, HTML, text and baseline files."""

from __future__ import annotations

from pathlib import Path


def report_path(path: Path | str) -> Path:
    """``path`` with its parent folders made now, before the run: a report written after minutes
    of checks never fails on a folder that does not exist (an unwritable place fails at once)."""
    resolved = Path(path)
    resolved.parent.mkdir(parents=True, exist_ok=True)
    return resolved
