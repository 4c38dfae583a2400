"""A contract diff for people (text, Markdown for a pull request) and for machines (JSON)."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from knowspec.codegen.spec_diff import Change
from knowspec.codegen.spec_rules import BREAKING_CLIENTS, BREAKING_IMPLEMENTATIONS, CLASSES, COMPATIBLE

LABEL = {BREAKING_CLIENTS: "BREAKING for clients", BREAKING_IMPLEMENTATIONS: "BREAKING for implementations",
         COMPATIBLE: "compatible"}
RANK = {cls: i for i, cls in enumerate(CLASSES)}


def counts(changes: list[Change]) -> dict[str, int]:
    return {cls: sum(1 for c in changes if c.cls == cls) for cls in CLASSES}


def exit_code(changes: list[Change]) -> int:
    """0 when nothing breaks, 1 when anything breaks clients or implementations."""
    return 1 if any(c.cls != COMPATIBLE for c in changes) else 0


def _groups(changes: list[Change]) -> list[tuple[str, list[Change]]]:
    """Subjects with a breaking change first, then by name; inside, breaking first. A subject's
    reworded descriptions become one line (they are many, and never break anything)."""
    by_subject: dict[str, list[Change]] = defaultdict(list)
    for c in _prose_folded(changes):
        by_subject[f"{c.scope} {c.subject}"].append(c)
    ordered = sorted(by_subject.items(), key=lambda kv: (min(RANK[c.cls] for c in kv[1]), kv[0]))
    return [(name, sorted(items, key=lambda c: (RANK[c.cls], c.where, c.kind))) for name, items in ordered]


def _prose_folded(changes: list[Change]) -> list[Change]:
    prose: dict[tuple[str, str, str], list[Change]] = defaultdict(list)
    kept = []
    for c in changes:
        if c.kind.endswith("prose_changed"):
            prose[(c.scope, c.subject, c.kind)].append(c)
        else:
            kept.append(c)
    for (scope, subject, kind), items in prose.items():
        where = items[0].where if len(items) == 1 else f"{len(items)} places, first {items[0].where or '(whole)'}"
        kept.append(Change(scope, subject, where, kind))
    return kept


def _line(c: Change) -> str:
    values = "" if c.old is None and c.new is None else f": {_short(c.old)} -> {_short(c.new)}"
    return f"{c.kind} {c.where or '(whole)'}{values}"


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if value is not None else "none"
    return text if len(text) <= 60 else text[:57] + "..."


def render_text(changes: list[Change], old: str, new: str) -> str:
    n = counts(changes)
    lines = [f"contract diff {old} -> {new}: {n[BREAKING_CLIENTS]} breaking for clients, "
             f"{n[BREAKING_IMPLEMENTATIONS]} breaking for implementations, {n[COMPATIBLE]} compatible"]
    for name, items in _groups(changes):
        lines.append(f"{name}")
        lines.extend(f"  [{LABEL[c.cls]}] {_line(c)}" for c in items)
    if not changes:
        lines.append("no changes")
    return "\n".join(lines) + "\n"


def render_markdown(changes: list[Change], old: str, new: str) -> str:
    n = counts(changes)
    verdict = "breaks clients or implementations" if exit_code(changes) else "is compatible"
    lines = [f"### Contract diff `{old}` → `{new}`", "",
             f"This revision {verdict}: **{n[BREAKING_CLIENTS]}** breaking for clients, "
             f"**{n[BREAKING_IMPLEMENTATIONS]}** breaking for implementations, {n[COMPATIBLE]} compatible.", ""]
    if changes:
        lines += ["| subject | class | change | where | old → new |", "|---|---|---|---|---|"]
        for name, items in _groups(changes):
            for c in items:
                lines.append(f"| `{name}` | {LABEL[c.cls]} | `{c.kind}` | `{c.where or '(whole)'}` | "
                             f"{_short(c.old).replace('|', '/')} → {_short(c.new).replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def render_json(changes: list[Change], old: str, new: str) -> str:
    return json.dumps({
        "old": old, "new": new, "counts": counts(changes), "exit_code": exit_code(changes),
        "changes": [{"scope": c.scope, "subject": c.subject, "where": c.where, "kind": c.kind, "class": c.cls,
                     "old": c.old, "new": c.new} for c in changes],
    }, indent=2, ensure_ascii=False) + "\n"


RENDERERS = {"text": render_text, "markdown": render_markdown, "json": render_json}
