"""A per-snapshot index that answers search_concepts without scanning every field in Python.

Same rule as :func:`search_concepts.search` (the reference scan, kept for tests): folded
substring containment, best field wins. The speed-ups, none of which changes an answer:

- every field kind (id, title, description, tags, body) has an inverted index of its word tokens
  (:mod:`token_postings`): a query that is one token-piece (no space or punctuation) is answered
  from the vocabulary and sorted row arrays alone, in time proportional to its hits, never
  proportional to the concepts;
- a query with separators takes the rows holding each of its pieces where it stands; candidate
  bodies are narrowed by their signatures of separator-centred trigrams and 5-grams
  (:mod:`boundary_signatures`: which words are side by side) and each is decompressed and searched in C; a
  short field checks its few candidates one by one, else one ``bytes.find`` loop over the field's
  values joined into one UTF-8 blob with NUL separators visits only real matches (a query
  containing NUL falls back to the per-concept scan);
- only the hits the page shows are put in order (row numbers, which follow the ID order).

Substring search on UTF-8 bytes is exact for code-point substrings (UTF-8 is self-synchronising),
and folded bodies are stored as UTF-8 bytes (a wide Python string takes 2-4 bytes a character),
LZ4-compressed (:mod:`folded_bodies`, which says why they are kept at all).

:func:`index_for_snapshot` builds the index of a snapshot incrementally: rows of concepts that
are the very same objects as in the root's previous index (same bytes, hence same derivation)
are copied and their postings renumbered; only new or changed concepts are folded and tokenised.
"""

from __future__ import annotations

import bisect
from array import array
from itertools import accumulate, compress, repeat
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from knowspec.impl import runtime as process
from knowspec.impl.okf.search import boundary_signatures, folded_bodies
from knowspec.impl.okf.search.concepts import FIELD_RANKS, SearchableConcept, SearchResult
from knowspec.impl.okf.search.folded_bodies import FoldedBodies
from knowspec.impl.okf.search.token_postings import PostingsBuilder, TokenPostings, tokens
from knowspec.impl.rules.ordering import byte_key, search_hit_key, truncate
from knowspec.impl.rules.text import case_fold

_FIELDS = sorted(FIELD_RANKS, key=lambda name: -FIELD_RANKS[name])  # id, title, description, tags, body
_SEP = b"\x00"
# A short field's candidate rows are checked one by one when at most 1/FEW_CANDIDATES of the
# rows; more, and one scan of the field's blob is cheaper.
FEW_CANDIDATES = 16


@dataclass
class _Blob:
    """Values of one field kind joined by NUL; ``owners[i]`` is the concept of value ``i``.
    Positions and owners are machine integers (``array``): 8 bytes an entry, not a list slot
    and an int object (databricks-okf: 33,600 values)."""

    data: bytes
    starts: array
    owners: array

    @classmethod
    def of(cls, values: Sequence[tuple[int, bytes]]) -> "_Blob":
        owners = array("q", [owner for owner, _ in values])
        texts = [value for _, value in values]
        # each value starts one byte (the NUL) past the end of the one before
        starts = array("q", accumulate(map(len, texts), lambda pos, size: pos + size + 1, initial=0))
        starts.pop()
        return cls(_SEP.join(texts), starts, owners)

    def value(self, i: int) -> bytes:
        """Value ``i`` (without its NUL)."""
        end = self.starts[i + 1] - 1 if i + 1 < len(self.starts) else len(self.data)
        return self.data[self.starts[i]:end]

    def values_of(self, owner: int) -> tuple[bytes, ...]:
        """The values of ``owner``, in order (owners are ascending: values are added row after row)."""
        first = bisect.bisect_left(self.owners, owner)
        last = bisect.bisect_right(self.owners, owner, first)
        return tuple(self.value(i) for i in range(first, last))

    def owners_matching(self, needle: bytes) -> set[int]:
        found: set[int] = set()
        pos = self.data.find(needle)
        while pos >= 0:
            i = bisect.bisect_right(self.starts, pos) - 1
            found.add(self.owners[i])
            nxt = self.starts[i + 1] if i + 1 < len(self.starts) else len(self.data)
            pos = self.data.find(needle, nxt)
        return found


def _places(owners: array, n_rows: int) -> array:
    """Per row, the index of its value among ``owners`` (at most one each), else -1."""
    places = np.full(n_rows, -1, dtype=np.int64)
    places[np.frombuffer(owners, dtype=np.int64)] = np.arange(len(owners), dtype=np.int64)
    out = array("q")
    out.frombytes(places.tobytes())
    return out


def _small(f: SearchableConcept) -> tuple[bytes, bytes, bytes, tuple[bytes, ...]]:
    return (f.id.encode(), f.title.encode(), f.description.encode(), tuple(t.encode() for t in f.tags))


def _folded_utf8(values: list[str]) -> list[bytes]:
    """``case_fold(v).encode()`` of every value: one ``lower`` of the values joined by NUL (on
    ASCII, folding is lowering), the few non-ASCII values folded one by one."""
    joined = "\x00".join(values)
    if not values or joined.count("\x00") != len(values) - 1:  # no value or one holding NUL
        return [case_fold(v).encode() for v in values]
    out = joined.lower().encode().split(b"\x00")
    if not joined.isascii():
        for i, value in enumerate(values):
            if not value.isascii():
                out[i] = case_fold(value).encode()
    return out


def _small_of(entries: list[tuple[str, Any]]) -> list[tuple[bytes, bytes, bytes, tuple[bytes, ...]]]:
    """:func:`_small` of ``SearchableConcept.of`` for many concepts at once (the same bytes)."""
    ids = _folded_utf8([cid for cid, _ in entries])
    titles = _folded_utf8([c.title or "" for _, c in entries])
    descriptions = _folded_utf8([c.description or "" for _, c in entries])
    tag_lists = [c.tags for _, c in entries]
    flat = _folded_utf8([t for tags in tag_lists for t in tags])
    bounds = list(accumulate(map(len, tag_lists), initial=0))
    tags = [tuple(flat[a:b]) for a, b in zip(bounds, bounds[1:])]
    return list(zip(ids, titles, descriptions, tags))


def _stored_body(folded: str) -> bytes:
    """The folded body as searched: its UTF-8 bytes (one byte a character when ASCII)."""
    return folded.encode("utf-8", "surrogatepass")


def _add_short_fields(builders: list[PostingsBuilder], rows: list[int], small: list) -> None:
    """Give each short field's builder the values of ``rows`` (``small[i]`` is row ``rows[i]``'s)."""
    for place, builder in enumerate(builders[:-1]):
        if _FIELDS[place] == "tags":
            tagged = [(row, tag) for row, fields in zip(rows, small) for tag in fields[place]]
            builder.add_values([row for row, _ in tagged], [tag for _, tag in tagged])
        else:
            builder.add_values(rows, [fields[place] for fields in small])


class ConceptSearchIndex:
    """Folded fields of every concept of one snapshot, ready for repeated queries."""

    def __init__(self, entries: Sequence[tuple[str, SearchableConcept]]) -> None:
        small = [_small(f) for _, f in entries]
        bodies = [_stored_body(f.body) for _, f in entries]
        builders = [PostingsBuilder() for _ in _FIELDS]
        _add_short_fields(builders, list(range(len(entries))), small)
        for row, body in enumerate(bodies):
            builders[-1].add(row, set(tokens(body)))  # a body repeats its words: once each
        postings = [builder.finish(len(entries)) for builder in builders]
        self._assemble([cid for cid, _ in entries], small, FoldedBodies.of(bodies, on_disk=_bodies_on_disk()),
                       postings, None, [])

    @classmethod
    def _of_rows(cls, ids, small, bodies, postings, boundaries, concepts) -> "ConceptSearchIndex":
        index = cls.__new__(cls)
        index._assemble(ids, small, bodies, postings, boundaries, concepts)
        return index

    def _assemble(self, ids: list[str], small: list, bodies: FoldedBodies, postings: list[TokenPostings],
                  boundaries: np.ndarray | None, concepts: list) -> None:
        self.ids = ids
        # Hits are ordered by field rank, then ID byte-wise: with the rows in that ID order (a
        # snapshot's concepts are), sorting row numbers is sorting IDs; else ``position`` maps
        # a row to its place in that order.
        keys = [byte_key(cid) for cid in ids]
        in_order = all(a < b for a, b in zip(keys, keys[1:]))
        self.position: np.ndarray | None = None
        if not in_order:
            self.position = np.empty(len(ids), dtype=np.intp)
            self.position[sorted(range(len(ids)), key=keys.__getitem__)] = np.arange(len(ids))
        self.bodies = bodies  # per row its folded body (UTF-8 bytes, kept compressed)
        self.postings = postings  # per field kind, in ``_FIELDS`` order
        # per body: its separator-centred grams (boundary_signatures), or None until a query
        # first needs them (:attr:`boundaries`)
        self._boundaries = boundaries
        self.concepts = concepts  # the source Concept objects (for incremental rebuilds)
        # The short fields live in these blobs alone (not also as a tuple of values per row:
        # databricks-okf, 2.9 MiB); ``row_fields`` cuts a row's values out of them.
        self.fields = {
            "id": _Blob.of([(i, row[0]) for i, row in enumerate(small)]),
            "title": _Blob.of([(i, row[1]) for i, row in enumerate(small) if row[1]]),
            "description": _Blob.of([(i, row[2]) for i, row in enumerate(small) if row[2]]),
            "tags": _Blob.of([(i, t) for i, row in enumerate(small) for t in row[3]]),
        }
        # per row, the place of its title / description in their blob (-1: empty)
        self._value_at = {name: _places(self.fields[name].owners, len(ids)) for name in ("title", "description")}

    def field_value(self, place: int, row: int) -> bytes:
        """Row ``row``'s folded id, title or description (``place`` in ``_FIELDS``; b"" when empty)."""
        name = _FIELDS[place]
        if name == "id":
            return self.fields["id"].value(row)
        at = self._value_at[name][row]
        return self.fields[name].value(at) if at >= 0 else b""

    def row_fields(self, row: int) -> tuple[bytes, bytes, bytes, tuple[bytes, ...]]:
        """Row ``row``'s folded (id, title, description, tags), as the index was built from."""
        return (self.field_value(0, row), self.field_value(1, row), self.field_value(2, row),
                self.fields["tags"].values_of(row))

    @property
    def boundaries(self) -> np.ndarray:
        """The bodies' signatures, made at the first query that narrows candidate bodies with
        them (one with a separator): a single-word query never reads them, so a cold first
        search does not pay for them. Two threads may both make them: the same array."""
        boundaries = self._boundaries
        if boundaries is None:
            boundaries = self._boundaries = boundary_signatures.sign(self.bodies)
        return boundaries

    def boundaries_made(self) -> bool:
        return self._boundaries is not None

    def nbytes(self) -> int:
        """About the memory this index holds (postings, bodies and the field blobs)."""
        return sum(self.nbytes_by_part().values())

    def nbytes_by_part(self) -> dict[str, int]:
        """About the memory of each part: the postings of the bodies and of the short fields, the
        folded bodies, the short fields' blobs."""
        blobs = sum(len(b.data) + b.starts.itemsize * len(b.starts) + b.owners.itemsize * len(b.owners)
                    for b in self.fields.values())
        blobs += sum(places.itemsize * len(places) for places in self._value_at.values())
        boundaries = self._boundaries
        return {"body_postings": self.postings[-1].nbytes(),
                "body_boundaries": 0 if boundaries is None else boundaries.nbytes,
                "field_postings": sum(p.nbytes() for p in self.postings[:-1]),
                "bodies": self.bodies.nbytes(), "fields": blobs}

    def search(self, folded_query: str, limit: int, check_cancelled: Callable[[], None] = lambda: None) -> SearchResult:
        needle = folded_query.encode("utf-8", "surrogatepass")
        if _SEP in needle:
            return self._scan(folded_query, needle, limit, check_cancelled)
        # field[row]: the best field matched so far (0 none, else 1 + its place in _FIELDS)
        field = np.zeros(len(self.ids), dtype=np.int8)
        for place, name in reversed(list(enumerate(_FIELDS[:-1]))):  # better fields overwrite
            candidates = self.postings[place].candidates(needle)
            if candidates.exact:
                field[candidates.rows] = place + 1
            elif candidates.rows is not None and len(candidates.rows) <= len(self.ids) // FEW_CANDIDATES:
                field[self._short_field_holding(place, candidates.rows, needle)] = place + 1
            else:  # one C-level search of the field's blob
                owners = self.fields[name].owners_matching(needle)
                if owners:
                    field[np.fromiter(owners, dtype=np.intp, count=len(owners))] = place + 1
            check_cancelled()
        self._mark_body(field, needle, check_cancelled)
        return self._page(field, limit)

    def _short_field_holding(self, place: int, rows: np.ndarray, needle: bytes) -> list[int]:
        """The ``rows`` whose short field ``place`` (id, title, description or a tag) holds ``needle``."""
        if _FIELDS[place] == "tags":
            tags = self.fields["tags"]
            return [row for row in rows.tolist() if any(needle in tag for tag in tags.values_of(row))]
        values = [self.field_value(place, row) for row in rows.tolist()]
        return list(compress(rows.tolist(), map(bytes.__contains__, values, repeat(needle))))

    def _mark_body(self, field: np.ndarray, needle: bytes, check_cancelled: Callable[[], None]) -> None:
        """Mark the rows no better field matched whose body holds ``needle``: straight from the
        postings when they are exact, else each candidate body searched in a C-level loop."""
        candidates = self.postings[-1].candidates(needle)
        rows_to_check = np.arange(len(self.ids)) if candidates.rows is None else candidates.rows
        rows_to_check = rows_to_check[field[rows_to_check] == 0]
        if candidates.exact:
            field[rows_to_check] = len(_FIELDS)
            return
        if boundary_signatures.query_bits(needle):  # else the signatures cannot narrow anything
            rows_to_check = boundary_signatures.narrow(self.boundaries, rows_to_check, needle)
        field[self._bodies_holding(rows_to_check, needle, check_cancelled)] = len(_FIELDS)

    def _bodies_holding(self, rows: np.ndarray, needle: bytes, check_cancelled: Callable[[], None]) -> list[int]:
        """The ``rows`` whose body holds ``needle``, read in spans, a cancellation check every 4,096."""
        found: list[int] = []
        for start in range(0, len(rows), 4096):
            check_cancelled()
            found += self.bodies.holding(rows[start:start + 4096], needle)
        return found

    def _page(self, field: np.ndarray, limit: int) -> SearchResult:
        """The first ``limit`` hits in (field rank, ID) order and the total; rows are taken in
        row order, which is the ID byte order (else put in it through ``position``)."""
        page: list[tuple[str, str]] = []
        for place, name in enumerate(_FIELDS):
            if len(page) >= limit:
                break
            rows = np.flatnonzero(field == place + 1)
            if self.position is not None:
                rows = rows[np.argsort(self.position[rows], kind="stable")]
            page.extend((self.ids[row], name) for row in rows[: limit - len(page)].tolist())
        total = int(np.count_nonzero(field))
        return SearchResult(page, total, total > len(page))

    def _scan(self, query: str, needle: bytes, limit: int, check_cancelled: Callable[[], None]) -> SearchResult:
        """Per-concept scan, used when the query holds the blob separator (NUL)."""
        matches, unmatched = [], []
        for i, cid in enumerate(self.ids):
            id_, title, description, tags = self.row_fields(i)
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
            else:
                unmatched.append(i)
        rows = np.array(unmatched, dtype=np.intp)
        matches += [(self.ids[row], "body") for row in self._bodies_holding(rows, needle, check_cancelled)]
        matches.sort(key=lambda hit: search_hit_key(FIELD_RANKS[hit[1]], hit[0]))
        page, total, truncated = truncate(matches, limit)
        return SearchResult(page, total, truncated)


MAX_REMEMBERED_ROOTS = 8


def _previous(runtime: process.Runtime) -> process.Cache:
    """The last index built per root (stamp: none), whose rows the next build reuses."""
    return runtime.cache("okf.search_rows", max_entries=MAX_REMEMBERED_ROOTS, sizeof=ConceptSearchIndex.nbytes)


def index_for_snapshot(snapshot: Any, check_cancelled: Callable[[], None] = lambda: None) -> ConceptSearchIndex:
    """The search index of ``snapshot``, reusing the rows of unchanged concepts.

    A row is reused only for the very same :class:`model.Concept` object the previous index of
    this root was built from; the snapshot cache keeps that object exactly while the file's
    bytes are unchanged, so a changed file is always folded and tokenised again.
    """
    with process.current().gc_paused():
        return _build_for_snapshot(snapshot, check_cancelled)


def _bodies_on_disk() -> bool:
    """Whether folded bodies go to a temporary file (``KNOWSPEC_SEARCH_BODIES``, :mod:`folded_bodies`)."""
    return process.current().settings.search_bodies != "memory"


def _build_for_snapshot(snapshot: Any, check_cancelled: Callable[[], None]) -> ConceptSearchIndex:
    remembered = _previous(process.current())
    previous = remembered.peek(snapshot.root)
    position = {id(c): i for i, c in enumerate(previous.concepts)} if previous is not None else {}
    ids, small, concepts = [], [], []
    bodies: list[bytes | memoryview] = []
    builders = [PostingsBuilder(previous.postings[k] if previous is not None else None) for k in range(len(_FIELDS))]
    # fresh rows' signatures are made now only when the previous index has made its own
    signed = previous is not None and previous.boundaries_made()
    copy_from, copy_to, fresh_rows, fresh_entries, fresh_bodies = [], [], [], [], []
    add_body = builders[-1].add
    for row, (cid, concept) in enumerate(snapshot.concepts.items()):
        if row % 256 == 0:
            check_cancelled()
        j = position.get(id(concept))
        if j is not None and previous is not None and previous.concepts[j] is concept:
            small.append(previous.row_fields(j))
            bodies.append(b"")  # its stored body is read below with the other carried rows', in few reads
            copy_from.append(j)
            copy_to.append(row)
        else:
            raw_body = concept.body_bytes
            # folding is lowering ASCII letters: no decode
            folded = raw_body.lower() if raw_body.isascii() else _stored_body(case_fold(concept.body))
            small.append(None)  # made for every fresh row at once below
            bodies.append(folded_bodies.compress(folded))
            add_body(row, set(tokens(folded)))  # a body repeats its words: once each
            fresh_rows.append(row)
            fresh_entries.append((cid, concept))
            if signed:
                fresh_bodies.append(folded)
        ids.append(cid)
        concepts.append(concept)
    if previous is not None:
        for row, (_, stored) in zip(copy_to, previous.bodies.stored_rows(copy_from)):
            bodies[row] = stored
    fresh_small = _small_of(fresh_entries)
    for row, fields in zip(fresh_rows, fresh_small):
        small[row] = fields
    _add_short_fields(builders, fresh_rows, fresh_small)
    postings = [builder.finish(len(ids), copy_from, copy_to) for builder in builders]
    boundaries = None
    if signed:
        assert previous is not None
        boundaries = np.zeros((len(ids), boundary_signatures.BITS // 8), dtype=np.uint8)
        boundaries[fresh_rows] = boundary_signatures.sign(fresh_bodies)
        if copy_from:
            boundaries[copy_to] = previous.boundaries[copy_from]
    index = ConceptSearchIndex._of_rows(ids, small, FoldedBodies(bodies, on_disk=_bodies_on_disk()), postings,
                                        boundaries, concepts)
    remembered.put(snapshot.root, None, index)
    return index
