"""search_concepts: literal, case-folded substring search over a snapshot's concepts.

The rule (seed 000, spec/okf/contract/read.md §3.5): fold + NFC both the query and every searched field,
then test plain substring containment. A concept's ``match`` is its highest-ranked matching
field (id 6, title 5, description 4, any single tag 3, body 1; ``type`` is not searched), and
hits sort by rank descending, then canonical ID byte-wise.

This module holds the rule and a plain reference scan (:func:`search`); the handler answers from
``search.concepts_index.ConceptSearchIndex``, built once per snapshot revision, which gives the
same answers without re-folding or re-scanning every field on every call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from knowspec.impl.errors import ToolError
from knowspec.impl.rules.ordering import search_hit_key, truncate
from knowspec.impl.rules.text import case_fold

# Field name -> rank; ``match`` reports the name of the best one.
FIELD_RANKS: dict[str, int] = {"id": 6, "title": 5, "description": 4, "tags": 3, "body": 1}


@dataclass(frozen=True)
class SearchableConcept:
    """The searchable text of one concept, already folded (valid string fields only)."""

    id: str
    title: str
    description: str
    tags: tuple[str, ...]
    body: str

    @classmethod
    def of(cls, concept_id: str, title: str, description: str, tags: Iterable[str], body: str) -> "SearchableConcept":
        return cls(case_fold(concept_id), case_fold(title), case_fold(description),
                   tuple(case_fold(t) for t in tags), case_fold(body))


def best_match(query: str, concept: SearchableConcept) -> str | None:
    """The highest-priority field containing the folded ``query``, or None.

    Each tag is tested on its own, so a query cannot match across two tags.
    """
    if query in concept.id:
        return "id"
    if query in concept.title:
        return "title"
    if query in concept.description:
        return "description"
    if any(query in tag for tag in concept.tags):
        return "tags"
    if query in concept.body:
        return "body"
    return None


def normalise_query(query: str) -> str:
    """Refuse a blank query (the schema's maxLength bounds its length) and return its folded form."""
    if not query.strip():
        raise ToolError("schema_validation", "query must contain non-whitespace text")
    return case_fold(query)


@dataclass(frozen=True)
class SearchResult:
    """Ordered ``(canonical id, match field)`` hits with the contract's total and truncated."""

    hits: list[tuple[str, str]]
    total: int
    truncated: bool


def search(
    index: Sequence[tuple[str, SearchableConcept]],
    folded_query: str,
    limit: int,
    check_cancelled: Callable[[], None] = lambda: None,
) -> SearchResult:
    """Every concept whose fields contain the query, sorted by rank then ID, cut to ``limit``.

    ``index`` pairs the canonical (unfolded) ID, used for ordering and output, with its folded
    fields.
    """
    matches: list[tuple[str, str]] = []
    for position, (concept_id, fields) in enumerate(index):
        if position % 256 == 0:
            check_cancelled()
        field = best_match(folded_query, fields)
        if field is not None:
            matches.append((concept_id, field))
    matches.sort(key=lambda hit: search_hit_key(FIELD_RANKS[hit[1]], hit[0]))
    page, total, truncated = truncate(matches, limit)
    return SearchResult(page, total, truncated)
