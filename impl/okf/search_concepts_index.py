"""A per-snapshot index that answers search_concepts without scanning every field in Python.

Same rule as :func:`search_concepts.search` (the reference scan, kept for tests): folded
substring containment, best field wins. Two speed-ups, neither of which changes an answer:

- the short fields (id, title, description, each tag) are joined per field into one UTF-8 blob
  with NUL separators, so one ``bytes.find`` loop visits only real matches (a query containing
  NUL falls back to the per-concept scan);
- bodies get a 32,768-bit trigram signature each (hashed UTF-8 byte trigrams); a body can hold
  the query only if its signature has every trigram bit of the query, so only those candidate
  bodies are searched.

Substring search on UTF-8 bytes is exact for code-point substrings (UTF-8 is self-synchronising),
and the folded text is stored as bytes to halve the memory of wide Python strings.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from knowspec.impl.okf.search_concepts import FIELD_RANKS, SearchableConcept, SearchResult
from knowspec.impl.rules.ordering import search_hit_key, truncate

SIGNATURE_BITS = 1 << 15
_SEP = b"\x00"
_GOLDEN = np.uint32(2654435761)


def trigram_hashes(data: bytes) -> np.ndarray:
    """Bit positions of the hashed byte trigrams of ``data`` (empty below three bytes)."""
    if len(data) < 3:
        return np.empty(0, dtype=np.uint32)
    a = np.frombuffer(data, dtype=np.uint8).astype(np.uint32)
    codes = (a[:-2] << np.uint32(16)) | (a[1:-1] << np.uint32(8)) | a[2:]
    return ((codes * _GOLDEN) >> np.uint32(17)) & np.uint32(SIGNATURE_BITS - 1)


@dataclass
class _Blob:
    """Values of one field kind joined by NUL; ``owners[i]`` is the concept of value ``i``."""

    data: bytes
    starts: list[int]
    owners: list[int]

    @classmethod
    def of(cls, values: Sequence[tuple[int, bytes]]) -> "_Blob":
        starts, owners, pos = [], [], 0
        for owner, value in values:
            starts.append(pos)
            owners.append(owner)
            pos += len(value) + 1
        return cls(_SEP.join(v for _, v in values), starts, owners)

    def owners_matching(self, needle: bytes) -> set[int]:
        found: set[int] = set()
        pos = self.data.find(needle)
        while pos >= 0:
            i = bisect.bisect_right(self.starts, pos) - 1
            found.add(self.owners[i])
            nxt = self.starts[i + 1] if i + 1 < len(self.starts) else len(self.data)
            pos = self.data.find(needle, nxt)
        return found


class ConceptSearchIndex:
    """Folded fields of every concept of one snapshot, ready for repeated queries."""

    def __init__(self, entries: Sequence[tuple[str, SearchableConcept]]) -> None:
        self.ids = [cid for cid, _ in entries]
        enc = [(i, f) for i, (_, f) in enumerate(entries)]
        self.small = [
            (f.id.encode(), f.title.encode(), f.description.encode(), tuple(t.encode() for t in f.tags))
            for _, f in enc
        ]
        self.fields = {
            "id": _Blob.of([(i, small[0]) for i, small in enumerate(self.small)]),
            "title": _Blob.of([(i, f.title.encode()) for i, f in enc if f.title]),
            "description": _Blob.of([(i, f.description.encode()) for i, f in enc if f.description]),
            "tags": _Blob.of([(i, t.encode()) for i, f in enc for t in f.tags]),
        }
        self.bodies = [f.body.encode("utf-8", "surrogatepass") for _, f in enc]
        self.signatures = np.zeros((len(self.bodies), SIGNATURE_BITS // 8), dtype=np.uint8)
        row = np.zeros(SIGNATURE_BITS, dtype=bool)
        for i, body in enumerate(self.bodies):
            hashes = trigram_hashes(body)
            if len(hashes):
                row[:] = False
                row[hashes] = True
                self.signatures[i] = np.packbits(row)

    def _body_candidates(self, needle: bytes) -> np.ndarray:
        hashes = np.unique(trigram_hashes(needle))
        if not len(hashes):
            return np.arange(len(self.bodies))
        masks = (np.uint8(128) >> (hashes & 7).astype(np.uint8)).astype(np.uint8)
        bits = self.signatures[:, (hashes >> 3).astype(np.intp)] & masks
        return np.nonzero(np.all(bits != 0, axis=1))[0]

    def search(self, folded_query: str, limit: int, check_cancelled: Callable[[], None] = lambda: None) -> SearchResult:
        needle = folded_query.encode("utf-8", "surrogatepass")
        if _SEP in needle:
            return self._scan(needle, limit, check_cancelled)
        rank_of: dict[int, str] = {}
        for field in ("id", "title", "description", "tags"):
            for owner in self.fields[field].owners_matching(needle):
                rank_of.setdefault(owner, field)
            check_cancelled()
        for n, i in enumerate(self._body_candidates(needle).tolist()):
            if n % 512 == 0:
                check_cancelled()
            if i not in rank_of and needle in self.bodies[i]:
                rank_of[i] = "body"
        matches = [(self.ids[i], field) for i, field in rank_of.items()]
        matches.sort(key=lambda hit: search_hit_key(FIELD_RANKS[hit[1]], hit[0]))
        page, total, truncated = truncate(matches, limit)
        return SearchResult(page, total, truncated)

    def _scan(self, needle: bytes, limit: int, check_cancelled: Callable[[], None]) -> SearchResult:
        """Per-concept scan, used when the query holds the blob separator (NUL)."""
        matches = []
        for i, (cid, (id_, title, description, tags)) in enumerate(zip(self.ids, self.small)):
            if i % 256 == 0:
                check_cancelled()
            if needle in id_:
                matches.append((cid, "id"))
            elif needle in title:
                matches.append((cid, "title"))
            elif needle in description:
                matches.append((cid, "description"))
            elif any(needle in t for t in tags):
                matches.append((cid, "tags"))
            elif needle in self.bodies[i]:
                matches.append((cid, "body"))
        matches.sort(key=lambda hit: search_hit_key(FIELD_RANKS[hit[1]], hit[0]))
        page, total, truncated = truncate(matches, limit)
        return SearchResult(page, total, truncated)
