"""search_concepts restated: casefold + NFC literal substring, field priority, then ID bytes."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from knowspec.conformance.fixtures.model import Bundle, Concept, render_body

# Field priority from seed 000: id, title, description, tags, body (higher wins).
MATCH_RANK = {"id": 6, "title": 5, "description": 4, "tags": 3, "body": 1}


def fold(text: str) -> str:
    """Unicode case folding, then NFC, applied to query and field alike."""
    return unicodedata.normalize("NFC", text.casefold())


def id_bytes(concept_id: str) -> bytes:
    return concept_id.encode("utf-8")


def best_match(concept: Concept, query: str) -> str | None:
    """The highest-priority field containing the folded query, or ``None``."""
    q = fold(query)
    if not q:
        return None
    fields = (("id", [concept.id]), ("title", [concept.title]), ("description", [concept.description]),
              ("tags", list(concept.tags)), ("body", [render_body(concept)]))
    for name, values in fields:
        if any(v and q in fold(v) for v in values):
            return name
    return None


@dataclass(frozen=True)
class ExpectedSearch:
    hits: tuple[tuple[str, str], ...]   # (concept id, match) in order, already limited
    total: int

    @property
    def truncated(self) -> bool:
        return self.total > len(self.hits)


def expected_search(bundle: Bundle, query: str, limit: int) -> ExpectedSearch:
    matched = [(c.id, m) for c in bundle.concepts if (m := best_match(c, query)) is not None]
    matched.sort(key=lambda hit: (-MATCH_RANK[hit[1]], id_bytes(hit[0])))
    return ExpectedSearch(tuple(matched[:limit]), len(matched))
