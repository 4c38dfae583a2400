"""SQLite FTS5's ``unicode61`` tokenizer, ``bm25()`` and ``snippet()`` as pure functions.

Storages without FTS5 (Firebird's in-memory index) must rank and cut snippets exactly like a
SQLite pool (``doc$chunk_fts``: ``tokenize = 'unicode61 remove_diacritics 2'``, external content,
folded text indexed, original text shown). This module is that one reproduction, following
``ext/fts5/fts5_aux.c`` and ``fts5_tokenize.c`` of the SQLite the SQLite storage runs (3.40):

- ``tokenize`` (``rules.fts5_tokenizer``): ASCII letters and digits are token characters (lower-cased), other ASCII
  separates. A non-ASCII code point's class (separator, token character and its folded form, or
  a diacritic dropped inside a token) is read once from the bundled SQLite itself (an in-memory
  FTS5 table and ``fts5vocab``), so its separator table and fold map are SQLite's by construction.
- ``bm25``: per phrase, the weighted frequency (column weights scale tf only) over the row's
  instances, the row's unweighted token count and the table's mean, through ``rules.bm25``.
- ``snippet``: the window scoring (1000 for a phrase's first hit in the window, 1 for a repeat,
  +120 / +100 for a window starting at a sentence), the centring with C integer division, and
  the highlighter of SQLite 3.40 (coalesced instances, ellipses, trailing text kept at the end).

Offsets here are character offsets into ``str`` values (SQLite counts UTF-8 bytes; every
boundary it uses is a character boundary, so the cut text is the same).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Iterable, Sequence

from knowspec.impl.rules.bm25 import fts5_bm25
from knowspec.impl.rules.fts5_tokenizer import Token, folded_separated, token_texts, tokenize

# -- queries ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Phrase:
    """A quoted query word as FTS5 sees it: its tokens, the last one a prefix when ``prefix``."""

    tokens: tuple[str, ...]
    prefix: bool

    @property
    def size(self) -> int:
        return len(self.tokens)


def phrase(word: str, prefix: bool) -> Phrase:
    """The phrase FTS5 builds from ``"word"`` (``"word"*`` when ``prefix``)."""
    return Phrase(tuple(token_texts(word)), prefix)


def phrase_offsets(p: Phrase, column: Sequence[str]) -> list[int]:
    """Token offsets in ``column`` (folded tokens) where ``p`` occurs: each of its tokens equal to
    the column's token there, the last one its prefix when ``p.prefix``.

    The offsets where the first token stands are found in one comprehension, and only they are
    checked further (a snippet looks for every phrase in every column of each hit)."""
    if not p.tokens:
        return []
    *inner, last = p.tokens
    if not inner:  # most phrases: one comparison a token, with no call of a Python function
        if p.prefix:
            return [off for off, have in enumerate(column) if have.startswith(last)]
        return [off for off, have in enumerate(column) if have == last]

    def ends(have: str) -> bool:
        return have.startswith(last) if p.prefix else have == last

    first, span = inner[0], len(p.tokens)
    starts = [off for off, have in enumerate(column[:max(0, len(column) - span + 1)]) if have == first]
    return [off for off in starts
            if all(column[off + k] == tok for k, tok in enumerate(inner[1:], 1)) and ends(column[off + span - 1])]


def phrase_offsets_in_texts(phrases: Sequence[Phrase], texts: Sequence[str]) -> list[list[tuple[int, int]]]:
    """Per phrase, ``(i, offset)`` for each ``offset in phrase_offsets(p, token_texts(fold(texts[i])))``,
    by ``i`` then offset: many texts searched at once (a phrase query's candidate rows).

    The folded texts are joined into one string in which every token stands between single
    spaces and texts are parted by `` \0 `` (folding makes every NUL of a text a space), so each
    phrase is found by ``str.find`` over the whole batch, overlapping instances included, and
    only its instances cost a Python step: a text and the token offset come from the parts and
    the spaces before the instance."""
    joined = " " + " \0 ".join(map(folded_separated, texts)) + " "
    while "  " in joined:  # runs of spaces to one (each pass halves them; far faster than a regex)
        joined = joined.replace("  ", " ")
    parts = [m.start() for m in re.finditer("\0", joined)]  # parts[i]: the NUL after text i
    out: list[list[tuple[int, int]]] = []
    for p in phrases:
        found: list[tuple[int, int]] = []
        if p.tokens:
            needle = " " + " ".join(p.tokens) + ("" if p.prefix else " ")
            i, counted, offset = -1, 0, 0
            at = joined.find(needle)
            while at >= 0:
                text = bisect_left(parts, at)
                if text != i:  # the first instance in this text: count from its start
                    i, counted, offset = text, (parts[text - 1] + 1 if text else 0), 0
                offset += joined.count(" ", counted, at)
                counted = at
                found.append((i, offset))
                at = joined.find(needle, at + 1)
        out.append(found)
    return out


@dataclass(frozen=True, order=True)
class Instance:
    """One phrase instance in a row, in FTS5's ``xInst`` order: column, offset, phrase."""

    column: int
    offset: int
    phrase: int


def row_instances(phrases: Sequence[Phrase], columns: Sequence[Sequence[str]]) -> list[Instance]:
    """Every instance of every phrase in one row's tokenised columns, in ``xInst`` order."""
    found = [Instance(c, off, i) for i, p in enumerate(phrases)
             for c, col in enumerate(columns) for off in phrase_offsets(p, col)]
    return sorted(found)


def row_matches(instances: Iterable[Instance], n_phrases: int, joiner: str) -> bool:
    """Whether a row with these instances matches the AND / OR of ``n_phrases`` phrases."""
    present = {i.phrase for i in instances}
    return len(present) == n_phrases if joiner == "AND" else bool(present)


def bm25(instances: Sequence[Instance], n_phrases: int, weights: Sequence[float], hits: Sequence[int],
         row_tokens: int, total_tokens: int, n_rows: int) -> float:
    """``bm25(tbl, *weights)`` of one matching row (negative; smaller is better).

    ``hits[i]``: rows of the whole table holding phrase ``i``; ``row_tokens``: the row's tokens
    over all columns; ``total_tokens`` / ``n_rows``: the table's, for the mean row length.
    """
    n_cols = max([i.column for i in instances], default=-1) + 1
    counts = [[0] * n_cols for _ in range(n_phrases)]
    for inst in instances:
        counts[inst.phrase][inst.column] += 1
    avg = float(total_tokens) / float(n_rows) if n_rows else 0.0
    return fts5_bm25(counts, list(weights), list(hits), row_tokens, avg, n_rows)


# -- snippet ---------------------------------------------------------------------------------

def sentence_starts(text: str, tokens: Sequence[Token]) -> list[int]:
    """Token indexes that begin a sentence: 0, and a token after '.' or ':' plus whitespace."""
    starts = []
    for pos, tok in enumerate(tokens):
        if pos == 0:
            starts.append(0)
            continue
        i = tok.start - 1
        c = ""
        while i >= 0:
            c = text[i]
            if c not in " \t\n\r":
                break
            i -= 1
        if i != tok.start - 1 and c in ".:":
            starts.append(pos)
    return starts


def _window_score(instances: Sequence[Instance], keys: Sequence[tuple[int, int]], sizes: Sequence[int], column: int,
                  start: int, n_token: int, doc_size: int) -> tuple[int, int]:
    """``fts5SnippetScore``: (score, adjusted start) of the window ``[start, start + n_token)``.

    ``keys``: each instance's ``(column, offset)``. Instances come sorted by them, so the window's
    are one slice, found by bisection: SQLite's loop over every instance, per instance, made a
    section repeating one word cost seconds (8,000 matches: 10.6 s a snippet)."""
    seen: set[int] = set()
    score, first, last = 0, -1, 0
    end = start + n_token
    for inst in instances[bisect_left(keys, (column, start)):bisect_left(keys, (column, end))]:
        if inst.column == column and start <= inst.offset < end:
            score += 1 if inst.phrase in seen else 1000
            seen.add(inst.phrase)
            if first < 0:
                first = inst.offset
            last = inst.offset + sizes[inst.phrase]
    span = n_token - (last - first)
    adj = first - int(span / 2)  # C division truncates toward zero
    if adj + n_token > doc_size:
        adj = doc_size - n_token
    return score, max(adj, 0)


def _coalesced(instances: Sequence[Instance], sizes: Sequence[int], column: int) -> list[tuple[int, int]]:
    """``CInstIter``: the column's instances merged into ``[first, last]`` token ranges."""
    ranges: list[list[int]] = []
    for inst in instances:
        if inst.column != column:
            continue
        end = inst.offset - 1 + sizes[inst.phrase]
        if ranges and inst.offset <= ranges[-1][1]:
            ranges[-1][1] = max(ranges[-1][1], end)
        else:
            ranges.append([inst.offset, end])
    return [(a, b) for a, b in ranges]


def snippet(texts: Sequence[str], column_sizes: Sequence[int], instances: Sequence[Instance],
            phrase_sizes: Sequence[int], column: int, open_mark: str, close_mark: str,
            ellipsis: str, n_token: int) -> str:
    """``snippet(tbl, column, open, close, ellipsis, n_token)`` of one matching row.

    ``texts``: the row's original column texts; ``column_sizes``: its indexed token counts per
    column; ``instances``: its phrase instances (``row_instances`` over the indexed tokens).
    """
    best_col = column if column >= 0 else 0
    best_start, best_score, col_size = 0, 0, 0
    tokens: dict[int, list[Token]] = {}
    keys = [(inst.column, inst.offset) for inst in instances]
    for c, text in enumerate(texts):
        if column >= 0 and c != column:
            continue
        tokens[c] = tokenize(text)
        firsts = sentence_starts(text, tokens[c])
        doc_size = column_sizes[c]
        for inst in instances:
            if inst.column != c:
                continue
            score, adj = _window_score(instances, keys, phrase_sizes, c, inst.offset, n_token, doc_size)
            if score > best_score:
                best_score, best_col, best_start, col_size = score, c, adj, doc_size
            if firsts and doc_size > n_token:
                jj = max(bisect_right(firsts, inst.offset) - 1, 0)  # the last sentence start at or before it
                if firsts[jj] < inst.offset:
                    score, _ = _window_score(instances, keys, phrase_sizes, c, firsts[jj], n_token, doc_size)
                    score += 120 if firsts[jj] == 0 else 100
                    if score > best_score:
                        best_score, best_col, best_start, col_size = score, c, firsts[jj], doc_size
    if col_size == 0:
        col_size = column_sizes[best_col]
    if best_col not in tokens:
        tokens[best_col] = tokenize(texts[best_col])
    return _highlight(texts[best_col], tokens[best_col], _coalesced(instances, phrase_sizes, best_col),
                      best_start, best_start + n_token - 1, col_size, open_mark, close_mark, ellipsis)


def _highlight(text: str, tokens: Sequence[Token], ranges: list[tuple[int, int]], range_start: int,
               range_end: int, col_size: int,
               open_mark: str, close_mark: str, ellipsis: str) -> str:
    """``fts5HighlightCb`` over the window ``[range_start, range_end]`` (SQLite 3.40 rules)."""
    out: list[str] = [ellipsis] if range_start > 0 else []
    k = 0
    while k < len(ranges) and ranges[k][0] < range_start:
        k += 1
    it_start, it_end = ranges[k] if k < len(ranges) else (-1, -1)
    off = 0
    for pos, tok in enumerate(tokens):
        if range_end > 0:
            if pos > range_end:
                break  # nothing after the window is emitted
            if pos < range_start:
                continue
            if range_start and pos == range_start:
                off = tok.start
        if pos == it_start:
            out += [text[off:tok.start], open_mark]
            off = tok.start
        if pos == it_end:
            if range_end and it_start < range_start:
                out.append(open_mark)
            out += [text[off:tok.end], close_mark]
            off = tok.end
            k += 1
            it_start, it_end = ranges[k] if k < len(ranges) else (-1, -1)
        if range_end > 0 and pos == range_end:
            out.append(text[off:tok.end])
            off = tok.end
            if it_start <= pos < it_end:
                out.append(close_mark)
    out.append(text[off:] if range_end >= col_size - 1 else ellipsis)
    return "".join(out)


def prefix_range(sorted_terms: Sequence[str], prefix: str) -> range:
    """Indexes of the terms of a sorted vocabulary that start with ``prefix``."""
    lo = bisect_left(sorted_terms, prefix)
    hi = lo
    while hi < len(sorted_terms) and sorted_terms[hi].startswith(prefix):
        hi += 1
    return range(lo, hi)
