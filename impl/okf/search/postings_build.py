"""The token postings of a search index built in bulk with numpy, as flat buffers.

The rule is :class:`token_postings.PostingsBuilder`'s (which builds the same postings in pure
Python, in the server, for small bundles; property tests hold the two equal, buffer for
buffer): this build runs in the short-lived helper processes of :mod:`index_helper` for large
ones (50,000 concepts: 3.7 s in pure Python), where its temporaries never reach the server's
heap. The server receives only the buffers (:meth:`TokenPostings.fill_buffers`).
"""

from __future__ import annotations

from collections import defaultdict
from itertools import compress, count
from typing import Iterable, Sequence

import numpy as np

from knowspec.impl.okf.search.id_typecode import id_typecode
from knowspec.impl.okf.search import token_postings
from knowspec.impl.okf.search.token_postings import _TO_SPACE

_SEP = b"\x00"
_VALUE_MARK = b" \xff "  # a token of its own between joined values (0xFF is never in UTF-8)
_VALUES_PER_BATCH = 512  # short values tokenised in one pass: all at once would be an object per word alive together
_BODY_BYTES_PER_BATCH = 256 << 10  # and bodies, this much text at a time
_WIDE = np.dtype(np.uint32)
_DENSE_TOKENS_AT_ONCE = 256  # dense tokens whose bitmaps are packed in one pass


def _dtype(typecode: str) -> np.dtype:
    return np.dtype(np.uint16) if typecode == "H" else _WIDE


class _Tokens:
    """The (token id, row) pairs of texts, taken a batch of texts at a time in one C-level pass
    each: the texts joined with a marker token between them, each word's text told by counting
    the markers before it. Token ids follow first appearance, word by word (as
    ``PostingsBuilder``'s). Each batch's pairs are kept sorted and without repeats, one
    ``token << 32 | row`` key each: a bundle's words with their repeats would be ten times as
    many (50,000 concepts: 160 MB of pairs, faulted in page by page)."""

    def __init__(self) -> None:
        self.ids: defaultdict[bytes, int] = defaultdict(count().__next__)  # a new token: the next id
        self.mark = self.ids[_VALUE_MARK.strip()]
        self.key_parts: list[np.ndarray] = []

    def add(self, rows: Sequence[int], texts: Sequence[bytes]) -> None:
        words = _VALUE_MARK.join(texts).translate(_TO_SPACE).split()
        batch = np.fromiter(map(self.ids.__getitem__, words), dtype=np.int64, count=len(words))
        is_mark = batch == self.mark
        row_of = np.asarray(rows, dtype=np.int64)[np.cumsum(is_mark)[~is_mark]]
        self.key_parts.append(_distinct((batch[~is_mark] << 32) | row_of))

    def partial(self) -> tuple[list[bytes], bytes]:
        """This part's tokens and its keys, for another part to :meth:`merge`."""
        keys = np.concatenate(self.key_parts) if self.key_parts else np.zeros(0, dtype=np.int64)
        return list(self.ids), keys.tobytes()

    def merge(self, vocabulary: list[bytes], keys: bytes) -> None:
        """Add another part's tokens (its rows distinct from this part's): its token ids become
        this part's, its new tokens taking the next ids."""
        ids = np.fromiter(map(self.ids.__getitem__, vocabulary), dtype=np.int64, count=len(vocabulary))
        theirs = np.frombuffer(keys, dtype=np.int64)
        self.key_parts.append((ids[theirs >> 32] << 32) | (theirs & 0xFFFFFFFF))

    def postings(self, n_rows: int) -> dict[str, bytes]:
        keys = _distinct(np.concatenate(self.key_parts)) if self.key_parts else np.zeros(0, dtype=np.int64)
        return _postings(n_rows, list(self.ids), keys)


def _distinct(keys: np.ndarray) -> np.ndarray:
    """The distinct values of ``keys``, ascending (sorting; ``np.unique`` hashes, far slower)."""
    keys = np.sort(keys)
    first = np.ones(len(keys), dtype=bool)
    first[1:] = keys[1:] != keys[:-1]
    return keys[first]


def body_tokens(bodies: Iterable[tuple[int, bytes]]) -> _Tokens:
    """The tokens of the bodies, given as (row, body), each row once, in any order."""
    found = _Tokens()
    rows: list[int] = []
    texts: list[bytes] = []
    size = 0
    for row, body in bodies:
        rows.append(row)
        texts.append(body)
        size += len(body)
        if size >= _BODY_BYTES_PER_BATCH:
            found.add(rows, texts)
            rows, texts, size = [], [], 0
    if rows:
        found.add(rows, texts)
    return found


def build_bodies(n_rows: int, bodies: Iterable[tuple[int, bytes]]) -> dict[str, bytes]:
    """The postings of the bodies (:func:`body_tokens`), as the buffers
    ``TokenPostings.fill_buffers`` takes."""
    return body_tokens(bodies).postings(n_rows)


def build_values(n_rows: int, rows: Sequence[int], values: Sequence[bytes]) -> dict[str, bytes]:
    """The postings of short texts (``values[i]`` belongs to row ``rows[i]``)."""
    found = _Tokens()
    for at in range(0, len(values), _VALUES_PER_BATCH):
        found.add(rows[at:at + _VALUES_PER_BATCH], values[at:at + _VALUES_PER_BATCH])
    return found.postings(n_rows)


def _postings(n_rows: int, vocabulary: list[bytes], keys: np.ndarray) -> dict[str, bytes]:
    """The buffers of the postings whose ``token << 32 | row`` keys (``token`` an index of
    ``vocabulary``) are ``keys``, ascending and distinct. Tokens no row holds are dropped. Its
    arrays are 32-bit and dropped as soon as used: in a fresh helper process every page is
    faulted in (50,000 concepts: 2.6 million keys)."""
    token = (keys >> 32).astype(np.int32)
    row = (keys & 0xFFFFFFFF).astype(np.uint32)
    del keys
    counts = np.bincount(token, minlength=len(vocabulary))
    alive = counts > 0
    words = list(compress(vocabulary, alive.tolist()))
    token = (np.cumsum(alive, dtype=np.int32) - 1)[token]  # renumbered without the dropped tokens
    counts = counts[alive]
    row_code = id_typecode(n_rows)
    dense = counts >= max(token_postings.DENSE_MIN_ROWS, n_rows // (8 * _dtype(row_code).itemsize))
    in_dense = dense[token]
    lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
    starts = np.cumsum(lengths + 1) - lengths  # after the frame's leading NUL
    offsets = np.zeros(len(words) + 1, dtype=np.int64)
    np.cumsum(np.where(dense, 0, counts), out=offsets[1:])
    framed = _SEP + _SEP.join(words) + _SEP if words else _SEP
    out = {
        "vocabulary": framed,
        "starts": starts.astype(_WIDE).tobytes(),
        "offsets": offsets.astype(_WIDE).tobytes(),
        "rows": row[~in_dense].astype(_dtype(row_code)).tobytes(),
        "dense_ids": np.flatnonzero(dense).astype(_WIDE).tobytes(),
        "dense_counts": counts[dense].astype(_WIDE).tobytes(),
    }
    rank = (np.cumsum(dense, dtype=np.int32) - 1)[token[in_dense]]  # 0 .. dense tokens - 1, ascending
    out["dense_bits"] = _dense_bits(n_rows, rank, row[in_dense], int(dense.sum()))
    del token, row, in_dense, rank
    out.update(_trigram_index(framed, starts))
    return out


def _dense_bits(n_rows: int, rank: np.ndarray, rows: np.ndarray, n_dense: int) -> bytes:
    """The bitmaps of the dense tokens, in id order (``rank``: each key's dense token, 0 to
    ``n_dense - 1``, ascending; its row beside it), ``ceil(n_rows / 8)`` little-endian bytes each."""
    if not n_dense:
        return b""
    parts = []
    bits = np.zeros((min(_DENSE_TOKENS_AT_ONCE, n_dense), n_rows), dtype=bool)
    for first in range(0, n_dense, _DENSE_TOKENS_AT_ONCE):
        last = min(first + _DENSE_TOKENS_AT_ONCE, n_dense)
        lo, hi = np.searchsorted(rank, [first, last])
        bits[:] = False
        bits[rank[lo:hi] - first, rows[lo:hi]] = True
        parts.append(np.packbits(bits[:last - first], axis=1, bitorder="little").tobytes())
    return b"".join(parts)


def _trigram_index(vocabulary: bytes, starts: np.ndarray) -> dict[str, bytes]:
    """``vocabulary_index.VocabularyIndex``'s buffers: each trigram of the framed tokens whose
    middle byte is a token byte (one with NUL in the middle spans two tokens), ascending by its
    big-endian code, with the ascending ids of the tokens holding it."""
    data = np.frombuffer(vocabulary, dtype=np.uint8)
    ids_dtype = _dtype(id_typecode(len(starts)))
    if len(data) < 3 or not len(starts):
        return {"trigrams": b"", "trigram_offsets": np.zeros(1, dtype=_WIDE).tobytes(), "token_ids": b""}
    positions = np.flatnonzero(data[1:-1] != 0)
    codes = ((data[:-2].astype(np.uint32) << np.uint32(16)) | (data[1:-1].astype(np.uint32) << np.uint32(8))
             | data[2:])[positions]
    owners = np.searchsorted(starts, positions + 1, side="right") - 1  # a leading NUL: the next token
    order = np.argsort(codes, kind="stable")  # stable: owners stay ascending within a trigram
    codes, owners = codes[order], owners[order]
    repeated = np.zeros(len(codes), dtype=bool)
    repeated[1:] = (codes[1:] == codes[:-1]) & (owners[1:] == owners[:-1])
    codes, owners = codes[~repeated], owners[~repeated]
    first = np.ones(len(codes), dtype=bool)
    first[1:] = codes[1:] != codes[:-1]
    firsts = np.flatnonzero(first)
    return {"trigrams": codes[firsts].astype(_WIDE).tobytes(),
            "trigram_offsets": np.append(firsts, len(codes)).astype(_WIDE).tobytes(),
            "token_ids": owners.astype(ids_dtype).tobytes()}
