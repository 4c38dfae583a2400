"""validate_bundle's strict temporal findings, restated from the frontmatter the suite wrote.

read.md §2: strict mode warns with ``stale_after_invalid``, ``source_field_invalid``,
``usage_window_invalid`` and ``usage_window_order`` under the profile's format, and with an
``as_of`` a reached boundary gives WARN ``stale`` (spec_ref ``okf-v0.2#5.5``). The contract names
the codes, not which one a source's window with a malformed end takes, so either of
``usage_window_invalid`` and ``source_field_invalid`` is accepted there. Field paths, messages
and how many findings one fault gives are not judged; a finding with one of these codes on a file
with no such fault is.
"""

from __future__ import annotations

from knowspec.conformance.fixtures.model import Bundle, Concept, Window
from knowspec.conformance.oracles.okf_reads import stale_value, valid_temporal, valid_window

TEMPORAL_CODES = frozenset({"stale_after_invalid", "source_field_invalid", "usage_window_invalid",
                            "usage_window_order", "stale"})
STALE_SPEC_REF = "okf-v0.2#5.5"


def _window_fault(window: Window | None, profile: str, own: bool) -> frozenset[str] | None:
    """The codes one of which a window's fault must give, or None when it has none."""
    if window is None or valid_window(window, profile):
        return None
    if all(valid_temporal(end, profile) is not None for end in window):
        return frozenset({"usage_window_order"})
    return frozenset({"usage_window_invalid", "source_field_invalid"} if own else {"usage_window_invalid"})


def expected_findings(concept: Concept, profile: str, as_of: str | None) -> list[frozenset[str]]:
    """One entry per fault of the concept's file: the codes any one of which reports it."""
    out = []
    if concept.stale_after and valid_temporal(concept.stale_after, profile) is None:
        out.append(frozenset({"stale_after_invalid"}))
    if as_of is not None and stale_value(concept.stale_after, as_of, profile, tool="validate_bundle"):
        out.append(frozenset({"stale"}))
    for source in concept.sources:
        if source.last_modified and valid_temporal(source.last_modified, profile) is None:
            out.append(frozenset({"source_field_invalid"}))
        fault = _window_fault(source.usage_window, profile, own=True)
        if fault:
            out.append(fault)
    fault = _window_fault(concept.usage_window, profile, own=False)
    if fault:
        out.append(fault)
    return out


def strict_problems(diagnostics: list, bundle: Bundle, profile: str, as_of: str | None) -> list[str]:
    """Each fault reported by a WARN of one of its codes; no temporal code on a file without a
    fault it could report; ``stale`` with its spec_ref."""
    found: dict[str, set[str]] = {}
    problems = []
    for d in diagnostics:
        if isinstance(d, dict) and d.get("code") in TEMPORAL_CODES:
            if d.get("severity") != "WARN":
                problems.append(f"{d.get('file')}: {d.get('code')} is {d.get('severity')}, not WARN")
            if d.get("code") == "stale" and d.get("spec_ref") != STALE_SPEC_REF:
                problems.append(f"{d.get('file')}: stale has spec_ref {d.get('spec_ref')!r}, not {STALE_SPEC_REF!r}")
            found.setdefault(str(d.get("file")), set()).add(d["code"])
    for concept in bundle.concepts:
        faults = expected_findings(concept, profile, as_of)
        codes = found.pop(concept.path, set())
        problems += [f"{concept.path}: no WARN {' or '.join(sorted(f))}" for f in faults if not f & codes]
        allowed = frozenset().union(*faults)
        problems += [f"{concept.path}: {code} without such a fault" for code in sorted(codes - allowed)]
    problems += [f"{file}: {sorted(codes)} on a file with no such fault" for file, codes in found.items()]
    return problems
