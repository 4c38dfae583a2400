"""The machine-readable report: run metadata, counts per tool and per check, every case."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from knowspec.conformance.causes import cause_by_case, shared_causes
from knowspec.conformance.events import RunFinished, RunStarted
from knowspec.conformance.reporters import report_path
from knowspec.conformance.reporters.summary import counts_by, result_dict, shared_cause_dicts


class JsonReporter:
    def __init__(self, path: Path) -> None:
        self.path = report_path(path)
        self.started: RunStarted | None = None

    def handle(self, event: Any) -> None:
        if isinstance(event, RunStarted):
            self.started = event
        elif isinstance(event, RunFinished):
            self.path.write_text(json.dumps(build(self.started, event), indent=2, ensure_ascii=False) + "\n",
                                 encoding="utf-8")


def build(started: RunStarted | None, finished: RunFinished) -> dict[str, Any]:
    meta = {}
    if started is not None:
        meta = {"target": started.target, "era": started.era, "family": started.family, "seed": started.seed,
                "contract": started.contract}
    if finished.protocol:
        meta["protocol"] = finished.protocol
    groups = shared_causes(finished.results)
    grouped = cause_by_case(groups)
    return {"knowspec_conformance_report": 1, "run": meta, "exit_code": finished.exit_code,
            "duration": round(finished.duration, 3), "counts": finished.counts(),
            "by_tool": counts_by(finished.results, "tool"), "by_check": counts_by(finished.results, "check_id"),
            "stale_baseline": [{"check": c, "tool": t} for c, t in finished.stale_baseline],
            "shared_causes": shared_cause_dicts(groups),
            "skipped_areas": [{"area": a, "why": w} for a, w in finished.skipped_areas],
            "strict_failed": [a for a, _ in finished.strict_failed],
            "timings": finished.timings,
            "contract_drift": finished.drift or None,
            "unreachable": finished.unreachable or None,
            "interrupted": finished.interrupted or None,
            "results": [result_dict(r, grouped.get(r.case_id)) for r in finished.results]}
