"""Truncation invariants of bounded reads: at most ``limit`` items, total >= len, truncated iff more."""

from __future__ import annotations

from typing import Any

# The array that ``total``/``truncated`` describe, per tool; others are found by shape.
TRUNCATED_ARRAY = {"search_concepts": "hits", "get_neighbors": "edges", "search_sections": "hits"}
LIMITED_ARRAY_NAMES = ("hits", "edges", "results", "items", "sections", "concepts", "entities")


def limited_array(tool: str, out: dict, wrap: str = "") -> str | None:
    if tool in TRUNCATED_ARRAY and isinstance(out.get(TRUNCATED_ARRAY[tool]), list):
        return TRUNCATED_ARRAY[tool]
    if wrap and isinstance(out.get(wrap), list):
        return wrap
    names = [n for n in LIMITED_ARRAY_NAMES if isinstance(out.get(n), list)]
    return names[0] if len(names) == 1 else None


def truncation_violations(tool: str, out: Any, args: dict, default_limit: int | None, wrap: str = "") -> list[str]:
    if not isinstance(out, dict):
        return []
    name = limited_array(tool, out, wrap)
    if name is None:
        return []
    items = out[name]
    problems = []
    limit = args.get("limit", default_limit) if isinstance(args, dict) else default_limit
    if isinstance(limit, int) and not isinstance(limit, bool) and len(items) > limit:
        problems.append(f"{name} holds {len(items)} items, more than limit {limit}")
    total, truncated = out.get("total"), out.get("truncated")
    if isinstance(total, int) and not isinstance(total, bool):
        if total < len(items):
            problems.append(f"total {total} < len({name}) {len(items)}")
        if isinstance(truncated, bool) and truncated != (total > len(items)):
            problems.append(f"truncated is {truncated} but total {total} vs {len(items)} returned")
        if isinstance(limit, int) and total > len(items) and len(items) < limit:
            problems.append(f"only {len(items)} of {total} returned although limit is {limit}")
    return problems
