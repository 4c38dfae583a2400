"""search_sections: BM25 AND-of-terms search over heading sections, with line locators.

Rules (spec/okf/contract/read.md §3.7):

- query: case fold + NFC, split on every rune that is not a letter, number or mark, dedupe in
  first-occurrence order; > 32 terms or a term > 4096 runes is ``resource_limit``;
- sections: a concept body cut at the body start and at each heading's first line (a heading on
  the first body line takes over the preamble), trailing newline excluded, blank ones dropped;
  lines are 1-based physical lines of the whole file;
- a section matches when every term occurs; weighted tf = section Markdown x1 + heading x3 +
  concept title x2, ``len`` = the same weighting of all tokens, BM25 k1 = 1.2, b = 0.75 with
  ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``; order score desc, concept ID, line_start;
- snippet: exact source text from 80 runes before the first token whose folded form is a term,
  at most 512 runes.

The index (tokens of every section) is built once per snapshot revision.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence
from urllib.parse import quote

from knowspec.impl.errors import ToolError
from knowspec.impl.rules.bm25 import TermStat, average_length, bm25
from knowspec.impl.rules.ordering import section_hit_key, truncate
from knowspec.impl.rules.text import has_letter_or_number, raw_tokens, unique_terms, words

MAX_TERMS = 32
MAX_TERM_RUNES = 4096
MAX_SECTIONS = 100_000
MAX_INDEXED_TOKENS = 1_000_000
MAX_HEADING_BYTES = 1024
MAX_SNIPPET_RUNES = 512
SNIPPET_LEAD_RUNES = 80
MAX_RESULT_BYTES = 1 << 20
WEIGHT_BODY, WEIGHT_HEADING, WEIGHT_TITLE = 1, 3, 2
BOUNDS_MESSAGE = "section search exceeds bounds"


# --- query ---------------------------------------------------------------------------------


def parse_query(query: str) -> list[str]:
    """The distinct folded terms of a query (1 to 512 characters: the schema bounds its length)."""
    if not has_letter_or_number(query):
        raise ToolError("schema_validation", "query must contain Unicode letters or numbers")
    terms = unique_terms(query)
    if not terms or len(terms) > MAX_TERMS or any(len(t) > MAX_TERM_RUNES for t in terms):
        raise ToolError("resource_limit", "query exceeds term bounds")
    return terms


# --- sections ------------------------------------------------------------------------------


@dataclass(frozen=True)
class BodySection:
    heading: str  # the heading's inline text, "" for the preamble
    line_start: int  # 1-based file line
    line_end: int  # 1-based file line, inclusive
    text: str  # exact source text, heading line included, trailing newline excluded


def split_sections(body: str, body_start_line: int, headings: Iterable[tuple[int, str]]) -> list[BodySection]:
    """Cut a body at its headings. ``headings`` are ``(file line, inline text)`` in order."""
    markers: dict[int, str] = {0: ""}
    for file_line, text in headings:
        # a heading on an already-marked line (the body start, usually) renames that marker
        markers[file_line - body_start_line] = text
    lines = body.split("\n")
    starts = sorted(i for i in markers if 0 <= i < len(lines))
    sections: list[BodySection] = []
    for n, first in enumerate(starts):
        last = (starts[n + 1] if n + 1 < len(starts) else len(lines)) - 1
        text = "\n".join(lines[first : last + 1])
        if last + 1 < len(lines) and text.endswith("\r"):
            text = text[:-1]  # the CR of the CRLF before the next section
        if not text.strip():
            continue
        sections.append(BodySection(markers[first], body_start_line + first, body_start_line + last, text))
    return sections


# --- index ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SectionDoc:
    """One concept as the index needs it."""

    concept_id: str
    path: str
    title: str
    content_sha256: str
    sections: list[BodySection]


@dataclass(frozen=True)
class IndexedSection:
    concept_id: str
    path: str
    section: BodySection
    content_sha256: str


@dataclass
class SectionIndex:
    """Sections with weighted term frequencies per term, their lengths and the mean length."""

    sections: list[IndexedSection] = field(default_factory=list)
    postings: dict[str, dict[int, int]] = field(default_factory=dict)
    lengths: list[int] = field(default_factory=list)
    avg_len: float = 1.0


def build_index(docs: Iterable[SectionDoc], check_cancelled: Callable[[], None] = lambda: None) -> SectionIndex:
    """Tokenise every section once; over 100,000 sections or 1,000,000 tokens is resource_limit."""
    index = SectionIndex()
    tokens_seen = 0
    for doc in docs:
        check_cancelled()
        title_counts = Counter(words(doc.title))
        title_len = sum(title_counts.values())
        for section in doc.sections:
            if len(section.heading.encode("utf-8", "surrogatepass")) > MAX_HEADING_BYTES:
                raise ToolError("resource_limit", BOUNDS_MESSAGE)
            body_counts = Counter(words(section.text))
            heading_counts = Counter(words(section.heading))
            n_body = sum(body_counts.values())
            n_heading = sum(heading_counts.values())
            tokens_seen += n_body + n_heading + title_len
            if tokens_seen > MAX_INDEXED_TOKENS or len(index.sections) >= MAX_SECTIONS:
                raise ToolError("resource_limit", BOUNDS_MESSAGE)
            position = len(index.sections)
            index.sections.append(IndexedSection(doc.concept_id, doc.path, section, doc.content_sha256))
            index.lengths.append(WEIGHT_BODY * n_body + WEIGHT_HEADING * n_heading + WEIGHT_TITLE * title_len)
            for term in body_counts.keys() | heading_counts.keys() | title_counts.keys():
                tf = (
                    WEIGHT_BODY * body_counts.get(term, 0)
                    + WEIGHT_HEADING * heading_counts.get(term, 0)
                    + WEIGHT_TITLE * title_counts.get(term, 0)
                )
                index.postings.setdefault(term, {})[position] = tf
    index.avg_len = average_length(index.lengths)
    return index


# --- search --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScoredSection:
    position: int
    score: float


def score_sections(index: SectionIndex, terms: Sequence[str]) -> list[ScoredSection]:
    """Every section holding all terms, scored with BM25 and sorted by the contract order."""
    postings = [index.postings.get(term, {}) for term in terms]
    if not postings or any(not p for p in postings):
        return []
    rarest = min(postings, key=len)
    n_docs = len(index.sections)
    scored = []
    for position in rarest:
        if all(position in p for p in postings):
            stats = [TermStat(p[position], len(p)) for p in postings]
            score = bm25(stats, index.lengths[position], index.avg_len, n_docs)
            scored.append(ScoredSection(position, score))

    def key(hit: ScoredSection):
        s = index.sections[hit.position]
        return section_hit_key(hit.score, s.concept_id, s.section.line_start)

    scored.sort(key=key)
    return scored


def snippet(text: str, terms: Sequence[str]) -> str:
    """Source text from 80 runes before the first term token, at most 512 runes."""
    wanted = set(terms)
    for token in raw_tokens(text):
        folded = token.norm if token.norm.isalnum() else next(iter(words(text[token.start : token.end])), "")
        if folded in wanted:
            start = max(0, token.start - SNIPPET_LEAD_RUNES)
            return text[start : start + MAX_SNIPPET_RUNES]
    return text[:MAX_SNIPPET_RUNES]


def locator(path: str, line_start: int, line_end: int) -> str:
    """Go ``url.URL{Path: path}.EscapedPath()`` plus ``#L<start>-L<end>``."""
    return f"{quote(path, safe=_PATH_SAFE)}#L{line_start}-L{line_end}"


# Characters Go's path escaping keeps besides ASCII letters and digits.
_PATH_SAFE = "-_.~$&+,/:;=@"


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def hit_dict(index: SectionIndex, hit: ScoredSection, terms: Sequence[str]) -> dict:
    s = index.sections[hit.position]
    sec = s.section
    return {
        "concept_id": s.concept_id,
        "path": s.path,
        "heading": sec.heading,
        "locator": locator(s.path, sec.line_start, sec.line_end),
        "line_start": sec.line_start,
        "line_end": sec.line_end,
        "content_sha256": s.content_sha256,
        "snippet": snippet(sec.text, terms),
        "score": hit.score,
        "matched_terms": list(terms),
    }


def search_result(
    index: SectionIndex, query: str, terms: Sequence[str], limit: int, snapshot_revision: str
) -> dict:
    """The structured result of search_sections (key order as upstream)."""
    scored = score_sections(index, terms)
    page, total, truncated = truncate(scored, limit)
    return {
        "query": query,
        "terms": list(terms),
        "snapshot_revision": snapshot_revision,
        "total": total,
        "truncated": truncated,
        "hits": [hit_dict(index, hit, terms) for hit in page],
    }
