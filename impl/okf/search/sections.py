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
from array import array
from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence, cast
from urllib.parse import quote

from knowspec.impl.errors import ToolError
from knowspec.impl.rules.bm25 import TermStat, average_length, bm25
from knowspec.impl.rules.ordering import first_page_by_score, section_hit_key
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
        text = section_text(lines, body_start_line, body_start_line + first, body_start_line + last)
        if not text.strip():
            continue
        sections.append(BodySection(markers[first], body_start_line + first, body_start_line + last, text))
    return sections


def section_text(lines: list[str], body_start_line: int, line_start: int, line_end: int) -> str:
    """The text of the section on file lines ``line_start`` to ``line_end`` of a body split at LF
    (``lines``) whose first line is file line ``body_start_line``: what :func:`split_sections`
    keeps, and what a hit cuts again (the index keeps the lines, not the text)."""
    first, last = line_start - body_start_line, line_end - body_start_line
    text = "\n".join(lines[first : last + 1])
    if last + 1 < len(lines) and text.endswith("\r"):
        text = text[:-1]  # the CR of the CRLF before the next section
    return text


# --- index ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SectionDoc:
    """One concept as the index needs it."""

    concept_id: str
    path: str
    title: str
    content_sha256: str
    sections: list[BodySection]


@dataclass
class SectionIndex:
    """Every section's place and weighted term frequencies, in machine-integer columns rather than
    an object per section and a dict entry per posting (a 5,000-concept bundle of 15,000 sections
    and 480,000 postings: 25 MiB as objects). The sections' text is not kept: a hit cuts it again
    from its concept's body (:func:`section_text`).

    Section ``s`` belongs to concept ``docs[doc_of[s]]`` (id, path, content digest) and spans file
    lines ``line_starts[s]`` to ``line_ends[s]``; term ``t`` (``terms[word]``) is held by the
    sections ``positions[offsets[t]:offsets[t + 1]]`` (ascending), with their weighted tf at the
    same places of ``tfs``.
    """

    docs: list[tuple[str, str, str]] = field(default_factory=list)
    doc_of: array = field(default_factory=lambda: array("I"))
    line_starts: array = field(default_factory=lambda: array("I"))
    line_ends: array = field(default_factory=lambda: array("I"))
    headings: list[str] = field(default_factory=list)
    lengths: array = field(default_factory=lambda: array("I"))
    terms: dict[str, int] = field(default_factory=dict)
    offsets: array = field(default_factory=lambda: array("Q", [0]))
    positions: array = field(default_factory=lambda: array("I"))
    tfs: array = field(default_factory=lambda: array("I"))
    avg_len: float = 1.0

    def __len__(self) -> int:
        return len(self.doc_of)

    def concept_id(self, position: int) -> str:
        return self.docs[self.doc_of[position]][0]

    def postings(self, term: str) -> tuple[int, int] | None:
        """The range of ``positions`` (and ``tfs``) that holds ``term``; None when no section does."""
        t = self.terms.get(term)
        return None if t is None else (self.offsets[t], self.offsets[t + 1])

    def nbytes(self) -> int:
        """About the bytes held (the runtime's cache budget): the columns, the words and headings."""
        columns = (self.doc_of, self.line_starts, self.line_ends, self.lengths, self.offsets, self.positions, self.tfs)
        text = sum(len(word) for word in self.terms) + sum(len(h) for h in self.headings)
        return sum(c.itemsize * len(c) for c in columns) + text + 100 * len(self.docs)


def build_index(docs: Iterable[SectionDoc], check_cancelled: Callable[[], None] = lambda: None) -> SectionIndex:
    """Tokenise every section once; over 100,000 sections or 1,000,000 tokens is resource_limit."""
    index = SectionIndex()
    held: list[array] = []  # per term id: its (position, tf) pairs, flattened at the end
    terms = index.terms
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
            if tokens_seen > MAX_INDEXED_TOKENS or len(index) >= MAX_SECTIONS:
                raise ToolError("resource_limit", BOUNDS_MESSAGE)
            position = len(index)
            if not index.docs or index.docs[-1][0] != doc.concept_id:
                index.docs.append((doc.concept_id, doc.path, doc.content_sha256))
            index.doc_of.append(len(index.docs) - 1)
            index.line_starts.append(section.line_start)
            index.line_ends.append(section.line_end)
            index.headings.append(section.heading)
            index.lengths.append(WEIGHT_BODY * n_body + WEIGHT_HEADING * n_heading + WEIGHT_TITLE * title_len)
            for term, tf in _weighted_tf(body_counts, heading_counts, title_counts).items():
                t = terms.setdefault(term, len(held))
                if t == len(held):
                    held.append(array("I"))
                pairs = held[t]
                pairs.append(position)
                pairs.append(tf)
    positions, tfs = array("I"), array("I")
    for pairs in held:
        positions.extend(pairs[0::2])
        tfs.extend(pairs[1::2])
        index.offsets.append(len(positions))
    index.positions, index.tfs = _narrowest(positions), _narrowest(tfs)
    index.avg_len = average_length(index.lengths)
    return index


def _narrowest(values: array) -> array:
    """``values`` two bytes an item when they all fit (a bundle's sections and tfs mostly do)."""
    return array("H", values) if not values or max(values) <= 0xFFFF else values


def _weighted_tf(body: Counter[str], heading: Counter[str], title: Counter[str]) -> dict[str, int]:
    """Each term's weighted tf in a section: body x1, heading x3, concept title x2 (the body's
    counts copied at C speed, the few heading and title terms added to them)."""
    tf = {term: WEIGHT_BODY * n for term, n in body.items()} if WEIGHT_BODY != 1 else dict(body)
    for counts, weight in ((heading, WEIGHT_HEADING), (title, WEIGHT_TITLE)):
        for term, n in counts.items():
            tf[term] = tf.get(term, 0) + weight * n
    return tf


# --- search --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScoredSection:
    position: int
    score: float


def score_sections(index: SectionIndex, terms: Sequence[str]) -> list[ScoredSection]:
    """Every section holding all terms, scored with BM25 and sorted by the contract order."""
    scored = _matches(index, terms)
    scored.sort(key=_hit_order(index))
    return scored


def _matches(index: SectionIndex, terms: Sequence[str]) -> list[ScoredSection]:
    """Every section holding all terms with its BM25 score, in section order."""
    spans = [index.postings(term) for term in terms]
    if not spans or any(span is None for span in spans):
        return []
    held = cast(list[tuple[int, int]], spans)
    dfs = [end - start for start, end in held]
    rarest_start, rarest_end = min(held, key=lambda span: span[1] - span[0])
    positions, tfs, n_docs = index.positions, index.tfs, len(index)
    scored = []
    for position in positions[rarest_start:rarest_end]:
        stats = []
        for (start, end), df in zip(held, dfs):
            at = bisect_left(positions, position, start, end)
            if at == end or positions[at] != position:
                break
            stats.append(TermStat(tfs[at], df))
        else:
            scored.append(ScoredSection(position, bm25(stats, index.lengths[position], index.avg_len, n_docs)))
    return scored


def _hit_order(index: SectionIndex) -> Callable[[ScoredSection], tuple[float, bytes, int]]:
    def key(hit: ScoredSection) -> tuple[float, bytes, int]:
        return section_hit_key(hit.score, index.concept_id(hit.position), index.line_starts[hit.position])

    return key


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


BodyOf = Callable[[str], tuple[str, int]]  # a concept ID -> its body and the body's first file line


def hit_dict(index: SectionIndex, hit: ScoredSection, terms: Sequence[str], text: str) -> dict:
    """One hit as the contract lists it; ``text`` is its section's (:func:`section_text`)."""
    concept_id, path, content_sha256 = index.docs[index.doc_of[hit.position]]
    line_start, line_end = index.line_starts[hit.position], index.line_ends[hit.position]
    return {
        "concept_id": concept_id,
        "path": path,
        "heading": index.headings[hit.position],
        "locator": locator(path, line_start, line_end),
        "line_start": line_start,
        "line_end": line_end,
        "content_sha256": content_sha256,
        "snippet": snippet(text, terms),
        "score": hit.score,
        "matched_terms": list(terms),
    }


def _page_texts(index: SectionIndex, page: list[ScoredSection], body_of: BodyOf) -> list[str]:
    """The page's sections' text, each concept's body split into lines once (a page can hold
    many sections of one long body)."""
    split: dict[int, tuple[list[str], int]] = {}
    texts = []
    for hit in page:
        doc = index.doc_of[hit.position]
        if doc not in split:
            body, body_start_line = body_of(index.docs[doc][0])
            split[doc] = (body.split("\n"), body_start_line)
        lines, body_start_line = split[doc]
        texts.append(section_text(lines, body_start_line, index.line_starts[hit.position], index.line_ends[hit.position]))
    return texts


def search_result(
    index: SectionIndex, query: str, terms: Sequence[str], limit: int, snapshot_revision: str, body_of: BodyOf
) -> dict:
    """The structured result of search_sections (key order as upstream); ``body_of`` gives the
    bodies of the snapshot the index was built from, which the hits' snippets are cut from."""
    page, total, truncated = first_page_by_score(_matches(index, terms), limit, lambda hit: hit.score,
                                                 _hit_order(index))
    return {
        "query": query,
        "terms": list(terms),
        "snapshot_revision": snapshot_revision,
        "total": total,
        "truncated": truncated,
        "hits": [hit_dict(index, hit, terms, text) for hit, text in zip(page, _page_texts(index, page, body_of))],
    }
