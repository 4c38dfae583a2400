"""Which tokens of a vocabulary contain a pattern, without reading the whole vocabulary.

The vocabulary is NUL + the distinct tokens joined by NUL + NUL (see :mod:`token_postings`), and
a pattern is a token piece, framed by NUL where it must start or end its token. The vocabulary
grows with the bundle (every number and identifier is a token of its own), so scanning it for
each query would make every query linear in the bundle again. Instead each byte trigram of the
framed vocabulary lists the tokens holding it (sorted ids); a pattern's tokens are among those
of its rarest trigrams, each confirmed by a substring test on the token alone. Patterns under
three bytes (a letter or two) fall back to one scan of the vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from knowspec.impl.okf.search.id_dtype import id_dtype
from knowspec.impl.okf.search.sorted_unique import sorted_unique

_SEP = 0


def _codes(data: np.ndarray) -> np.ndarray:
    return (data[:-2].astype(np.uint32) << np.uint32(16)) | (data[1:-1].astype(np.uint32) << np.uint32(8)) | data[2:]


@dataclass
class VocabularyIndex:
    """``trigrams`` (ascending) and, for trigram ``k``, the ids of the tokens holding it,
    ``token_ids[offsets[k]:offsets[k + 1]]`` (ascending)."""

    vocabulary: bytes
    starts: np.ndarray
    trigrams: np.ndarray
    offsets: np.ndarray
    token_ids: np.ndarray

    @classmethod
    def of(cls, vocabulary: bytes, starts: np.ndarray) -> "VocabularyIndex":
        data = np.frombuffer(vocabulary, dtype=np.uint8)
        if len(data) < 3 or not len(starts):
            empty = np.empty(0, dtype=np.uint32)
            return cls(vocabulary, starts, empty, np.zeros(1, dtype=np.int64), empty)
        # a trigram with NUL in the middle spans two tokens: no pattern holds one
        positions = np.flatnonzero(data[1:-1] != _SEP)
        codes = _codes(data)[positions]
        owners = np.searchsorted(starts, positions + 1, side="right") - 1  # a leading NUL: the next token
        order = np.argsort(codes, kind="stable")  # stable: owners stay ascending within a trigram
        codes, owners = codes[order], owners[order]
        repeated = np.zeros(len(codes), dtype=bool)
        repeated[1:] = (codes[1:] == codes[:-1]) & (owners[1:] == owners[:-1])
        codes, owners = codes[~repeated], owners[~repeated]
        first = np.ones(len(codes), dtype=bool)  # the first entry of each trigram (not np.unique: it hashes, far slower)
        first[1:] = codes[1:] != codes[:-1]
        firsts = np.flatnonzero(first)
        trigrams = codes[firsts]
        offsets = np.append(firsts, len(codes)).astype(np.int64)
        return cls(vocabulary, starts, trigrams, offsets, owners.astype(id_dtype(len(starts))))

    def nbytes(self) -> int:
        return self.trigrams.nbytes + self.offsets.nbytes + self.token_ids.nbytes

    def tokens_containing(self, pattern: bytes, limit: int) -> np.ndarray | None:
        """Ascending ids of the tokens whose framed form contains ``pattern``; None when more
        than ``limit`` tokens might (too common a pattern to be worth its postings)."""
        if len(pattern) < 3:
            return self._scan(pattern, limit)
        candidates: np.ndarray | None = None
        lists = []
        for code in sorted_unique(_codes(np.frombuffer(pattern, dtype=np.uint8))).tolist():
            k = int(np.searchsorted(self.trigrams, code))
            if k == len(self.trigrams) or self.trigrams[k] != code:
                return np.empty(0, dtype=np.int64)
            lists.append(self.token_ids[self.offsets[k]:self.offsets[k + 1]])
        for ids in sorted(lists, key=len):
            candidates = ids if candidates is None else candidates[np.isin(candidates, ids, assume_unique=True)]
            if not len(candidates):
                break
        assert candidates is not None  # a pattern of three bytes or more has a trigram
        if len(candidates) > limit:
            return None
        vocabulary, starts = self.vocabulary, self.starts
        ends = np.append(starts[1:] - 1, len(vocabulary) - 1)  # the NUL after each token
        found = [t for t, s, e in zip(candidates.tolist(), (starts[candidates] - 1).tolist(), (ends[candidates] + 1).tolist())
                 if pattern in vocabulary[s:e]]
        return np.asarray(found, dtype=np.int64)

    def _scan(self, pattern: bytes, limit: int) -> np.ndarray | None:
        """One ``bytes.find`` pass over the vocabulary, for a pattern too short for trigrams."""
        positions: list[int] = []
        find = self.vocabulary.find
        pos = find(pattern)
        while pos >= 0:
            if len(positions) >= limit:
                return None
            positions.append(pos)
            pos = find(pattern, pos + 1)
        if pattern.startswith(b"\x00"):
            positions = [p + 1 for p in positions]  # the match begins at its token's start
        return sorted_unique(np.searchsorted(self.starts, np.asarray(positions, dtype=np.int64), side="right") - 1)
