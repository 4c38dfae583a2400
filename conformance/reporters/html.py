"""One self-contained HTML page: counts per tool and per check, then each failure in full."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from knowspec.conformance.causes import SharedCause, shared_causes
from knowspec.conformance.events import RunFinished, RunStarted
from knowspec.conformance.reporters import report_path
from knowspec.conformance.reporters.summary import STATUSES, counts_by

STYLE = """body{font:14px system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}th{background:#f4f4f4}
.failed,.error{color:#b00020;font-weight:bold}.passed{color:#176f2c}.info{color:#1f4fa8}.skipped,.accepted{color:#777}
pre{background:#f7f7f7;padding:8px;overflow:auto;max-height:24em}details{margin:.5em 0}"""


class HtmlReporter:
    def __init__(self, path: Path) -> None:
        self.path = report_path(path)
        self.started: RunStarted | None = None

    def handle(self, event: Any) -> None:
        if isinstance(event, RunStarted):
            self.started = event
        elif isinstance(event, RunFinished):
            self.path.write_text(render(self.started, event), encoding="utf-8")


def _table(title: str, rows: dict[str, dict[str, int]]) -> str:
    head = "".join(f"<th>{s}</th>" for s in STATUSES)
    body = "".join(
        f"<tr><td>{html.escape(name)}</td>" + "".join(
            f'<td class="{s if row[s] else ""}">{row[s]}</td>' for s in STATUSES) + "</tr>"
        for name, row in rows.items())
    return f"<h2>{title}</h2><table><tr><th>{title.split()[-1]}</th>{head}</tr>{body}</table>"


def _shared_causes(groups: list[SharedCause]) -> str:
    """Faults many failures share, first: fixing one clears its whole group."""
    if not groups:
        return ""
    e = html.escape
    items = "".join(f"<li><span class='failed'>{len(g.cases)} failures</span> ({len(g.checks)} check(s), "
                    f"{len(g.tools)} tool(s)): {e(g.cause.summary)}<br><small>{e(', '.join(g.cases))}</small></li>"
                    for g in groups)
    return f"<h2>Shared causes</h2><ul>{items}</ul>"


def render(started: RunStarted | None, finished: RunFinished) -> str:
    e = html.escape
    meta = ""
    if started is not None:
        meta = (f"<p>target <code>{e(started.target)}</code>, era {e(started.era)}, family {e(started.family)},"
                f" seed {started.seed}, contract <code>{e(started.contract)}</code></p>")
    counts = ", ".join(f"{k}: {v}" for k, v in sorted(finished.counts().items()))
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>knowspec conformance</title>"
             f"<style>{STYLE}</style></head><body><h1>knowspec conformance report</h1>{meta}"
             f"<p>exit code {finished.exit_code}; {e(counts)}; {finished.duration:.1f}s</p>",
             f"<p class='failed'>no check ran: {e(finished.unreachable)}</p>" if finished.unreachable else "",
             f"<p class='failed'>{e(finished.interrupted)}</p>" if finished.interrupted else "",
             _shared_causes(shared_causes(finished.results)),
             _table("Per tool", counts_by(finished.results, "tool")),
             _table("Per check", counts_by(finished.results, "check_id")), "<h2>Cases</h2>"]
    for r in finished.results:
        label = f'<span class="{r.status}">{r.status}</span> {e(r.case_id)}'
        if r.failure is None:
            extra = f" <small>{e(r.reason)}</small>" if r.reason else ""
            parts.append(f"<div>{label}{extra}</div>")
            continue
        f = r.failure
        parts.append(
            f"<details open><summary>{label}: {e(f.message[:300])}</summary><p>rule: {e(f.rule)}</p>"
            f"<p>smallest failing input:</p><pre>{e(json.dumps(f.to_dict()['arguments'], indent=2, ensure_ascii=False))}</pre>"
            f"<p>response:</p><pre>{e(json.dumps(f.to_dict()['response'], indent=2, ensure_ascii=False))}</pre>"
            f"</details>")
    parts.append("</body></html>")
    return "\n".join(parts)
