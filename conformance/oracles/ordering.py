"""Named orderings of result arrays, restated per tool from the spec prose.

Each rule maps a tool's successful ``structuredContent`` (and the call's arguments) to a list
of ``(array name, items, key function, descending)``; a response is well ordered when each
array equals itself sorted by its key. Tools with no rule here are not ordering-checked.
"""

from __future__ import annotations

from typing import Any, Callable

from knowspec.conformance.oracles.neighbors import edge_key
from knowspec.conformance.oracles.search import MATCH_RANK

Key = Callable[[Any], Any]


def _b(value: Any) -> bytes:
    return ("" if value is None else str(value)).encode()


def _search_hits(out: dict, args: dict) -> list[tuple[str, list, Key, bool]]:
    return [("hits", out.get("hits", []),
             lambda h: (-MATCH_RANK.get(h.get("match"), 0), _b(h.get("concept", {}).get("id"))), False)]


def _neighbors(out: dict, args: dict) -> list[tuple[str, list, Key, bool]]:
    return [
        ("edges", out.get("edges", []),
         lambda e: edge_key(e.get("kind"), e.get("from", ""), e.get("to", ""), e.get("relation_type")), False),
        ("sources", out.get("sources", []),
         lambda s: (_b(s.get("id")), _b(s.get("resource")), _b(s.get("title"))), False),
    ]


def _results(out: dict, wrap: str) -> list:
    value = out.get(wrap or "results", [])
    return value if isinstance(value, list) else []


def _doc_search(out: dict, args: dict, wrap: str = "results") -> list[tuple[str, list, Key, bool]]:
    items = _results(out, wrap)
    methods = {i.get("method") for i in items if isinstance(i, dict) and i.get("method")}
    # fts scores are bm25-like (smaller is better); vector and fused scores: larger is better.
    # help_search carries no method: it is full text over the help pool.
    descending = bool(methods) and methods != {"fts"}
    return [(wrap or "results", items, lambda i: i.get("score", 0), descending)]


def _doc_links(out: dict, args: dict, wrap: str = "results") -> list[tuple[str, list, Key, bool]]:
    return [(wrap or "results", _results(out, wrap), lambda i: i.get("confidence", 0), True)]


ORDERINGS: dict[str, Callable[..., list[tuple[str, list, Key, bool]]]] = {
    "search_concepts": _search_hits,
    "get_neighbors": _neighbors,
    "doc_search": _doc_search,
    "help_search": _doc_search,
    "doc_links": _doc_links,
}


def ordering_violations(tool: str, out: dict, args: dict, wrap: str = "") -> list[str]:
    """Human-readable violations of the tool's ordering rules (empty when well ordered)."""
    rule = ORDERINGS.get(tool)
    if rule is None or not isinstance(out, dict):
        return []
    arrays = rule(out, args, wrap) if tool in ("doc_search", "help_search", "doc_links") else rule(out, args)
    problems = []
    for name, items, key, descending in arrays:
        if not isinstance(items, list):
            continue
        try:
            keys = [key(i) for i in items]
        except (AttributeError, TypeError):
            problems.append(f"{name}: items are not objects")
            continue
        for i in range(len(keys) - 1):
            a, b = keys[i], keys[i + 1]
            if (a < b) if descending else (a > b):
                problems.append(f"{name}[{i}] and {name}[{i + 1}] are out of order")
                break
    return problems
