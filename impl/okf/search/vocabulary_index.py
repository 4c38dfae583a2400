"""Which tokens of a vocabulary contain a pattern, without reading the whole vocabulary.

The vocabulary is NUL + the distinct tokens joined by NUL + NUL (see :mod:`token_postings`), and
a pattern is a token piece, framed by NUL where it must start or end its token. The vocabulary
grows with the bundle (every number and identifier is a token of its own), so scanning it for
each query would make every query linear in the bundle again. Instead each byte trigram of the
framed tokens lists the tokens holding it (ascending ids); a pattern's tokens are among those of
all its trigrams, each confirmed by a substring test on the token alone. Patterns under three
bytes (a letter or two) fall back to one scan of the vocabulary.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections import defaultdict, deque
from dataclasses import dataclass
from itertools import accumulate, chain, repeat
from typing import Sequence

from knowspec.impl.okf.search.id_typecode import WIDE, id_typecode

_SEP = b"\x00"
# A short pattern's scan that has found this many tokens counts the occurrences left once: a
# limit of thousands more (a one-piece query's, see token_postings) would otherwise be walked a
# Python step per token before giving up.
RECOUNT_AFTER = 2048


def _trigrams(pattern: bytes) -> set[bytes]:
    return set(map(pattern.__getitem__, map(slice, range(len(pattern) - 2), range(3, len(pattern) + 1))))


def _code(trigram: bytes) -> int:
    """A trigram as one integer; big-endian, so codes sort as the trigrams' bytes do."""
    return int.from_bytes(trigram, "big")


def _intersect(a: Sequence[int], b: Sequence[int]) -> list[int]:
    """The common values of two ascending sequences without repeats, ascending."""
    if len(a) > len(b):
        a, b = b, a
    if len(a) * 16 < len(b):  # a few values looked up in a long list
        return [x for x in a if (at := bisect_left(b, x)) < len(b) and b[at] == x]
    return sorted(set(a).intersection(b))


@dataclass(slots=True)
class VocabularyIndex:
    """``trigrams`` (ascending codes) and, for trigram ``k``, the ids of the tokens holding it,
    ``token_ids[offsets[k]:offsets[k + 1]]`` (ascending)."""

    vocabulary: bytes
    starts: array
    trigrams: array
    offsets: array
    token_ids: array

    @classmethod
    def empty(cls) -> "VocabularyIndex":
        return cls(_SEP, array(WIDE), array(WIDE), array(WIDE), array(id_typecode(0)))

    def fill(self, vocabulary: bytes, starts: array) -> "VocabularyIndex":
        """This (empty) index made that of ``vocabulary``, whose tokens start at ``starts``."""
        self.vocabulary, self.starts = vocabulary, starts
        tokens = vocabulary[1:-1].split(_SEP) if len(starts) else []
        # each token's distinct trigrams, framed as patterns see it; then every (trigram, token)
        # pair appended to its trigram's list in one C-level pass (ids ascend, so every list does)
        per_token = list(map(_trigrams, map(b"".join, zip(repeat(_SEP), tokens, repeat(_SEP)))))
        owners = chain.from_iterable(map(repeat, range(len(tokens)), map(len, per_token)))
        lists: defaultdict[bytes, list[int]] = defaultdict(list)
        deque(map(list.append, map(lists.__getitem__, chain.from_iterable(per_token)), owners), maxlen=0)
        del per_token
        keys = sorted(lists)
        self.offsets.extend(accumulate(map(len, map(lists.__getitem__, keys)), initial=0))
        if self.token_ids.typecode != id_typecode(len(tokens)):
            self.token_ids = array(id_typecode(len(tokens)))
        self.token_ids.extend(chain.from_iterable(map(lists.__getitem__, keys)))
        self.trigrams.extend(map(_code, keys))
        return self

    def fill_buffers(self, vocabulary: bytes, starts: array, buffers: dict[str, bytes]) -> "VocabularyIndex":
        """This (empty) index made the one :mod:`postings_build` gave as buffers."""
        self.vocabulary, self.starts = vocabulary, starts
        self.trigrams.frombytes(buffers["trigrams"])
        self.offsets.frombytes(buffers["trigram_offsets"])
        if self.token_ids.typecode != id_typecode(len(starts)):
            self.token_ids = array(id_typecode(len(starts)))
        self.token_ids.frombytes(buffers["token_ids"])
        return self

    def nbytes(self) -> int:
        return sum(a.itemsize * len(a) for a in (self.trigrams, self.offsets, self.token_ids))

    def tokens_containing(self, pattern: bytes, limit: int) -> list[int] | None:
        """Ascending ids of the tokens whose framed form contains ``pattern``; None when more
        than ``limit`` tokens might (too common a pattern to be worth its postings)."""
        if len(pattern) < 3:
            return self._scan(pattern, limit)
        lists = []
        for code in map(_code, _trigrams(pattern)):
            k = bisect_left(self.trigrams, code)
            if k == len(self.trigrams) or self.trigrams[k] != code:
                return []
            lists.append(self.token_ids[self.offsets[k]:self.offsets[k + 1]])
        lists.sort(key=len)
        candidates: Sequence[int] = lists[0]
        for ids in lists[1:]:
            if not candidates:
                break
            candidates = _intersect(candidates, ids)
        if len(candidates) > limit:
            return None
        if len(pattern) == 3:  # its one trigram's tokens are exactly those holding it
            return list(candidates)
        vocabulary, starts, last = self.vocabulary, self.starts, len(self.starts) - 1
        # token t framed: from the NUL before it to the NUL after it (the next token's start - 1)
        return [t for t in candidates
                if pattern in vocabulary[starts[t] - 1:starts[t + 1] if t < last else len(vocabulary)]]

    def _scan(self, pattern: bytes, limit: int) -> list[int] | None:
        """One ``bytes.find`` pass over the vocabulary, for a pattern too short for trigrams."""
        found: list[int] = []
        find, starts = self.vocabulary.find, self.starts
        shift = 1 if pattern.startswith(_SEP) else 0  # the match begins at its token's start
        pos = find(pattern)
        while pos >= 0:
            token_id = bisect_right(starts, pos + shift) - 1
            if not found or found[-1] != token_id:
                if len(found) >= limit:
                    return None
                if len(found) == RECOUNT_AFTER and self.vocabulary.count(pattern, pos) > limit - len(found):
                    return None  # more occurrences left than the limit allows: give up in one C-level pass
                found.append(token_id)
            pos = find(pattern, pos + 1)
        return found
