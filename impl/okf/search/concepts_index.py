"""A per-snapshot index that answers search_concepts without scanning every field in Python.

Same rule as :func:`search_concepts.search` (the reference scan, kept for tests): folded
substring containment, best field wins. The speed-ups, none of which changes an answer:

- every field kind (id, title, description, tags, body) has an inverted index of its word tokens
  (:mod:`token_postings`): a query that is one token-piece (no space or punctuation) is answered
  from the vocabulary and sorted row arrays alone, in time proportional to its hits, never
  proportional to the concepts;
- a query with separators takes the rows holding each of its pieces where it stands; candidate
  bodies are narrowed by their signatures of separator-centred trigrams and 5-grams
  (:mod:`boundary_signatures`: which words are side by side, made by a helper process at the first
  such query) and each is decompressed and searched in C; a
  short field checks its few candidates one by one, else one ``bytes.find`` loop over the field's
  values joined into one UTF-8 blob with NUL separators visits only real matches (a query
  containing NUL falls back to the per-concept scan);
- sets of rows are bitmaps (:mod:`row_bitmaps`): a field's hits, the rows a better field took,
  the candidates left, each one C-level pass over a word per 64 rows, whatever the hits;
- only the hits the page shows are put in order (row numbers, which follow the ID order).

Substring search on UTF-8 bytes is exact for code-point substrings (UTF-8 is self-synchronising),
and folded bodies are stored as UTF-8 bytes (a wide Python string takes 2-4 bytes a character),
LZ4-compressed (:mod:`folded_bodies`, which says why they are kept at all).

:func:`index_for_snapshot` builds the index of a snapshot from the root's previous one: rows of
concepts that are the very same objects as there (same bytes, hence same derivation) keep their
folded fields and stored bodies; only new or changed concepts are folded. The postings are built
for every row, by a helper process for a large index (:mod:`index_helper`, which keeps numpy and
the build's temporaries out of the server), in Python for a small one.
"""

from __future__ import annotations

import bisect
import threading
from array import array
from itertools import accumulate, compress, islice, repeat
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence

from knowspec.impl import runtime as process
from knowspec.impl.okf.search import boundary_signatures, folded_bodies, index_helper, row_bitmaps
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
# An index of this many rows has its postings built by the helper process: starting it (0.1-0.2 s,
# on the other core while the bodies are folded) then costs less than the pure-Python build saves.
HELPER_MIN_ROWS = 1000
BODIES_PER_MESSAGE = 256  # bodies sent to the helper at a time


@dataclass(slots=True)
class _Blob:
    """Values of one field kind joined by NUL; ``owners[i]`` is the concept of value ``i``.
    Positions and owners are machine integers (``array``): 8 bytes an entry, not a list slot
    and an int object (databricks-okf: 33,600 values)."""

    data: bytes = b""
    starts: array = field(default_factory=lambda: array("q"))
    owners: array = field(default_factory=lambda: array("q"))

    def fill(self, values: Sequence[tuple[int, bytes]]) -> "_Blob":
        """This (empty) blob made that of ``values``."""
        self.owners.extend(owner for owner, _ in values)
        texts = [value for _, value in values]
        # each value starts one byte (the NUL) past the end of the one before
        self.starts.extend(accumulate(map(len, texts), lambda pos, size: pos + size + 1, initial=0))
        self.starts.pop()
        self.data = _SEP.join(texts)
        return self

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


def _fill_places(places: array, owners: array, n_rows: int) -> None:
    """``places`` (empty) made, per row, the index of its value among ``owners`` (at most one
    each), else -1."""
    places.extend(repeat(-1, n_rows))
    for at, owner in enumerate(owners):
        places[owner] = at


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


class ConceptSearchIndex:
    """Folded fields of every concept of one snapshot, ready for repeated queries."""

    def __init__(self, entries: Sequence[tuple[str, SearchableConcept]],
                 check_cancelled: Callable[[], None] = lambda: None) -> None:
        self._hold(len(entries))
        self._fill_fields([_small(f) for _, f in entries])
        with _postings_helper(len(entries)) as helper:
            if helper is not None:
                helper.send_fields([self._field_payload(name) for name in _FIELDS[:-1]])
            stored = [folded_bodies.compress(_stored_body(f.body)) for _, f in entries]
            unsent = _BodiesToSend(helper)
            for row, body in enumerate(stored):
                unsent.send(row, body)
            unsent.flush()
            self._fill([cid for cid, _ in entries], stored, None, [], helper, check_cancelled)

    @classmethod
    def _empty(cls, n_rows: int) -> "ConceptSearchIndex":
        index = cls.__new__(cls)
        index._hold(n_rows)
        return index

    def _hold(self, n_rows: int) -> None:
        """Make every object the index keeps, empty, before the build's temporaries exist: one
        born among them would keep their allocator pools resident once they are freed
        (databricks-okf's index, built in process, left 8 MiB more behind without this)."""
        self.ids: list[str] = []
        self.concepts: list = []  # the source Concept objects (for incremental rebuilds)
        # Hits are ordered by field rank, then ID byte-wise: with the rows in that ID order (a
        # snapshot's concepts are), sorting row numbers is sorting IDs; else ``position`` maps
        # a row to its place in that order.
        self.position: array | None = None
        self.bodies = FoldedBodies.empty(on_disk=_bodies_on_disk())  # per row its folded body, compressed
        # the bodies' signatures by column (boundary_signatures), or None until a query first
        # needs them (:meth:`signatures`)
        self._boundaries: bytes | None = None
        self._signing = threading.Lock()
        self._signing_failed = False
        # The short fields live in these blobs alone (not also as a tuple of values per row:
        # databricks-okf, 2.9 MiB); ``row_fields`` cuts a row's values out of them.
        self.fields = {name: _Blob() for name in _FIELDS[:-1]}
        # per row, the place of its title / description in their blob (-1: empty)
        self._value_at = {name: array("q") for name in ("title", "description")}
        self.postings = [TokenPostings.empty(n_rows) for _ in _FIELDS]  # per field kind, in ``_FIELDS`` order

    def _fill_fields(self, small: list) -> None:
        """Put each row's folded short fields (``small``) into the blobs :meth:`_hold` made."""
        self.fields["id"].fill([(i, row[0]) for i, row in enumerate(small)])
        self.fields["title"].fill([(i, row[1]) for i, row in enumerate(small) if row[1]])
        self.fields["description"].fill([(i, row[2]) for i, row in enumerate(small) if row[2]])
        self.fields["tags"].fill([(i, t) for i, row in enumerate(small) for t in row[3]])
        for name, places in self._value_at.items():
            _fill_places(places, self.fields[name].owners, len(small))

    def _fill(self, ids: list[str], stored_bodies: Sequence[bytes | memoryview], boundaries: bytes | None,
              concepts: list, helper: index_helper.PostingsJob | None, check_cancelled: Callable[[], None]) -> None:
        """Put the rows into the objects :meth:`_hold` made (the short fields are in already),
        then build the postings (the fields and bodies were sent to ``helper``, if any)."""
        self.ids.extend(ids)
        self.concepts.extend(concepts)
        keys = [byte_key(cid) for cid in ids]
        if not all(a < b for a, b in zip(keys, keys[1:])):
            self.position = array("q", bytes(8 * len(ids)))
            for place, row in enumerate(sorted(range(len(ids)), key=keys.__getitem__)):
                self.position[row] = place
        self.bodies.fill(stored_bodies)
        self._boundaries = boundaries
        del stored_bodies, keys
        self._build_postings(helper, check_cancelled)

    def _build_postings(self, helper: index_helper.PostingsJob | None, check_cancelled: Callable[[], None]) -> None:
        """Every field's postings: made by the helper processes (numpy), where they were started and
        did their job; else here, in Python."""
        if helper is not None:
            built = helper.result(check_cancelled)
            if built is not None:
                for postings, buffers in zip(self.postings, built):
                    postings.fill_buffers(buffers)
                return
        for place, name in enumerate(_FIELDS[:-1]):
            blob = self.fields[name]
            builder = PostingsBuilder(len(self.ids), self.postings[place])
            builder.add_values(blob.owners, [blob.value(i) for i in range(len(blob.owners))])
            builder.finish()
        builder = PostingsBuilder(len(self.ids), self.postings[-1])
        for row, body in enumerate(self.bodies):
            if row % 256 == 0:
                check_cancelled()
            builder.add(row, tokens(body))
        builder.finish()

    def _field_payload(self, name: str) -> dict[str, bytes]:
        blob = self.fields[name]
        return {"data": blob.data, "starts": blob.starts.tobytes(), "owners": blob.owners.tobytes()}

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

    def signatures(self, check_cancelled: Callable[[], None] = lambda: None) -> bytes | None:
        """The bodies' signatures by column, made at the first query that narrows candidate
        bodies with them (one with a separator): a single-word query never needs them, so a cold
        first search does not pay for them. None where no helper could make them (the candidates
        are then all verified)."""
        with self._signing:
            if self._boundaries is None and not self._signing_failed and self.ids:
                self._boundaries = index_helper.run("sign", {"bodies": self.bodies.handed_down()}, check_cancelled)
                self._signing_failed = self._boundaries is None
            return self._boundaries

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
                "body_boundaries": 0 if boundaries is None else len(boundaries),
                "field_postings": sum(p.nbytes() for p in self.postings[:-1]),
                "bodies": self.bodies.nbytes(), "fields": blobs}

    def search(self, folded_query: str, limit: int, check_cancelled: Callable[[], None] = lambda: None) -> SearchResult:
        needle = folded_query.encode("utf-8", "surrogatepass")
        if _SEP in needle:
            return self._scan(folded_query, needle, limit, check_cancelled)
        hits = []  # per field kind, the rows it is the best matching field of (bitmaps)
        taken = 0  # rows a better field matched
        for place, name in enumerate(_FIELDS[:-1]):
            candidates = self.postings[place].candidates(needle)
            if candidates.exact:
                matched = candidates.rows or 0
            elif candidates.rows is not None and candidates.rows.bit_count() <= len(self.ids) // FEW_CANDIDATES:
                matched = row_bitmaps.of_rows(self._short_field_holding(place, candidates.rows, needle), len(self.ids))
            else:  # one C-level search of the field's blob
                matched = row_bitmaps.of_rows(self.fields[name].owners_matching(needle), len(self.ids))
            hits.append(matched & ~taken)
            taken |= matched
            check_cancelled()
        hits.append(self._body_hits(taken, needle, check_cancelled))
        return self._page(hits, limit)

    def _short_field_holding(self, place: int, rows: int, needle: bytes) -> list[int]:
        """The ``rows`` whose short field ``place`` (id, title, description or a tag) holds ``needle``."""
        if _FIELDS[place] == "tags":
            tags = self.fields["tags"]
            return [row for row in row_bitmaps.rows(rows) if any(needle in tag for tag in tags.values_of(row))]
        listed = list(row_bitmaps.rows(rows))
        values = [self.field_value(place, row) for row in listed]
        return list(compress(listed, map(bytes.__contains__, values, repeat(needle))))

    def _body_hits(self, taken: int, needle: bytes, check_cancelled: Callable[[], None]) -> int:
        """The rows no better field matched whose body holds ``needle``: straight from the
        postings when they are exact, else each candidate body searched in a C-level loop."""
        candidates = self.postings[-1].candidates(needle)
        every = row_bitmaps.every_row(len(self.ids))
        rows = (every if candidates.rows is None else candidates.rows) & ~taken
        if candidates.exact or not rows:
            return rows
        if boundary_signatures.query_bits(needle):  # else the signatures cannot narrow anything
            columns = self.signatures(check_cancelled)
            if columns is not None:
                rows = boundary_signatures.narrow(columns, len(self.ids), rows, needle)
        return row_bitmaps.of_rows(self._bodies_holding(row_bitmaps.rows(rows), needle, check_cancelled), len(self.ids))

    def _bodies_holding(self, rows: Iterable[int], needle: bytes, check_cancelled: Callable[[], None]) -> list[int]:
        """The ``rows`` whose body holds ``needle``, read in spans, a cancellation check every 4,096."""
        found: list[int] = []
        batches = iter(rows)
        while batch := list(islice(batches, 4096)):
            check_cancelled()
            found += self.bodies.holding(batch, needle)
        return found

    def _page(self, hits: list[int], limit: int) -> SearchResult:
        """The first ``limit`` hits in (field rank, ID) order and the total; rows are taken in
        row order, which is the ID byte order (else put in it through ``position``)."""
        page: list[tuple[str, str]] = []
        for name, rows in zip(_FIELDS, hits):
            if len(page) >= limit:
                break
            if self.position is None:
                ordered = row_bitmaps.first_rows(rows, limit - len(page))
            else:
                ordered = sorted(row_bitmaps.rows(rows), key=self.position.__getitem__)[:limit - len(page)]
            page.extend((self.ids[row], name) for row in ordered)
        total = sum(rows.bit_count() for rows in hits)
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
        matches += [(self.ids[row], "body") for row in self._bodies_holding(unmatched, needle, check_cancelled)]
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


class _BodiesToSend:
    """Stored bodies on their way to the helpers, ``BODIES_PER_MESSAGE`` at a time."""

    def __init__(self, helper: index_helper.PostingsJob | None) -> None:
        self.helper = helper
        self.rows: list[int] = []
        self.stored: list[bytes] = []

    def send(self, row: int, stored: bytes | memoryview) -> None:
        if self.helper is None:
            return
        self.rows.append(row)
        self.stored.append(bytes(stored))
        if len(self.rows) == BODIES_PER_MESSAGE:
            self.flush()

    def flush(self) -> None:
        if self.helper is not None and self.rows:
            self.helper.send_bodies(self.rows, self.stored)
        self.rows, self.stored = [], []


@contextmanager
def _postings_helper(n_rows: int) -> Iterator[index_helper.PostingsJob | None]:
    """Helper processes started on the postings of an index of ``n_rows`` rows, if that large
    (None: built in process, as when no descriptor is left for their pipe), stopped on leaving."""
    helper = None
    if n_rows >= HELPER_MIN_ROWS:
        try:
            helper = index_helper.PostingsJob(n_rows)
        except OSError as error:
            index_helper.log.warning("could not start the search index helpers (%s)", error)
    try:
        yield helper
    finally:
        if helper is not None:
            helper.stop()


def _build_for_snapshot(snapshot: Any, check_cancelled: Callable[[], None]) -> ConceptSearchIndex:
    with _postings_helper(len(snapshot.concepts)) as helper:
        return _build_rows(snapshot, helper, check_cancelled)


def _build_rows(snapshot: Any, helper: index_helper.PostingsJob | None,
                check_cancelled: Callable[[], None]) -> ConceptSearchIndex:
    remembered = _previous(process.current())
    previous = remembered.peek(snapshot.root)
    index = ConceptSearchIndex._empty(len(snapshot.concepts))
    ids, concepts = list(snapshot.concepts), list(snapshot.concepts.values())
    # the previous row of each concept that is the very same object there (else -1: fresh)
    position = {id(c): i for i, c in enumerate(previous.concepts)} if previous is not None else {}
    carried = [j if previous is not None and (j := position.get(id(c), -1)) >= 0 and previous.concepts[j] is c else -1
               for c in concepts]
    fresh_rows = [row for row, j in enumerate(carried) if j < 0]
    copy_to = [row for row, j in enumerate(carried) if j >= 0]
    copy_from = [carried[row] for row in copy_to]
    # the short fields first: the helper builds their postings while the bodies are folded
    small: list = [previous.row_fields(j) if previous is not None and j >= 0 else None for j in carried]
    for row, fields in zip(fresh_rows, _small_of([(ids[row], concepts[row]) for row in fresh_rows])):
        small[row] = fields
    index._fill_fields(small)
    del small, carried, position
    if helper is not None:
        helper.send_fields([index._field_payload(name) for name in _FIELDS[:-1]])
    # fresh rows' signatures are made now only when the previous index has made its own (and its
    # rows stay where they are: see the end)
    signed = previous is not None and previous.boundaries_made()
    bodies: list[bytes | memoryview] = [b""] * len(ids)
    fresh_bodies = []
    unsent = _BodiesToSend(helper)
    for done, row in enumerate(fresh_rows):
        if done % 256 == 0:
            check_cancelled()
        concept = concepts[row]
        raw_body = concept.body_bytes
        # folding is lowering ASCII letters: no decode
        folded = raw_body.lower() if raw_body.isascii() else _stored_body(case_fold(concept.body))
        bodies[row] = stored = folded_bodies.compress(folded)
        unsent.send(row, stored)  # the helper tokenises them meanwhile, on the other core
        if signed:
            fresh_bodies.append(folded)
    if previous is not None:
        for row, (_, kept) in zip(copy_to, previous.bodies.stored_rows(copy_from)):
            bodies[row] = kept
            unsent.send(row, kept)
    unsent.flush()
    boundaries = None
    if (signed and previous is not None and len(ids) == len(previous.ids) and copy_from == copy_to
            and len(fresh_rows) <= boundary_signatures.SPLICE_MAX_ROWS):
        # a few bodies changed in place: their bits replace theirs in the previous columns, in
        # process; else the next query with a separator has every body signed again
        boundaries = boundary_signatures.splice(previous.signatures() or b"", len(ids),
                                                dict(zip(fresh_rows, map(boundary_signatures.body_bits, fresh_bodies))))
    del fresh_bodies, previous
    index._fill(ids, bodies, boundaries, concepts, helper, check_cancelled)
    remembered.put(snapshot.root, None, index)
    return index
