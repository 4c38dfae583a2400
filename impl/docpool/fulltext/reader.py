"""The full-text engine's data: a pool's index as numpy postings, read once per change stamp.

``FtsArrays`` is the layout every ranker of ``fulltext.rank`` reads: a sorted vocabulary,
postings (term -> rows with per-column instance counts), tokens per row, the row -> chunk ->
topic maps, and the table-wide statistics FTS5's ``bm25()`` uses. Two readers fill it:

- ``build`` reads a SQLite pool's FTS5 index (``fts5vocab`` instances and the averages record)
  once per change stamp; ``FtsArraysCache`` keeps it per pool file. A search waits for them
  (the SQLite storage asks in ``sync`` mode): FTS5 never ranks; ``KNOWSPEC_FTS_ARRAYS`` now only
  decides whether other callers of ``get`` start a build in a thread (``background``) or not.
- ``FtsIndex.build`` tokenises chunk rows itself (``rules.fts5.token_texts``, unicode61 over
  folded text) for a storage without FTS5 (PostgreSQL, Firebird), and keeps their original
  texts and the topics' titles, so a search there needs no further SQL.

Both are made at import time too and persisted in the pool (``doc$fts_snapshot``, written in the
import's own transaction, see ``persisted``): ``dump`` / ``load`` turn an index into one byte
string and back (numpy arrays as raw bytes, texts decoded only when a row is read), tagged with
the pool's revision (``sqlite_revision``, or the pool's import counter), head first and cut into
parts (``parts``). A reader loads only the head, and only when that revision is the pool's
revision in the same snapshot, else it builds as above: a stale snapshot never answers. Postings
and texts stay in the pool until a search slices them (``fulltext.parts``).

Nothing here ranks: ranking is ``fulltext.rank``, snippets ``fulltext.snippet``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import sqlite3
import zlib
import threading
from array import array
from collections import defaultdict
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from knowspec.impl import runtime as process
from knowspec.impl.docpool.fulltext.parts import LazyArray, LazyBytes, PartReader, SnapshotParts, prefetch_slices
from knowspec.impl.rules import fts5, fts5_tokenizer
from knowspec.impl.rules.fold import fold

log = logging.getLogger("knowspec.docpool.fulltext")

FTS_TABLE = "doc$chunk_fts"
COLUMNS = ("title", "heading", "body")
MAX_CACHED_POOLS = 4


@dataclass(frozen=True)
class FtsArrays:
    """One pool's FTS5 index as arrays (rows = indexed chunks, sorted by chunk id)."""

    terms: list[str]            # sorted vocabulary
    term_start: np.ndarray      # postings of terms[k]: [term_start[k], term_start[k + 1])
    post_row: np.ndarray | LazyArray   # int32 row of each posting (persisted: read when sliced)
    post_tf: np.ndarray | LazyArray    # uint16 (int32 if needed) (postings, columns): instances per column
    row_chunk: np.ndarray       # int64 chunk id per row
    row_topic: np.ndarray       # int64 index into ``topic_id`` per row
    row_len: np.ndarray         # float64 tokens per row over all columns (FTS5's ``D``)
    topic_id: np.ndarray        # int64 topic ids, sorted
    topic_collection: list[str]
    topic_slug: list[str]
    n_rows: int                 # FTS5's row count (averages record)
    total_tokens: int           # FTS5's token total over all columns (averages record)
    _masks: dict[str, np.ndarray] = field(default_factory=dict, compare=False, repr=False)

    def collection_mask(self, collection: str) -> np.ndarray:
        """Boolean mask over ``topic_id``: the topics of ``collection`` (remembered)."""
        mask = self._masks.get(collection)
        if mask is None:
            mask = np.fromiter((c == collection for c in self.topic_collection), bool, len(self.topic_id))
            self._masks[collection] = mask
        return mask

    def term_range(self, token: str, prefix: bool) -> tuple[int, int]:
        """Vocabulary indexes ``[lo, hi)`` of ``token`` (every term starting with it when ``prefix``)."""
        if prefix:
            found = fts5.prefix_range(self.terms, token)
            return found.start, found.stop
        lo = bisect_left(self.terms, token)
        return lo, (lo + 1 if lo < len(self.terms) and self.terms[lo] == token else lo)


def _varints(blob: bytes) -> list[int]:
    """SQLite varints (FTS5's record encoding): 7 bits a byte, big-endian, 9th byte whole."""
    out, i = [], 0
    while i < len(blob):
        value = 0
        for k in range(9):
            byte = blob[i]
            i += 1
            if k == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


def read_totals(con: sqlite3.Connection, schema: str = "main") -> tuple[int, int]:
    """(rows, tokens over all columns) from FTS5's averages record, the numbers ``bm25`` uses."""
    row = con.execute(f'select block from {schema}."{FTS_TABLE}_data" where id = 1').fetchone()
    values = _varints(bytes(row[0])) if row and row[0] else [0]
    return values[0], sum(values[1:1 + len(COLUMNS)])


def build(path: Path | str) -> FtsArrays:
    """Read a pool file's FTS5 index into ``FtsArrays`` (its own read-only connection)."""
    con = sqlite3.connect(Path(path).absolute().as_uri() + "?mode=ro", uri=True)
    try:
        con.execute("begin")  # one snapshot for the index, the chunks and the topics
        return read_arrays(con)
    finally:
        con.close()


def read_arrays(con: sqlite3.Connection) -> FtsArrays:
    """``FtsArrays`` of the FTS5 index as ``con`` sees it (inside its transaction, if any: an
    import reads the index it has just rebuilt, before it commits)."""
    con.execute(f"create virtual table temp.v using fts5vocab(main, '{FTS_TABLE}', 'instance')")
    try:
        cases = " ".join(f"when '{c}' then {i}" for i, c in enumerate(COLUMNS))
        terms: list[str] = []
        lengths: list[int] = []
        doc_parts: list[str] = []
        col_parts: list[str] = []
        # fts5vocab scans in (term, doc, col, offset) order, so this GROUP BY streams.
        for term, docs, cols in con.execute(
                f"select term, group_concat(doc), group_concat(case col {cases} end, '') "
                "from temp.v group by term order by term"):
            terms.append(term)
            lengths.append(len(cols))
            doc_parts.append(docs)
            col_parts.append(cols)
        n_rows, total_tokens = read_totals(con)
        chunk_topic = np.array(con.execute('select id, topic_id from "doc$chunk" order by id').fetchall(),
                               dtype=np.int64).reshape(-1, 2)
        topics = con.execute('select id, collection, slug from "doc$topic" order by id').fetchall()
    finally:
        con.execute("drop table temp.v")
    docs = np.fromstring(",".join(doc_parts), dtype=np.int64, sep=",") if doc_parts else np.zeros(0, np.int64)
    del doc_parts
    cols = np.frombuffer("".join(col_parts).encode("ascii"), dtype=np.uint8) - ord("0")
    del col_parts
    term = np.repeat(np.arange(len(terms), dtype=np.int32), lengths)
    row_chunk = np.unique(docs)
    term_start, post_row, post_tf, row_len = postings(term, np.searchsorted(row_chunk, docs), cols,
                                                      len(terms), len(row_chunk))
    topic_id = np.array([t[0] for t in topics], dtype=np.int64)
    row_topic_id = lookup(chunk_topic[:, 0], chunk_topic[:, 1], row_chunk)
    row_topic = lookup(topic_id, np.arange(len(topic_id)), row_topic_id)
    return FtsArrays(
        terms=terms, term_start=term_start, post_row=post_row, post_tf=post_tf, row_chunk=row_chunk,
        row_topic=row_topic, row_len=row_len,
        topic_id=topic_id, topic_collection=[t[1] for t in topics], topic_slug=[t[2] for t in topics],
        n_rows=n_rows, total_tokens=total_tokens)


def postings(term: np.ndarray, row: np.ndarray, col: np.ndarray, n_terms: int, n_rows: int, *,
             ordered: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(term_start, post_row, post_tf, row_len)`` of ``FtsArrays`` from one (term id, row,
    column) per token instance, in any order (FTS5's own order is kept without sorting);
    ``ordered``: the caller put them in (term, row, column) order, so that is not checked."""
    if not ordered and not _sorted_by(term, row, col):
        order = np.lexsort((col, row, term))
        term, row, col = term[order], row[order], col[order]
    new_pair = np.ones(len(term), dtype=bool)
    new_pair[1:] = (term[1:] != term[:-1]) | (row[1:] != row[:-1])
    # Counted per run of one (term, row, column): arrays of the runs, never one more of every token.
    new_cell = new_pair.copy()
    new_cell[1:] |= col[1:] != col[:-1]
    starts = np.flatnonzero(new_cell)
    del new_cell
    counts = np.diff(starts, append=len(term)).astype(np.int32 if len(term) < 2 ** 31 else np.int64)
    pair_of_run = np.cumsum(new_pair[starts], dtype=counts.dtype)
    pair_of_run -= 1
    n_pairs = int(pair_of_run[-1]) + 1 if len(pair_of_run) else 0
    post_tf = np.zeros((n_pairs, len(COLUMNS)), dtype=np.uint16 if counts.max(initial=0) < 2 ** 16 else np.int32)
    post_tf[pair_of_run, col[starts]] = counts
    del starts, counts, pair_of_run
    term_start = np.searchsorted(term[new_pair], np.arange(n_terms + 1))
    row_len = np.bincount(row, minlength=n_rows).astype(np.float64)  # FTS5's D: tokens per row
    return term_start, row[new_pair].astype(np.int32), post_tf, row_len


def _sorted_by(term: np.ndarray, row: np.ndarray, col: np.ndarray) -> bool:
    """Whether instances come ordered by (term, row, column)."""
    same_term = term[1:] == term[:-1]
    later_row = row[1:] > row[:-1]
    same_row = row[1:] == row[:-1]
    return bool(np.all((term[1:] > term[:-1]) | (same_term & (later_row | (same_row & (col[1:] >= col[:-1]))))))


def lookup(keys: np.ndarray, values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """``values[keys == w]`` for each ``w`` of ``wanted`` (``keys`` sorted), -1 where absent."""
    if not len(keys):
        return np.full(len(wanted), -1, dtype=np.int64)
    at = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
    return np.where(keys[at] == wanted, values[at], -1).astype(np.int64)


_TEXT_END = "\0"  # joins the texts of a batch: ASCII NUL is a separator, so no text yields it as a token
TOKEN_BATCH = 4096  # texts per join and split (bounds the token strings held at once)


def token_ids(texts: Sequence[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """``(terms in order of first sight, the term id of every token in text order, tokens per
    text)`` of ``rules.fts5.token_texts(fold(text))`` for every text.

    A batch of texts is folded and split in one join and one ``split``, and every token string
    gets its id from a dict that numbers a new key by its own length, so no Python code runs
    per token (an import tokenises ~4M of them). Ids are int32: 4 bytes a token, not 8, where
    an import's memory peaks."""
    seen: defaultdict[str, int] = defaultdict()
    seen.default_factory = seen.__len__
    seen[_TEXT_END], seen[""]  # ids 0 (a text ended) and 1 (nothing between two spaces)
    found = array("i")
    for k in range(0, len(texts), TOKEN_BATCH):
        batch = texts[k:k + TOKEN_BATCH]
        joined = f" {_TEXT_END} ".join(map(fts5_tokenizer.folded_separated, batch)) + f" {_TEXT_END}"
        found.extend(map(seen.__getitem__, joined.split(" ")))
    every = np.frombuffer(found, dtype=np.int32) if len(found) else np.zeros(0, dtype=np.int32)
    is_token = every > 1
    ends = np.flatnonzero(every == 0)  # one per text
    lengths = np.add.reduceat(is_token, np.r_[0, ends[:-1] + 1], dtype=np.int64) if len(ends) else ends
    ids = every[is_token]
    del every, found, is_token
    ids -= 2
    return list(seen)[2:], ids, lengths


@dataclass
class FtsIndex:
    """What a search ranks: one pool's ``FtsArrays`` at one change stamp. ``texts`` (original
    title, heading, body per row) are kept only by ``FtsIndex.build`` (a storage without FTS5);
    ``None`` means the search layer reads them from the storage. Topic titles are never kept:
    the search reads a hit's topic from the storage with the caller's ACL anyway."""

    stamp: tuple
    arrays: FtsArrays
    texts: Sequence[tuple[str, str, str]] | None = None   # per row (row = arrays.row_chunk)

    @classmethod
    def build(cls, stamp: tuple, chunks: Iterable[tuple[int, int, str, str, str]],
              topics: Iterable[tuple[Any, ...]]) -> "FtsIndex":
        """Index ``(chunk_id, topic_id, title, heading, body)`` rows (original text, folded here)
        of the topics ``(topic_id, collection, slug, ...)`` (columns after the slug are not
        read), with the statistics of the whole table (row count, total tokens), as FTS5 keeps them."""
        rows = sorted((int(c[0]), int(c[1]), (c[2] or "", c[3] or "", c[4] or "")) for c in chunks)
        topic_rows = sorted((int(t[0]), t[1], t[2]) for t in topics)
        n_cols = len(COLUMNS)
        first_seen, ids, lengths = token_ids([text for _, _, texts in rows for text in texts])
        order = sorted(range(len(first_seen)), key=first_seen.__getitem__)
        terms = [first_seen[i] for i in order]
        rank = np.empty(len(order), dtype=np.int32)
        rank[np.asarray(order, dtype=np.int64)] = np.arange(len(order), dtype=np.int32)
        term = rank[ids] if len(ids) else np.zeros(0, dtype=np.int32)
        del ids
        # (row, column) of each token, int32 like the term ids (a pool past ~700M chunks would not fit)
        cell_type = np.int32 if len(rows) * n_cols < 2 ** 31 else np.int64
        cells = np.repeat(np.arange(len(rows) * n_cols, dtype=cell_type), lengths)
        by_term = np.argsort(term, kind="stable")  # cells ascend: (term, row, column) order, as postings wants
        term, cells = term[by_term], cells[by_term]
        del by_term
        token_row = cells // n_cols
        np.remainder(cells, n_cols, out=cells)  # the column, in place
        term_start, post_row, post_tf, row_len = postings(term, token_row, cells, len(terms), len(rows),
                                                          ordered=True)
        del term, cells, token_row
        topic_id = np.array([t[0] for t in topic_rows], dtype=np.int64)
        chunk_topic = np.array([r[1] for r in rows], dtype=np.int64)
        arrays = FtsArrays(
            terms=terms, term_start=term_start, post_row=post_row, post_tf=post_tf,
            row_chunk=np.array([r[0] for r in rows], dtype=np.int64),
            row_topic=lookup(topic_id, np.arange(len(topic_id)), chunk_topic), row_len=row_len,
            topic_id=topic_id, topic_collection=[t[1] for t in topic_rows], topic_slug=[t[2] for t in topic_rows],
            n_rows=len(rows), total_tokens=int(lengths.sum()))
        return cls(stamp, arrays, [r[2] for r in rows])

    def row(self, chunk_id: int) -> int:
        return int(np.searchsorted(self.arrays.row_chunk, chunk_id))

    def nbytes(self) -> int:
        """Estimated memory held: the arrays and the kept texts (a cache's ``sizeof``; a loaded
        index counts its packed and persisted parts whole, read or not, and decodes nothing)."""
        held = [v for v in vars(self.arrays).values() if isinstance(v, (np.ndarray, LazyArray))]
        texts = getattr(self.texts, "nbytes", None)
        if texts is None:
            texts = sum(len(t) for row in self.texts or () for t in row)
        return sum(int(a.nbytes) for a in held) + texts

    def prefetch_postings(self, phrases: Iterable[tuple[str, bool]]) -> None:
        """Read the persisted postings of these (token, prefix) phrases not held yet, in one round
        trip (a search's terms), instead of one per term and array."""
        a = self.arrays
        spans = []
        for token, prefix in phrases:
            lo, hi = a.term_range(token, prefix)
            spans.append((int(a.term_start[lo]), int(a.term_start[hi])))
        prefetch_slices([x for x in (a.post_row, a.post_tf) if isinstance(x, LazyArray)], spans)

    def with_reader(self, reader: PartReader) -> "FtsIndex":
        """This index reading the persisted parts it has not read yet through ``reader`` (the
        request's snapshot); the index itself when it holds everything."""
        a = self.arrays
        lazy: dict[str, Any] = {name: v.bound(reader) for name, v in vars(a).items() if isinstance(v, LazyArray)}
        texts = self.texts.bound(reader) if isinstance(self.texts, PackedTexts) else self.texts
        if not lazy and texts is self.texts:
            return self
        return FtsIndex(self.stamp, replace(a, **lazy), texts)


# -- the persisted form ---------------------------------------------------------------------------

SNAPSHOT_TABLE = "doc$fts_snapshot"   # (part, revision, data): ``dump`` cut into parts, in order
SNAPSHOT_PART_BYTES = 64 << 10        # the unit a search reads of postings or texts it has not read yet
_MAGIC = b"KSFTS1\n"
_HEAD_ARRAYS = ("term_start", "row_chunk", "row_topic", "row_len", "topic_id")  # read at load
_LAZY_ARRAYS = ("post_row", "post_tf")                                          # read when sliced
_PARTS_PER_ASK = 64                   # parts read per query when a reader reads them all
_SEPARATOR = "\x1f"                   # joins a string list that holds no such character


class PackedTexts(Sequence):
    """Rows of (title, heading, body) kept as UTF-8 bytes and offsets, decoded when a row is
    read: loading a persisted index costs no per-text work."""

    def __init__(self, data: memoryview | bytes | LazyBytes, offsets: np.ndarray | LazyArray) -> None:
        self._data, self._offsets = data, offsets

    def bound(self, reader: PartReader) -> "PackedTexts":
        """These texts reading their persisted parts through ``reader`` (itself when all held)."""
        if not isinstance(self._data, LazyBytes):
            return self
        offsets = self._offsets.bound(reader) if isinstance(self._offsets, LazyArray) else self._offsets
        return PackedTexts(self._data.bound(reader), offsets)

    def __len__(self) -> int:
        return (len(self._offsets) - 1) // len(COLUMNS)

    @property
    def nbytes(self) -> int:
        """Memory held (the cache's size estimate; no row is decoded for it)."""
        return len(self._data) + self._offsets.nbytes

    def prefetch(self, rows: Iterable[int]) -> None:
        """Read the persisted parts of these rows' texts not held yet: two round trips at most
        (their offsets, then their texts), instead of one per row."""
        if not isinstance(self._data, LazyBytes):
            return
        n = len(COLUMNS)
        rows = sorted(set(rows))
        if isinstance(self._offsets, LazyArray):
            self._offsets.prefetch([(r * n, r * n + n + 1) for r in rows])
        spans = []
        for r in rows:
            o = self._offsets[r * n:r * n + n + 1]
            spans.append((int(o[0]), int(o[-1])))
        self._data.prefetch(spans)

    def __getitem__(self, row):
        if isinstance(row, slice):
            return [self[i] for i in range(*row.indices(len(self)))]
        if row < 0:
            row += len(self)
        if not 0 <= row < len(self):
            raise IndexError(row)
        k = row * len(COLUMNS)
        o = [int(x) for x in self._offsets[k:k + len(COLUMNS) + 1]]
        text = bytes(self._data[o[0]:o[-1]])
        return tuple(text[o[c] - o[0]:o[c + 1] - o[0]].decode("utf-8") for c in range(len(COLUMNS)))


def _pack_strings(values: Sequence[str]) -> tuple[dict[str, Any], bytes]:
    """A string list as bytes: joined by ``_SEPARATOR`` when none holds it, else with offsets."""
    if not any(_SEPARATOR in v for v in values):
        return {"joined": len(values)}, _SEPARATOR.join(values).encode("utf-8")
    encoded = [v.encode("utf-8") for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    return {"offsets": len(values)}, offsets.tobytes() + b"".join(encoded)


def _unpack_strings(spec: dict[str, Any], data: memoryview) -> list[str]:
    if "joined" in spec:
        return str(data, "utf-8").split(_SEPARATOR) if spec["joined"] else []
    n = spec["offsets"]
    offsets = np.frombuffer(data, dtype=np.int64, count=n + 1)
    body = data[(n + 1) * 8:]
    return [bytes(body[offsets[i]:offsets[i + 1]]).decode("utf-8") for i in range(n)]


def dump(index: "FtsIndex", revision: str) -> bytes:
    """``index`` as one byte string (``load`` reads it back), tagged with the pool's ``revision``.

    The head comes first (the header, then what every search needs: vocabulary, per-row and
    per-topic data, ending at ``head_end``), then the postings and the texts, which a reader
    cut into parts of ``part_bytes`` (``parts``) may read only where a search slices them."""
    a = index.arrays
    pieces: list[bytes | memoryview] = []  # joined once at the end: the blob is the only copy made
    layout: dict[str, Any] = {"revision": revision, "n_rows": a.n_rows, "total_tokens": a.total_tokens,
                              "part_bytes": SNAPSHOT_PART_BYTES, "arrays": {}, "strings": {}}
    at = 0

    def put(data: bytes | memoryview) -> tuple[int, int]:
        nonlocal at
        pad = -at % 8
        pieces.append(b"\0" * pad)
        pieces.append(data)
        at += pad
        start, at = at, at + len(data)
        return start, len(data)

    def put_array(name: str) -> None:
        arr = np.ascontiguousarray(getattr(a, name))
        layout["arrays"][name] = [arr.dtype.str, list(arr.shape), *put(arr.reshape(-1).view(np.uint8).data)]

    for name in _HEAD_ARRAYS:
        put_array(name)
    strings = {"terms": a.terms, "topic_collection": a.topic_collection, "topic_slug": a.topic_slug}
    for name, values in strings.items():
        spec, data = _pack_strings(values)
        layout["strings"][name] = [spec, *put(data)]
    layout["head_end"] = at
    for name in _LAZY_ARRAYS:
        put_array(name)
    if index.texts is not None:
        encoded = [t.encode("utf-8") for row in index.texts for t in row]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(e) for e in encoded], out=offsets[1:])
        layout["texts"] = [list(put(offsets.tobytes())), list(put(b"".join(encoded)))]
        del encoded
    header = json.dumps(layout).encode("utf-8")
    return b"".join([_MAGIC, len(header).to_bytes(8, "little"), header, *pieces])


def _layout(head: bytes | memoryview) -> tuple[dict[str, Any], int] | None:
    """(the header ``dump`` wrote, where its body starts), or ``None`` if ``head`` is not ours."""
    view = memoryview(head)
    if bytes(view[:len(_MAGIC)]) != _MAGIC:
        return None
    size = int.from_bytes(view[len(_MAGIC):len(_MAGIC) + 8], "little")
    try:
        layout = json.loads(bytes(view[len(_MAGIC) + 8:len(_MAGIC) + 8 + size]))
    except ValueError:
        return None
    return (layout, len(_MAGIC) + 8 + size) if isinstance(layout, dict) else None


def revision_of(blob: bytes | memoryview) -> str | None:
    """The revision ``dump`` tagged ``blob`` (its first part is enough), or ``None`` if not ours."""
    found = _layout(blob)
    revision = found[0].get("revision") if found else None
    return revision if isinstance(revision, str) else None


def load(blob: bytes, stamp: tuple) -> "FtsIndex":
    """The ``FtsIndex`` ``dump`` wrote into ``blob`` (arrays are views of it: no copy)."""
    found = _layout(blob)
    if found is None:
        raise ValueError("not a persisted full-text index")
    layout, base = found
    body = memoryview(blob)[base:]
    return _index(layout, stamp, lambda start, n: body[start:start + n],
                  lambda dtype, shape, start, n: np.frombuffer(body[start:start + n], dtype=dtype).reshape(shape),
                  lambda start, n: body[start:start + n])


def _index(layout: dict[str, Any], stamp: tuple, head: Callable[[int, int], Any],
           array_at: Callable[[np.dtype, tuple, int, int], Any], bytes_at: Callable[[int, int], Any]) -> "FtsIndex":
    """The ``FtsIndex`` of ``layout``: ``head(start, n)`` gives body bytes of the head (decoded
    now), ``array_at`` / ``bytes_at`` the postings and texts (kept as they come)."""
    arrays = {}
    for name, (dtype, shape, start, n) in layout["arrays"].items():
        if name in _LAZY_ARRAYS:
            arrays[name] = array_at(np.dtype(dtype), tuple(shape), start, n)
        else:
            arrays[name] = np.frombuffer(head(start, n), dtype=np.dtype(dtype)).reshape(shape)
    strings = {name: _unpack_strings(spec, memoryview(head(start, n)))
               for name, (spec, start, n) in layout["strings"].items()}
    texts = None
    if "texts" in layout:
        (o_start, o_n), (t_start, t_n) = layout["texts"]
        texts = PackedTexts(bytes_at(t_start, t_n), array_at(np.dtype(np.int64), (o_n // 8,), o_start, o_n))
    fts = FtsArrays(terms=strings["terms"], term_start=arrays["term_start"], post_row=arrays["post_row"],
                    post_tf=arrays["post_tf"], row_chunk=arrays["row_chunk"], row_topic=arrays["row_topic"],
                    row_len=arrays["row_len"], topic_id=arrays["topic_id"],
                    topic_collection=strings["topic_collection"], topic_slug=strings["topic_slug"],
                    n_rows=int(layout["n_rows"]), total_tokens=int(layout["total_tokens"]))
    return FtsIndex(stamp, fts, texts)  # a snapshot written with topic titles still loads: they are not read


def parts(blob: bytes, *, compress: bool = False) -> list[bytes]:
    """``blob`` cut into ``SNAPSHOT_PART_BYTES`` pieces (the rows of ``doc$fts_snapshot``), each
    zlib-compressed when ``compress`` (PostgreSQL and Firebird: a quarter of the bytes to write at
    import and to read per search; SQLite reads every part at once and keeps them plain). zlib
    lets go of the GIL, so the parts are compressed on two helper threads (an import waits for
    them: ~0.7 s of one core for the 50k-chunk databricks pool)."""
    if not compress:
        return [blob[k:k + SNAPSHOT_PART_BYTES] for k in range(0, max(len(blob), 1), SNAPSHOT_PART_BYTES)]
    view = memoryview(blob)  # slices of it copy nothing: only the compressed parts are new bytes
    cut = [view[k:k + SNAPSHOT_PART_BYTES] for k in range(0, max(len(blob), 1), SNAPSHOT_PART_BYTES)]
    return list(process.current().executor("snapshot_compress", COMPRESS_THREADS).map(_compressed, cut))


COMPRESS_THREADS = 2


def _compressed(part: bytes | memoryview) -> bytes:
    return zlib.compress(part, 1)


def _unpacker(first_data: Any) -> Callable[[Any], bytes]:
    """How to read the parts of a snapshot whose part 0 is ``first_data``: plain parts begin with
    ``_MAGIC``, compressed ones do not (``parts``)."""
    if bytes(first_data[:len(_MAGIC)]) == _MAGIC:
        return bytes
    return lambda data: zlib.decompress(bytes(data))


def persisted(first_part: Callable[[], tuple[str, Any] | None], read_parts: PartReader,
              revision: str, stamp: tuple, *, lazy: bool = True) -> "FtsIndex | None":
    """The index a pool persisted, if it was made at ``revision`` (the pool's, read in the same
    snapshot), else ``None`` (build it instead). ``first_part()``: (revision column, data) of
    part 0, ``None`` when absent; ``read_parts``: the others, as the request's snapshot has them.

    ``lazy``: read only the head now; the postings and texts stay in the pool until a search
    slices them (``FtsIndex.with_reader`` gives each request's reader). Otherwise, and for a
    snapshot written before the head came first, every part is read now."""
    first = first_part()
    if first is None or first[0] != revision:
        return None
    unpack = _unpacker(first[1])
    try:
        head = part0 = unpack(first[1])
        if bytes(head[:len(_MAGIC)]) == _MAGIC and len(head) >= len(_MAGIC) + 8:  # a header longer than a part
            header_end = len(_MAGIC) + 8 + int.from_bytes(head[len(_MAGIC):len(_MAGIC) + 8], "little")
            if header_end > len(head):
                more = sorted((int(k), unpack(d)) for k, rev, d in
                              read_parts(list(range(1, (header_end - 1) // len(head) + 1))) if rev == revision)
                head = b"".join([head, *(d for _, d in more)])
    except zlib.error:
        return None  # not ours
    found = _layout(head)
    if found is None or found[0].get("revision") != revision:
        return None
    layout, base = found
    if not lazy or "head_end" not in layout:
        return load(b"".join([part0, *(unpack(d) for d in _other_parts(read_parts, revision))]), stamp)
    size = int(layout["part_bytes"])
    loaded = SnapshotParts(revision, size, {k: head[k * size:(k + 1) * size] for k in range(len(head) // size or 1)},
                           unpack)
    loaded.read(0, base + int(layout["head_end"]), read_parts)  # the head's other parts, if any
    return _index(layout, stamp, lambda start, n: loaded.read(base + start, base + start + n, None),
                  lambda dtype, shape, start, n: LazyArray(loaded, base + start, dtype, shape),
                  lambda start, n: LazyBytes(loaded, base + start, n))


def warn_not_persisted(where: str) -> None:
    """Say once per build why a first search is slow and how to make it fast (operator's log)."""
    log.warning("%s holds no full-text index persisted for its content (imported before imports "
                "persisted it, or written since without it): building it in this search; "
                "`knowspec pool reindex --database NAME` (a database's pool) or a new `knowspec pool build` "
                "(a help pool) persists it", where)


def _other_parts(read_parts: PartReader, revision: str) -> list[bytes]:
    """The data of parts 1, 2, ... in order, asked ``_PARTS_PER_ASK`` at a time until one is absent."""
    out: list[bytes] = []
    while True:
        wanted = list(range(len(out) + 1, len(out) + 1 + _PARTS_PER_ASK))
        found = dict((int(k), d) for k, rev, d in read_parts(wanted) if rev == revision)
        for k in wanted:
            if k not in found:
                return out
            out.append(found[k])


def sqlite_revision(con: sqlite3.Connection) -> str:
    """A SQLite pool's content revision: a digest of its FTS5 index records (the averages and the
    structure, which every change to the index rewrites) and the chunk and topic id ranges."""
    h = hashlib.sha256()
    for row in con.execute(f'select id, block from "{FTS_TABLE}_data" where id in (1, 10) order by id'):
        h.update(b"%d:" % row[0] + bytes(row[1] or b""))
    for table in ("doc$chunk", "doc$topic"):
        counts = con.execute(f'select count(*), min(id), max(id), total(id) from "{table}"').fetchone()
        h.update(repr(tuple(counts)).encode())  # a tuple whatever the connection's row factory
    return h.hexdigest()


def sqlite_persist(con: sqlite3.Connection) -> None:
    """Build the arrays of the pool ``con`` writes (inside its transaction) and persist them."""
    index = FtsIndex(("persist",), read_arrays(con))
    # The content's digest, and a tag of this write: the digest can repeat (imports of the same
    # ids in another order), the tag never does, and the pool's change stamp reads it.
    blob = dump(index, f"{sqlite_revision(con)}/{secrets.token_hex(8)}")
    con.execute(f'delete from "{SNAPSHOT_TABLE}"')
    con.executemany(f'insert into "{SNAPSHOT_TABLE}"(part, revision, data) values (?, ?, ?)',
                    [(k, revision_of(blob), part) for k, part in enumerate(parts(blob))])


def sqlite_persisted(path: Path | str, *, lazy: bool = False) -> FtsArrays | None:
    """The arrays a SQLite pool file persisted, when they match its content now, else ``None``.
    ``lazy``: only the head is read; the postings are read when sliced, through the reader the
    requests bind (``SqlitePool.fulltext_index``)."""
    con = sqlite3.connect(Path(path).absolute().as_uri() + "?mode=ro", uri=True)
    try:
        con.execute("begin")  # the revision and the parts from one snapshot
        return persisted_in(con, lazy=lazy)
    finally:
        con.close()


def persisted_in(con: sqlite3.Connection, *, lazy: bool = False) -> FtsArrays | None:
    """``sqlite_persisted`` as ``con``'s transaction sees the pool (a request's own: its rows,
    its change stamp and its arrays then come from one snapshot)."""
    try:
        first = con.execute(f'select revision, data from "{SNAPSHOT_TABLE}" where part = 0').fetchone()
    except sqlite3.OperationalError:  # a pool made before snapshots were persisted
        return None
    revision = sqlite_revision(con)
    if first is not None and first[0].split("/", 1)[0] == revision:  # this content's, with its write's tag
        revision = first[0]
    index = persisted(lambda: first, lambda wanted: con.execute(
        f'select part, revision, data from "{SNAPSHOT_TABLE}" where part in ({", ".join("?" * len(wanted))})',
        wanted), revision, ("sqlite",), lazy=lazy)
    return None if index is None else index.arrays


# -- the per-process cache -----------------------------------------------------------------------

@dataclass
class _Entry:
    stamp: tuple
    arrays: FtsArrays | None = None
    done: threading.Event | None = None


class FtsArraysCache:
    """Arrays per pool file and change stamp (the runtime's ``docpool.fts_arrays`` cache); a
    changed stamp starts a new build."""

    def __init__(self, runtime: process.Runtime | None = None) -> None:
        self._runtime = runtime or process.current()
        self._entries = self._runtime.cache("docpool.fts_arrays", max_entries=MAX_CACHED_POOLS, sizeof=_entry_bytes)

    def get(self, path: Path | str, stamp: tuple, mode: str | None = None,
            load: Callable[[], FtsArrays | None] | None = None) -> FtsArrays | None:
        """The arrays for ``stamp`` if ready (``sync``: build them now); ``None`` = use FTS5.
        ``load``: the persisted arrays as the asking request's snapshot has them (the one its
        ``stamp`` was read in), rather than as a new connection finds the file."""
        mode = mode or self._runtime.settings.fts_arrays
        if mode == "off":
            return None
        key = str(Path(path).absolute())
        entry = self._entries.get(key, stamp, lambda: self._start(stamp, key, load))
        if mode == "sync" and entry.done is not None:
            entry.done.wait()
        return entry.arrays

    def _start(self, stamp: tuple, key: str, load: Callable[[], FtsArrays | None] | None = None) -> _Entry:
        try:  # made at import: its head is cheap to load, so loaded here
            arrays = load() if load is not None else sqlite_persisted(key, lazy=True)
        except (sqlite3.Error, ValueError, OSError):
            arrays = None
        if arrays is not None:
            return _Entry(stamp, arrays)
        warn_not_persisted(Path(key).name)
        entry = _Entry(stamp, done=threading.Event())
        threading.Thread(target=self._build, args=(entry, key), daemon=True, name="knowspec-fts-arrays").start()
        return entry

    def _build(self, entry: _Entry, path: str) -> None:
        try:
            entry.arrays = build(path)
        except (sqlite3.Error, ValueError, OSError):
            entry.arrays = None  # FTS5 keeps answering for this stamp
        finally:
            assert entry.done is not None
            entry.done.set()
            self._entries.resize(path)

    def clear(self) -> None:
        self._entries.clear()


def _entry_bytes(entry: _Entry) -> int:
    arrays = entry.arrays
    if arrays is None:
        return 0
    held = [v for v in vars(arrays).values() if isinstance(v, (np.ndarray, LazyArray))]
    return sum(int(a.nbytes) for a in held) + sum(len(t) + 50 for t in arrays.terms)


def fts_arrays_cache() -> FtsArraysCache:
    """The process runtime's arrays."""
    return FtsArraysCache(process.current())

