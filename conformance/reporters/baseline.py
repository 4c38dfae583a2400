"""Accepted failures: a JSON file of ``{"accepted": [{"check": id, "tool": name, "why": ...}]}``.

A failing case listed in the baseline is reported as ``accepted`` and does not fail the run;
a listed case that now passes is reported in the run summary so the baseline can shrink.
"""

from __future__ import annotations

import json
from pathlib import Path

from knowspec.conformance.events import CheckFinished, RunFinished
from knowspec.conformance.reporters import report_path


class BaselineError(Exception):
    pass


def load_baseline(path: Path | None) -> set[tuple[str, str]]:
    if path is None:
        return set()
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise BaselineError(f"cannot read baseline {path}: {exc}") from exc
    entries = data.get("accepted", []) if isinstance(data, dict) else []
    return {(str(e.get("check", "")), str(e.get("tool", ""))) for e in entries if isinstance(e, dict)}


def stale_entries(baseline: set[tuple[str, str]], results: tuple[CheckFinished, ...]) -> list[tuple[str, str]]:
    """Baseline entries whose case ran and passed: candidates for removal."""
    passed = {(r.check_id, r.tool) for r in results if r.status in ("passed", "info")}
    return sorted(baseline & passed)


def write_baseline(path: Path, finished: RunFinished) -> None:
    """Write every failing case of a run as accepted (a starting point for a new target)."""
    accepted = [{"check": r.check_id, "tool": r.tool, "why": r.failure.message[:200] if r.failure else r.reason}
                for r in finished.results if r.status in ("failed", "error", "accepted")]
    report_path(path).write_text(json.dumps({"accepted": accepted}, indent=2, ensure_ascii=False) + "\n",
                          encoding="utf-8")
