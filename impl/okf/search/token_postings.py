"""An inverted index of word tokens: which rows hold a token containing a query.

A text is cut into tokens at the ASCII bytes that are neither letters, digits nor ``_``; bytes of
multi-byte UTF-8 characters are always token bytes, so a character is never cut. A query without
such a separator can only occur inside one token, hence the rows holding it are exactly the rows
of the vocabulary's tokens that contain it: found through the vocabulary's own trigram index
(:mod:`vocabulary_index`) and a union of the tokens' rows, never a look at the texts themselves. A
query with separators gives candidate rows only (each of its pieces must be a token suffix, a
whole token or a token prefix, depending on where it stands); the caller verifies those.

A token's rows are kept as an ascending run of a machine-integer ``array``, or, for a token held
by so many rows that a bit per row takes less room, as a bitmap (:mod:`row_bitmaps`): a union of
common tokens then costs a few OR's of ``rows / 64`` words, not a step per row. Answers are row
bitmaps. Large indexes have the same postings built with numpy in a helper process
(:mod:`postings_build`, :mod:`index_helper`).
"""

from __future__ import annotations

import operator
import re
from array import array
from bisect import bisect_left
from collections import defaultdict, deque
from dataclasses import dataclass, field
from itertools import accumulate, chain, compress, count, repeat
from typing import Iterable, Sequence

from knowspec.impl.okf.search import row_bitmaps
from knowspec.impl.okf.search.id_typecode import WIDE, id_typecode
from knowspec.impl.okf.search.vocabulary_index import VocabularyIndex

SEPARATORS = bytes(b for b in range(128) if not (chr(b).isalnum() or chr(b) == "_"))
_TO_SPACE = bytes.maketrans(SEPARATORS, b" " * len(SEPARATORS))
_PIECE = re.compile(rb"[A-Za-z0-9_\x80-\xff]+")
_SEP = b"\x00"  # a separator itself, so never inside a token: the vocabulary's frame
# A query piece held by more tokens than this is too common to be worth their postings (a
# letter or two): it narrows nothing, and the caller searches the texts instead.
MAX_VOCABULARY_MATCHES = 2048
# A query of one piece, answered exactly from its tokens' postings, may take more of them: up to
# one for every ROWS_PER_EXACT_MATCH rows. Its union then costs less than reading every text, and
# a bundle's vocabulary grows with it: the fixed number alone made a number's first digits fall
# back to reading every body past some size (50,000 concepts: '17' in 4,812 tokens, 258 ms read
# against 39 through the postings; 5,000: 387 tokens, 3 ms). Past a quarter of the rows (a piece
# such as '1' in most numbers) the union costs more than the reading it saves.
ROWS_PER_EXACT_MATCH = 4
# A token held by at least this many rows, and by so many that a bit per row is no larger than its
# row ids, is kept as a bitmap.
DENSE_MIN_ROWS = 64


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
    """Takes the tokens of the rows, keeping only their ids (a row's token objects are freed once
    counted: a bundle's worth of them would cost hundreds of MiB). Rows are best added in
    ascending order (every caller does): each token's rows are then sorted as they come. Token
    ids follow first appearance, word by word, as in :mod:`postings_build` (the same postings,
    built with numpy in a helper process)."""

    def __init__(self, n_rows: int, into: "TokenPostings | None" = None) -> None:
        # the result's objects come first (or were made by the caller), before the build's
        # temporaries: a long-lived object born among them keeps their allocator pools resident
        self._result = into if into is not None else TokenPostings.empty(n_rows)
        self._ids: defaultdict[bytes, int] = defaultdict(count().__next__)  # a new token: the next id
        self._id_of = self._ids.__getitem__
        self._rows: defaultdict[int, list[int]] = defaultdict(list)  # token id -> the rows holding it
        self._last_row = -1
        self._ascending = True  # rows came in order: each token's list is sorted

    def add(self, row: int, row_tokens: Iterable[bytes]) -> None:
        deque(map(list.append, map(self._rows.__getitem__, map(self._id_of, row_tokens)), repeat(row)), maxlen=0)
        self._ascending = self._ascending and row >= self._last_row
        self._last_row = row

    def add_values(self, rows: Sequence[int], values: Sequence[bytes]) -> None:
        """The tokens of many short texts (``values[i]`` belongs to row ``rows[i]``; tokens
        visited in their order), in a few C-level passes: split, then every word's id and its
        row's number paired up."""
        words = list(map(bytes.split, map(bytes.translate, values, repeat(_TO_SPACE))))
        row_of_word = chain.from_iterable(map(repeat, rows, map(len, words)))
        ids = map(self._id_of, chain.from_iterable(words))
        deque(map(list.append, map(self._rows.__getitem__, ids), row_of_word), maxlen=0)
        if rows:
            self._ascending = self._ascending and rows[0] >= self._last_row and all(map(int.__le__, rows, rows[1:]))
            self._last_row = max(self._last_row, rows[-1])

    def finish(self) -> "TokenPostings":
        """The postings of the rows added."""
        fresh = self._rows
        lists = [fresh.get(token_id, []) for token_id in range(len(self._ids))]
        # a row lists a token once for each time it holds it: side by side when rows came in order
        if self._ascending:
            lists = [list(dict.fromkeys(rows)) for rows in lists]
        else:
            lists = [sorted(set(rows)) for rows in lists]
        return self._result.fill(list(self._ids), lists)


@dataclass(frozen=True)
class Candidates:
    """Rows that may hold a query, as a bitmap (``None``: every row); ``exact`` when each of them does."""

    rows: int | None
    exact: bool


@dataclass(slots=True)
class TokenPostings:
    """``vocabulary``: NUL + the distinct tokens joined by NUL + NUL; token ``t`` starts at
    ``starts[t]``. Its rows (ascending) are ``rows[offsets[t]:offsets[t + 1]]``, or, for a token
    in ``dense_ids`` (ascending), its bitmap in ``dense_bits`` (little-endian, ``stride`` bytes
    each, in that order; its span of ``rows`` is empty). Every part is a flat buffer: no small
    object outlives a build (thousands of them, scattered over the allocator's pools, kept 15 MiB
    of freed build memory resident on databricks-okf)."""

    n_rows: int
    vocabulary: bytes
    starts: array
    offsets: array
    rows: array
    words: VocabularyIndex  # which tokens contain a pattern
    dense_ids: array = field(default_factory=lambda: array(WIDE))
    dense_counts: array = field(default_factory=lambda: array(WIDE))
    dense_bits: bytes = b""

    @property
    def stride(self) -> int:
        return (self.n_rows + 7) // 8

    @classmethod
    def empty(cls, n_rows: int) -> "TokenPostings":
        return cls(n_rows, _SEP, array(WIDE), array(WIDE), array(id_typecode(n_rows)), VocabularyIndex.empty())

    def fill(self, vocabulary: list[bytes], lists: list[list[int]]) -> "TokenPostings":
        """These (empty) postings made those of ``vocabulary[t]`` held by the rows ``lists[t]``
        (ascending, distinct); tokens without rows are dropped."""
        n_rows, rows = self.n_rows, self.rows
        alive = [t for t, held in enumerate(lists) if held]
        words = [vocabulary[t] for t in alive]
        per_token = [lists[t] for t in alive]
        dense_at = max(DENSE_MIN_ROWS, n_rows // (8 * rows.itemsize))
        is_dense = [len(r) >= dense_at for r in per_token]
        self.dense_ids.extend(compress(range(len(per_token)), is_dense))
        self.dense_counts.extend(len(per_token[t]) for t in self.dense_ids)
        self.dense_bits = b"".join(row_bitmaps.to_bytes(row_bitmaps.of_rows(per_token[t], n_rows), n_rows)
                                   for t in self.dense_ids)
        rows.extend(chain.from_iterable(compress(per_token, map(operator.not_, is_dense))))
        self.offsets.extend(accumulate((0 if dense else len(r) for r, dense in zip(per_token, is_dense)), initial=0))
        self.starts.extend(accumulate((len(w) + 1 for w in words), initial=1))
        self.starts.pop()  # token t starts after the NUL that ends token t - 1
        self.vocabulary = _SEP + _SEP.join(words) + _SEP if words else _SEP
        self.words.fill(self.vocabulary, self.starts)
        return self

    @classmethod
    def build(cls, n_rows: int, rows: Sequence[int], texts: Sequence[Iterable[bytes]]) -> "TokenPostings":
        """Postings of ``n_rows`` rows: row ``rows[i]`` holds the tokens ``texts[i]``."""
        builder = PostingsBuilder(n_rows)
        for row, row_tokens in zip(rows, texts):
            builder.add(row, row_tokens)
        return builder.finish()

    def fill_buffers(self, buffers: dict[str, bytes]) -> "TokenPostings":
        """These (empty) postings made those :func:`postings_build.build_field` gave as buffers."""
        self.vocabulary = buffers["vocabulary"]
        for name in ("starts", "offsets", "rows", "dense_ids", "dense_counts"):
            getattr(self, name).frombytes(buffers[name])
        self.dense_bits = buffers["dense_bits"]
        self.words.fill_buffers(self.vocabulary, self.starts, buffers)
        return self

    def tokens(self) -> list[bytes]:
        """The vocabulary, in token id order."""
        return self.vocabulary[1:-1].split(_SEP) if len(self.starts) else []

    def rows_of(self, token_id: int) -> list[int]:
        """The ascending rows holding token ``token_id``."""
        k = self._dense_place(token_id)
        if k >= 0:
            return list(row_bitmaps.rows(self._dense_bitmap(k)))
        return self.rows[self.offsets[token_id]:self.offsets[token_id + 1]].tolist()

    def nbytes(self) -> int:
        arrays = sum(a.itemsize * len(a) for a in (self.starts, self.offsets, self.rows))
        dense = sum(a.itemsize * len(a) for a in (self.dense_ids, self.dense_counts)) + len(self.dense_bits)
        return len(self.vocabulary) + arrays + dense + self.words.nbytes()

    def exact_rows(self, needle: bytes) -> int | None:
        """The bitmap of the rows whose text contains ``needle``, when the postings alone can
        tell: ``needle`` is one token-piece and not in too many vocabulary entries; else None."""
        if _PIECE.fullmatch(needle) is None:
            return None
        ids = self._tokens_matching(needle, max(MAX_VOCABULARY_MATCHES, self.n_rows // ROWS_PER_EXACT_MATCH))
        return None if ids is None else self._bitmap_of(ids)

    def candidates(self, needle: bytes) -> Candidates:
        """Rows whose text may contain ``needle``: exactly those that do when the postings can
        tell (:meth:`exact_rows`); else the rows holding every piece where it stands, rarest
        piece first (a superset; ``None`` when no piece narrows anything)."""
        exact = self.exact_rows(needle)
        if exact is not None:
            return Candidates(exact, True)
        matched = [ids for ids in map(self._tokens_matching, _patterns(needle)) if ids is not None]
        rows: int | None = None
        for ids in sorted(matched, key=self._postings_count):
            found = self._bitmap_of(ids)
            rows = found if rows is None else rows & found
            if not rows:
                break
        return Candidates(rows, False)

    def _postings_count(self, ids: list[int]) -> int:
        offsets, place = self.offsets, self._dense_place
        return sum(offsets[t + 1] - offsets[t] if (k := place(t)) < 0 else self.dense_counts[k] for t in ids)

    def _dense_place(self, token_id: int) -> int:
        """Where ``token_id`` is among the dense tokens, or -1."""
        k = bisect_left(self.dense_ids, token_id)
        return k if k < len(self.dense_ids) and self.dense_ids[k] == token_id else -1

    def _dense_bitmap(self, k: int) -> int:
        stride = self.stride
        return row_bitmaps.of_bytes(memoryview(self.dense_bits)[k * stride:(k + 1) * stride])

    def _tokens_matching(self, pattern: bytes, limit: int | None = None) -> list[int] | None:
        """Ids of the tokens the framed ``pattern`` occurs in (None: more than ``limit``, by
        default ``MAX_VOCABULARY_MATCHES``: too many to be worth it)."""
        return self.words.tokens_containing(pattern, MAX_VOCABULARY_MATCHES if limit is None else limit)

    def _bitmap_of(self, ids: list[int]) -> int:
        """The bitmap of the rows holding any of the tokens ``ids``."""
        bitmap = 0
        sparse = array(self.rows.typecode)
        offsets, rows, place = self.offsets, self.rows, self._dense_place
        for token_id in ids:
            k = place(token_id)
            if k >= 0:
                bitmap |= self._dense_bitmap(k)
            else:
                sparse += rows[offsets[token_id]:offsets[token_id + 1]]
        return bitmap | row_bitmaps.of_rows(sparse, self.n_rows) if sparse else bitmap
