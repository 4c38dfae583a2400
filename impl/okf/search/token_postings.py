"""An inverted index of word tokens: which rows hold a token containing a query.

A text is cut into tokens at the ASCII bytes that are neither letters, digits nor ``_``; bytes of
multi-byte UTF-8 characters are always token bytes, so a character is never cut. A query without
such a separator can only occur inside one token, hence the rows holding it are exactly the rows
of the vocabulary's tokens that contain it: found through the vocabulary's own trigram index
(:mod:`vocabulary_index`) and a union of sorted row arrays, never a look at the texts themselves. A
query with separators gives candidate rows only (each of its pieces must be a token suffix, a
whole token or a token prefix, depending on where it stands); the caller verifies those.

The postings are rebuilt per snapshot from the previous ones: rows of unchanged texts are renumbered
in numpy, only new or changed texts are tokenised.
"""

from __future__ import annotations

import re
from collections import defaultdict, deque
from itertools import compress, count
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from knowspec.impl.okf.search.id_dtype import id_dtype
from knowspec.impl.okf.search.vocabulary_index import VocabularyIndex

SEPARATORS = bytes(b for b in range(128) if not (chr(b).isalnum() or chr(b) == "_"))
_TO_SPACE = bytes.maketrans(SEPARATORS, b" " * len(SEPARATORS))
_PIECE = re.compile(rb"[A-Za-z0-9_\x80-\xff]+")
_SEP = b"\x00"  # a separator itself, so never inside a token: the vocabulary's frame
_VALUE_MARK = b" \xff "  # a token of its own between joined values (0xFF is never in UTF-8)
# A query piece held by more tokens than this is too common to be worth their postings (a
# letter or two): it narrows nothing, and the caller searches the texts instead.
MAX_VOCABULARY_MATCHES = 2048
VALUES_PER_BATCH = 512  # short texts tokenised in one pass (``PostingsBuilder.add_values``)


def tokens(text: bytes) -> list[bytes]:
    """The tokens of ``text``, in order (repeats included: a builder drops them)."""
    return text.translate(_TO_SPACE).split()


def _patterns(needle: bytes) -> list[bytes]:
    """What each token-piece of ``needle`` requires of a vocabulary entry, as a substring of the
    NUL-framed vocabulary: a piece followed by a separator in the query ends its token (``piece``
    + NUL), one preceded by a separator starts it (NUL + ``piece``)."""
    out = []
    for match in _PIECE.finditer(needle):
        start, end = match.span()
        out.append((_SEP if start > 0 else b"") + match.group() + (_SEP if end < len(needle) else b""))
    return out


class PostingsBuilder:
    """Takes the tokens of fresh rows one row at a time, keeping only their ids (a row's token
    objects are freed once counted: a bundle's worth of them would cost hundreds of MiB), then
    merges them with the rows kept from ``previous``. Tokens no row holds are dropped."""

    def __init__(self, previous: "TokenPostings | None" = None) -> None:
        self.previous = previous
        self._ids: defaultdict[bytes, int] = defaultdict(count().__next__)  # a new token: the next id
        if previous is not None:
            deque(map(self._ids.__getitem__, previous.tokens()), maxlen=0)  # old ids kept
        self._id_of = self._ids.__getitem__
        self._tokens: list[int] = []  # token ids, row after row (8 bytes each: the ints are shared)
        self._rows: list[int] = []
        self._counts: list[int] = []
        self._batches: list[tuple[np.ndarray, np.ndarray]] = []  # (token ids, rows) of add_values

    def add_values(self, rows: Sequence[int], values: Sequence[bytes]) -> None:
        """The tokens of many short texts (``values[i]`` belongs to row ``rows[i]``), a batch of
        ``VALUES_PER_BATCH`` at a time in one C-level pass each (the texts joined with a marker
        token between them): all of a bundle's descriptions at once would be one object per word
        alive together (databricks-okf: 123,000 words, ~6 MiB of small objects)."""
        for at in range(0, len(values), VALUES_PER_BATCH):
            self._add_batch(rows[at:at + VALUES_PER_BATCH], values[at:at + VALUES_PER_BATCH])

    def _add_batch(self, rows: Sequence[int], values: Sequence[bytes]) -> None:
        words = _VALUE_MARK.join(values).translate(_TO_SPACE).split()
        ids = np.array(list(map(self._id_of, words)), dtype=np.int64)
        is_mark = ids == self._ids[_VALUE_MARK.strip()]
        which = np.cumsum(is_mark)[~is_mark]  # the value each word comes from
        self._batches.append((ids[~is_mark], np.asarray(rows, dtype=np.int64)[which]))

    def add(self, row: int, row_tokens: Iterable[bytes]) -> None:
        before = len(self._tokens)
        self._tokens.extend(map(self._id_of, row_tokens))
        self._rows.append(row)
        self._counts.append(len(self._tokens) - before)

    def finish(self, n_rows: int, moved_from: Sequence[int] = (), moved_to: Sequence[int] = ()) -> "TokenPostings":
        """The postings of ``n_rows`` rows: the added ones, and the rows ``moved_from`` of the
        previous postings as rows ``moved_to``."""
        token_parts = [np.array(self._tokens, dtype=np.int64)]
        row_parts = [np.repeat(np.array(self._rows, dtype=np.int64), np.array(self._counts, dtype=np.int64))]
        token_parts += [ids for ids, _ in self._batches]
        row_parts += [rows for _, rows in self._batches]
        previous = self.previous
        if previous is not None and len(moved_from):
            renumber = np.full(previous.n_rows, -1, dtype=np.int64)
            renumber[np.asarray(moved_from, dtype=np.int64)] = moved_to
            new_rows = renumber[previous.rows]
            kept = new_rows >= 0
            token_of = np.repeat(np.arange(len(previous.starts), dtype=np.int64), np.diff(previous.offsets))
            token_parts.append(token_of[kept])
            row_parts.append(new_rows[kept])
        keys = np.sort((np.concatenate(token_parts) << 32) | np.concatenate(row_parts))
        keys = keys[_run_starts(keys)]  # a token repeated in a row: once (np.unique hashes: far slower)
        counts = np.bincount(keys >> 32, minlength=len(self._ids))
        alive = counts > 0
        vocabulary = list(compress(self._ids, alive.tolist()))
        lengths = np.fromiter(map(len, vocabulary), dtype=np.int64, count=len(vocabulary))
        starts = np.cumsum(lengths + 1) - lengths  # after the frame's leading NUL
        offsets = np.zeros(len(vocabulary) + 1, dtype=np.int64)
        np.cumsum(counts[alive], out=offsets[1:])
        framed = _SEP + _SEP.join(vocabulary) + _SEP if vocabulary else _SEP
        return TokenPostings(n_rows, framed, starts, offsets, (keys & 0xFFFFFFFF).astype(id_dtype(n_rows)),
                             VocabularyIndex.of(framed, starts))


@dataclass(frozen=True)
class Candidates:
    """Rows that may hold a query (``None``: every row); ``exact`` when each of them does."""

    rows: np.ndarray | None
    exact: bool


@dataclass
class TokenPostings:
    """``vocabulary``: NUL + the distinct tokens joined by NUL + NUL; token ``t`` starts at
    ``starts[t]`` and its rows (ascending) are ``rows[offsets[t]:offsets[t + 1]]``."""

    n_rows: int
    vocabulary: bytes
    starts: np.ndarray
    offsets: np.ndarray
    rows: np.ndarray
    words: VocabularyIndex  # which tokens contain a pattern

    @classmethod
    def build(cls, n_rows: int, fresh_rows: Sequence[int], fresh_tokens: Sequence[Iterable[bytes]],
              previous: "TokenPostings | None" = None, moved_from: Sequence[int] = (),
              moved_to: Sequence[int] = ()) -> "TokenPostings":
        """Postings of ``n_rows`` rows: row ``fresh_rows[i]`` holds the tokens ``fresh_tokens[i]``;
        the rows ``moved_from`` of ``previous`` are kept as rows ``moved_to``."""
        builder = PostingsBuilder(previous)
        for row, row_tokens in zip(fresh_rows, fresh_tokens):
            builder.add(row, row_tokens)
        return builder.finish(n_rows, moved_from, moved_to)

    def tokens(self) -> list[bytes]:
        """The vocabulary, in token id order."""
        return self.vocabulary[1:-1].split(_SEP) if len(self.starts) else []

    def nbytes(self) -> int:
        return (len(self.vocabulary) + self.starts.nbytes + self.offsets.nbytes + self.rows.nbytes
                + self.words.nbytes())

    def exact_rows(self, needle: bytes) -> np.ndarray | None:
        """The ascending rows whose text contains ``needle``, when the postings alone can tell:
        ``needle`` is one token-piece and not in too many vocabulary entries; else None."""
        if _PIECE.fullmatch(needle) is None:
            return None
        ids = self._tokens_matching(needle)
        return None if ids is None else self._rows_of(ids)

    def candidates(self, needle: bytes) -> Candidates:
        """Rows whose text may contain ``needle``: exactly those that do when the postings can
        tell (:meth:`exact_rows`); else the rows holding every piece where it stands, rarest
        piece first (a superset; ``None`` when no piece narrows anything)."""
        exact = self.exact_rows(needle)
        if exact is not None:
            return Candidates(exact, True)
        matched = [ids for ids in map(self._tokens_matching, _patterns(needle)) if ids is not None]
        rows: np.ndarray | None = None
        for ids in sorted(matched, key=self._postings_count):
            found = self._rows_of(ids)
            rows = found if rows is None else _intersect(rows, found)
            if not len(rows):
                break
        return Candidates(rows, False)

    def _postings_count(self, ids: np.ndarray) -> int:
        return int((self.offsets[ids + 1] - self.offsets[ids]).sum())

    def _tokens_matching(self, pattern: bytes) -> np.ndarray | None:
        """Ids of the tokens the framed ``pattern`` occurs in (None: too many to be worth it)."""
        return self.words.tokens_containing(pattern, MAX_VOCABULARY_MATCHES)

    def _rows_of(self, ids: np.ndarray) -> np.ndarray:
        """The ascending rows holding any of the tokens ``ids``."""
        if len(ids) == 1:
            return self.rows[self.offsets[ids[0]]:self.offsets[ids[0] + 1]]
        firsts = self.offsets[ids]
        lengths = self.offsets[ids + 1] - firsts
        # every posting position of those tokens, without a Python loop over them
        ends = np.cumsum(lengths)
        positions = np.arange(ends[-1] if len(ends) else 0) + np.repeat(firsts - (ends - lengths), lengths)
        marked = np.zeros(self.n_rows, dtype=bool)
        marked[self.rows[positions]] = True
        return np.flatnonzero(marked)


def _intersect(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The common values of two ascending arrays without repeats, in time ~ the smaller's size."""
    if len(a) > len(b):
        a, b = b, a
    if not len(a):
        return a
    at = np.minimum(np.searchsorted(b, a), len(b) - 1)
    return a[b[at] == a]


def _run_starts(ascending: np.ndarray) -> np.ndarray:
    """Mask of the first element of each run of equal values in an ascending array."""
    first = np.ones(len(ascending), dtype=bool)
    first[1:] = ascending[1:] != ascending[:-1]
    return first
