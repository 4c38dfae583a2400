"""Per-tool and per-check counts, shared by the JSON and HTML reports."""

from __future__ import annotations

from typing import Any

from knowspec.conformance.causes import SharedCause
from knowspec.conformance.events import CheckFinished

STATUSES = ("passed", "info", "failed", "error", "skipped", "accepted")


def counts_by(results: tuple[CheckFinished, ...], key: str) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = {}
    for r in results:
        name = getattr(r, key) or "(server)"
        row = table.setdefault(name, dict.fromkeys(STATUSES, 0))
        row[r.status] += 1
    return dict(sorted(table.items()))


def result_dict(r: CheckFinished, cause: str | None = None) -> dict[str, Any]:
    """One case for the JSON report; ``cause``: the key of the shared cause its failure belongs to."""
    return {"check": r.check_id, "tool": r.tool, "rule": r.rule, "status": r.status,
            "duration": round(r.duration, 3), "calls": r.calls, "successes": r.successes, "reason": r.reason,
            "failure": r.failure.to_dict() if r.failure else None, "cause": cause}


def shared_cause_dicts(groups: list[SharedCause]) -> list[dict[str, Any]]:
    return [{"cause": g.cause.key, "summary": g.cause.summary, "failures": len(g.cases), "checks": list(g.checks),
             "tools": list(g.tools), "cases": list(g.cases)} for g in groups]
