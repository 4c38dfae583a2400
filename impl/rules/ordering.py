"""Result truncation and the sort keys the tools share.

Every bounded tool answers with the first ``limit`` items of a fully sorted list plus ``total``
and ``truncated``; none of them returns a partial page silently. Concept IDs and paths sort
byte-wise on their UTF-8 form (Go string comparison), which differs from Python's code-point
order only for surrogates, so :func:`byte_key` encodes with ``surrogatepass`` to stay total.
"""

from __future__ import annotations

import heapq
import math
from typing import Any, Callable, Sequence, TypeVar

T = TypeVar("T")


def truncate(items: Sequence[T], limit: int) -> tuple[list[T], int, bool]:
    """The first ``limit`` items, the count of all items, and whether any were left out."""
    if limit < 0:
        raise ValueError("limit must not be negative")
    total = len(items)
    page = list(items[:limit])
    return page, total, total > len(page)


def first_page_by_score(items: Sequence[T], limit: int, score: Callable[[T], float],
                        key: Callable[[T], Any]) -> tuple[list[T], int, bool]:
    """``truncate(sorted(items, key=key), limit)`` for a ``key`` that puts a higher ``score``
    first, sorting only the items that can be on the page: those scoring at least the
    ``limit``-th best score (a search's many matches, a page of a few)."""
    if limit < 0:
        raise ValueError("limit must not be negative")
    total = len(items)
    candidates = list(items)
    if total > limit:
        cut = heapq.nlargest(limit, map(score, items))[-1] if limit > 0 else math.inf
        candidates = [item for item in items if score(item) >= cut]
    candidates.sort(key=key)
    page = candidates[:limit]
    return page, total, total > len(page)


def byte_key(text: str) -> bytes:
    """Byte-wise (UTF-8) sort key of a string, as Go compares strings."""
    return text.encode("utf-8", "surrogatepass")


def none_as_empty(value: str | None) -> str:
    """Null sorts as the empty string (relation_type of navigation edges)."""
    return "" if value is None else value


def search_hit_key(rank: int, concept_id: str) -> tuple[int, bytes]:
    """search_concepts order: higher match rank first, then concept ID byte-wise."""
    return (-rank, byte_key(concept_id))


def section_hit_key(score: float, concept_id: str, line_start: int) -> tuple[float, bytes, int]:
    """search_sections order: score descending, then concept ID, then first line."""
    return (-score, byte_key(concept_id), line_start)


_KIND_ORDER = {"navigation": 0, "relation": 1}


def edge_key(kind: str, source: str, target: str, relation_type: str | None) -> tuple[Any, ...]:
    """get_neighbors order: kind (navigation before relation), from, to, relation type."""
    return (
        _KIND_ORDER.get(kind, len(_KIND_ORDER)),
        byte_key(source),
        byte_key(target),
        byte_key(none_as_empty(relation_type)),
    )


def source_key(source_id: str, resource: str, title: str) -> tuple[bytes, bytes, bytes]:
    """Provenance source order in get_neighbors: id, resource, title."""
    return (byte_key(source_id), byte_key(resource), byte_key(title))
