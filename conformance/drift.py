"""Contract drift: a run judged against an older contract revision (``--contract git:REV``) says
which breaking changes lie between that revision and the contract this suite ships, and which of
them the run observed on the wire.

The target's own contract cannot be read over MCP, so the drift is not "what the target changed":
it is the classified breaking changes of ``knowspec spec diff REV <shipped>`` (the same rules,
codegen's pure diff), each with the failed cases that correspond to it, plus the failed cases no
change explains (the target breaks REV for another reason). A change no check can see, or one
the older contract gives nothing to judge, says why it went unobserved.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable

from knowspec.codegen.contract_view import ContractView
from knowspec.codegen.spec_diff import Change, diff
from knowspec.codegen.spec_rules import COMPATIBLE
from knowspec.conformance.contract import Contract

# a spec-diff rule (or its scope prefix) -> the checks that can see such a change on the wire
OBSERVERS: dict[str, tuple[str, ...]] = {
    "tool.text_changed": ("text_encoding", "text_fallback"),
    "tool.removed": ("tools_list",),
    "tool.added": ("tools_list",),
    "tool.ordering_changed": ("result_ordering",),
    "input.": ("tools_list", "input_valid_accepted", "input_invalid_rejected", "boundary_limits"),
    "output.": ("tools_list", "output_schema", "input_valid_accepted"),  # the last judges successes too
}


def observers(kind: str) -> tuple[str, ...]:
    return OBSERVERS.get(kind) or next((v for k, v in OBSERVERS.items() if k.endswith(".") and kind.startswith(k)), ())


def view_of(contract: Contract, label: str) -> ContractView:
    """The conformance contract as the spec diff's view (tools and error codes: what contract.json holds)."""
    return ContractView(label=label, revision=dict(contract.revision),
                        tools={t.name: dataclasses.asdict(t) for t in contract.tools},
                        error_codes=dict(contract.error_codes))


def revision_number(contract: Contract) -> int:
    return contract.number


def contract_drift(judged: Contract, shipped: Contract, results: Iterable[Any]) -> dict[str, Any]:
    """The drift section of a report, or ``{}`` when ``judged`` is not older than ``shipped``.

    ``judged`` and ``shipped`` come narrowed to the run's family and tools; ``results`` are the
    run's ``CheckFinished`` events."""
    if revision_number(judged) >= revision_number(shipped):
        return {}
    changes = diff(view_of(judged, judged.source), view_of(shipped, shipped.source))
    breaking = [c for c in changes if c.cls != COMPATIBLE]
    failed = [r for r in results if r.status in ("failed", "error")]
    explained: set[str] = set()
    entries = []
    for change in breaking:
        cases = [r.case_id for r in failed if r.check_id in observers(change.kind) and r.tool == change.subject]
        explained.update(cases)
        entries.append({"kind": change.kind, "class": change.cls, "scope": change.scope, "subject": change.subject,
                         "where": change.where, "old": change.old, "new": change.new,
                         "observed": bool(cases), "cases": cases,
                         "why": "" if cases else _unobserved(change, judged)})
    return {"judged": judged.source, "judged_revision": revision_number(judged),
            "suite": shipped.source, "suite_revision": revision_number(shipped),
            "breaking": entries, "compatible": len(changes) - len(breaking),
            "unexplained": [r.case_id for r in failed if r.case_id not in explained]}


def _unobserved(change: Change, judged: Contract) -> str:
    checks = observers(change.kind)
    if not checks:
        return "no check of this suite sees this kind of change on the wire"
    if change.kind == "tool.text_changed" and change.scope == "tool":
        try:
            tool = judged.tool(change.subject)
        except KeyError:
            tool = None
        if tool is not None and tool.text_fallback != "json":
            return (f"not judged: {change.subject}'s text fallback is {tool.text_fallback} in the judged contract, "
                    "which states no encoding for it")
    return f"no failed case of {', '.join(checks)} on {change.subject} in this run"
