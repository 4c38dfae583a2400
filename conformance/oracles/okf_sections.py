"""search_sections restated from spec/okf/contract/read.md §3.7: sections, BM25 hits, snippets, fingerprint.

The suite computes every value a hit carries from the bytes it wrote, so a server answering wrong
line ranges, headings, scores or snippets (however well sorted) is caught. Block parsing covers
the Markdown the fixtures write: YAML frontmatter, ATX headings (closing ``#``s optional), Setext
headings, fenced code blocks (whose ``#`` lines are code), indented code and thematic breaks;
heading text is taken as plain text (the fixtures write one-line headings without inline markup,
and no block quotes or lists). Pure functions but :func:`captured_files`, which reads back the
bundle the suite wrote; nothing here comes from the server's code.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import stat
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

from knowspec.conformance.oracles.go_encoding import go_marshal

K1, B = 1.2, 0.75
WEIGHT_BODY, WEIGHT_HEADING, WEIGHT_TITLE = 1, 3, 2
SNIPPET_LEAD, SNIPPET_RUNES = 80, 512
NOT_CONCEPTS = ("index.md", "log.md")   # basenames of indexes and logs, at any depth


# ---- words ------------------------------------------------------------------------------------

def normalise(text: str) -> str:
    """Unicode case folding, then NFC: the one form terms and tokens are compared in."""
    return unicodedata.normalize("NFC", text.casefold())


def _is_word_rune(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "LNM"


def token_spans(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) rune offsets of each maximal run of letters, numbers and marks."""
    start = -1
    for i, ch in enumerate(text):
        if _is_word_rune(ch):
            if start < 0:
                start = i
        elif start >= 0:
            yield start, i
            start = -1
    if start >= 0:
        yield start, len(text)


def words(text: str) -> list[str]:
    """The normalised word tokens of a text (normalised first, then split, as the query is)."""
    folded = normalise(text)
    return [folded[a:b] for a, b in token_spans(folded)]


def query_terms(query: str) -> list[str]:
    """The query's distinct normalised words in first-occurrence order."""
    return list(dict.fromkeys(words(query)))


# ---- sections ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Section:
    heading: str      # the heading's text, "" for a preamble or a document without headings
    line_start: int   # 1-based physical line of the whole file
    line_end: int     # inclusive
    text: str         # exact source, heading line included, final line terminator excluded


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_ATX_CLOSING = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_SETEXT_UNDERLINE = re.compile(r"^ {0,3}(?:=+|-+)[ \t]*$")
_THEMATIC_BREAK = re.compile(r"^ {0,3}(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})$")
_INDENTED_CODE = re.compile(r"^(?: {4}|\t)")


def physical_lines(text: str) -> list[str]:
    """LF-delimited lines (a CRLF line keeps its CR); no phantom line after a final LF."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def body_start(lines: list[str]) -> int:
    """0-based index of the first body line: after the closing ``---`` of a leading frontmatter."""
    if not lines or lines[0].rstrip("\r") != "---":
        return 0
    for i in range(1, len(lines)):
        if lines[i].rstrip("\r") == "---":
            return i + 1
    return len(lines)


def heading_lines(lines: list[str]) -> list[tuple[int, str]]:
    """(index into ``lines``, heading text) of each ATX or Setext heading outside code that holds
    text: the upstream server cuts at a heading with content lines only, and its text is the
    lines' inline text joined without a break (a multi-line Setext heading reads "oneline")."""
    found: list[tuple[int, str]] = []
    fence: tuple[str, int] | None = None
    paragraph: list[int] = []
    for i, raw in enumerate(lines):
        line = raw[:-1] if raw.endswith("\r") else raw
        if fence is not None:
            closing = _FENCE.match(line)
            if closing and closing.group(1)[0] == fence[0] and len(closing.group(1)) >= fence[1] \
                    and not closing.group(2).strip():
                fence = None
            continue
        opening = _FENCE.match(line)
        if opening and not (opening.group(1)[0] == "`" and "`" in opening.group(2)):
            fence, paragraph = (opening.group(1)[0], len(opening.group(1))), []
            continue
        if not line.strip():
            paragraph = []
            continue
        atx = _ATX.match(line)
        if atx:
            text = _ATX_CLOSING.sub("", atx.group(2) or "").strip()
            if text:  # an empty heading ("#", "## ##") holds no line of text and marks no section
                found.append((i, text))
            paragraph = []
            continue
        if paragraph and _SETEXT_UNDERLINE.match(line):  # its lines' text joined as they are, no break
            found.append((paragraph[0], "".join(lines[j].strip() for j in paragraph)))
            paragraph = []
            continue
        if _THEMATIC_BREAK.match(line) or (not paragraph and _INDENTED_CODE.match(line)):
            paragraph = []
            continue
        paragraph.append(i)
    return found


def sections_of(data: bytes) -> list[Section]:
    """A concept file's sections: cut at the body start and at each heading's first line."""
    lines = physical_lines(data.decode("utf-8"))
    first = body_start(lines)
    markers = {first: ""}
    for i, text in heading_lines(lines[first:]):
        markers[first + i] = text      # a heading on the body's first line takes over the preamble
    starts = sorted(i for i in markers if i < len(lines))
    out = []
    for n, start in enumerate(starts):
        end = (starts[n + 1] if n + 1 < len(starts) else len(lines)) - 1
        text = "\n".join(lines[start:end + 1])
        if text.endswith("\r"):
            text = text[:-1]           # the CR of the excluded CRLF
        if text.strip():
            out.append(Section(markers[start], start + 1, end + 1, text))
    return out


# ---- ranking ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class IndexedSection:
    concept_id: str
    path: str
    section: Section
    tf: Mapping[str, int]   # weighted term frequencies
    length: int             # weighted token count


def index_sections(concepts: list[tuple[str, str, str, bytes]]) -> list[IndexedSection]:
    """Every section of the given concepts, as (concept ID, path, title, file bytes)."""
    out = []
    for concept_id, path, title, data in concepts:
        title_words = words(title)
        for section in sections_of(data):
            tf: dict[str, int] = {}
            for weight, tokens in ((WEIGHT_BODY, words(section.text)), (WEIGHT_HEADING, words(section.heading)),
                                   (WEIGHT_TITLE, title_words)):
                for token in tokens:
                    tf[token] = tf.get(token, 0) + weight
            out.append(IndexedSection(concept_id, path, section, tf, sum(tf.values())))
    return out


def snippet(text: str, terms: list[str]) -> str:
    """From 80 runes before the first token whose normalised form is a term, at most 512 runes."""
    wanted = set(terms)
    for start, end in token_spans(text):
        if normalise(text[start:end]) in wanted:
            begin = max(0, start - SNIPPET_LEAD)
            return text[begin:begin + SNIPPET_RUNES]
    return text[:SNIPPET_RUNES]


def hit_order(hit: Mapping) -> tuple:
    """Score descending, then concept ID byte-wise, then line_start."""
    return -hit["score"], hit["concept_id"].encode(), hit["line_start"]


def expected_hits(corpus: list[IndexedSection], terms: list[str]) -> list[dict]:
    """Every section holding all terms (weighted tf > 0), scored by BM25 and in contract order."""
    n = len(corpus)
    avg = (sum(s.length for s in corpus) / n) if n else 0.0
    avg = avg if avg > 0 else 1.0
    df = {t: sum(1 for s in corpus if s.tf.get(t, 0) > 0) for t in terms}
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}
    hits = []
    for s in corpus:
        if not terms or any(s.tf.get(t, 0) <= 0 for t in terms):
            continue
        norm = K1 * ((1 - B) + B * s.length / avg)
        score = sum(idf[t] * s.tf[t] * (K1 + 1) / (s.tf[t] + norm) for t in terms)
        hits.append({"concept_id": s.concept_id, "path": s.path, "heading": s.section.heading,
                     "line_start": s.section.line_start, "line_end": s.section.line_end, "score": score,
                     "snippet": snippet(s.section.text, terms)})
    return sorted(hits, key=hit_order)


# ---- snapshot fingerprint ---------------------------------------------------------------------

def captured_files(root: Path) -> dict[str, bytes]:
    """A bundle's captured files by slash path (read.md §1.1): regular files, symlinks never
    followed, only the root-level ``.okf`` left out (hidden names are captured)."""
    out: dict[str, bytes] = {}

    def walk(folder: Path, prefix: str) -> None:
        for entry in os.scandir(folder):
            rel = prefix + entry.name
            mode = entry.stat(follow_symlinks=False).st_mode
            if rel == ".okf" or stat.S_ISLNK(mode):
                continue
            if stat.S_ISDIR(mode):
                walk(Path(entry.path), rel + "/")
            elif stat.S_ISREG(mode):
                out[rel] = Path(entry.path).read_bytes()

    walk(root, "")
    return out


def snapshot_revision(files: Mapping[str, bytes]) -> str:
    """SHA-256 of Go's json.Marshal of [{path, size, sha256}] over every file, by path bytes."""
    records = [{"path": p, "size": len(files[p]), "sha256": hashlib.sha256(files[p]).hexdigest()}
               for p in sorted(files, key=lambda p: p.encode())]
    return hashlib.sha256(go_marshal(records).encode()).hexdigest()
