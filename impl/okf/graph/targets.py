"""Navigation targets as the graph renders read them, shared by the two renders of one call."""

from __future__ import annotations

from typing import Any, Callable

from knowspec.impl.okf.parsing.links import TargetMemo

NavigationTargets = Callable[[str], list[tuple[str, bool]]]  # concept id -> (target id, exists), body order


def shared_targets(snapshot: Any) -> NavigationTargets:
    """``snapshot.navigation_targets``, each concept's links read once: a first get_semantic_graph
    renders the legacy and the v0.2 documents, and both list every concept's references.

    Every concept's targets are read together at the first lookup, so a call answered from kept
    documents reads none, and a render's do not lie among its transient objects, whose arenas
    they would keep resident after the call (databricks-okf: ~6 MiB; benchmarks/okf_cold_memory.py)."""
    memo: dict[str, list[tuple[str, bool]]] = {}
    resolved: TargetMemo = {}

    def targets(concept_id: str) -> list[tuple[str, bool]]:
        if not memo:
            for each in snapshot.concepts:
                memo[each] = snapshot.navigation_targets(each, resolved)
        found = memo.get(concept_id)
        if found is None:
            found = memo[concept_id] = snapshot.navigation_targets(concept_id, resolved)
        return found

    return targets
