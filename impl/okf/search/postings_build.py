"""The token postings of a search index built in bulk with numpy, as flat buffers.

The rule is :class:`token_postings.PostingsBuilder`'s (which builds the same postings in pure
Python, in the server, for small bundles): this build runs in the short-lived helper process
(:mod:`index_helper`) for large ones, where its sorts take a third of the pure build's time
(50,000 concepts: 3.7 s in pure Python) and its temporaries never reach the server's heap. The
server receives only the buffers (:meth:`TokenPostings.fill_buffers`).
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
    ``PostingsBuilder``'s)."""

    def __init__(self) -> None:
        self.ids: defaultdict[bytes, int] = defaultdict(count().__next__)  # a new token: the next id
        self.mark = self.ids[_VALUE_MARK.strip()]
        self.id_parts: list[np.ndarray] = []
        self.row_parts: list[np.ndarray] = []

    def add(self, rows: Sequence[int], texts: Sequence[bytes]) -> None:
        words = _VALUE_MARK.join(texts).translate(_TO_SPACE).split()
        batch = np.fromiter(map(self.ids.__getitem__, words), dtype=np.int64, count=len(words))
        is_mark = batch == self.mark
        self.id_parts.append(batch[~is_mark])
        self.row_parts.append(np.asarray(rows, dtype=np.int64)[np.cumsum(is_mark)[~is_mark]])

    def postings(self, n_rows: int) -> dict[str, bytes]:
        token_ids = np.concatenate(self.id_parts) if self.id_parts else np.zeros(0, dtype=np.int64)
        rows = np.concatenate(self.row_parts) if self.row_parts else np.zeros(0, dtype=np.int64)
        return _postings(n_rows, list(self.ids), token_ids, rows)


def build_bodies(n_rows: int, bodies: Iterable[tuple[int, bytes]]) -> dict[str, bytes]:
    """The postings of the bodies, given as (row, body), each row once, in any order, as the
    buffers ``TokenPostings.fill_buffers`` takes."""
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
    return found.postings(n_rows)


def build_values(n_rows: int, rows: Sequence[int], values: Sequence[bytes]) -> dict[str, bytes]:
    """The postings of short texts (``values[i]`` belongs to row ``rows[i]``)."""
    found = _Tokens()
    for at in range(0, len(values), _VALUES_PER_BATCH):
        found.add(rows[at:at + _VALUES_PER_BATCH], values[at:at + _VALUES_PER_BATCH])
    return found.postings(n_rows)


def _postings(n_rows: int, vocabulary: list[bytes], token_ids: np.ndarray, rows: np.ndarray) -> dict[str, bytes]:
    """The buffers of the postings where token ``token_ids[i]`` (an index of ``vocabulary``) is
    held by row ``rows[i]`` (repeats allowed). Tokens no row holds are dropped."""
    keys = np.sort((token_ids << 32) | rows)
    first = np.ones(len(keys), dtype=bool)
    first[1:] = keys[1:] != keys[:-1]  # a token twice in a row: once
    keys = keys[first]
    counts = np.bincount(keys >> 32, minlength=len(vocabulary))
    alive = counts > 0
    words = list(compress(vocabulary, alive.tolist()))
    keys_token = np.cumsum(alive)[keys >> 32] - 1  # renumbered without the dropped tokens
    counts = counts[alive]
    row_code = id_typecode(n_rows)
    dense = counts >= max(token_postings.DENSE_MIN_ROWS, n_rows // (8 * _dtype(row_code).itemsize))
    sparse_keys = ~dense[keys_token]
    lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
    starts = np.cumsum(lengths + 1) - lengths  # after the frame's leading NUL
    offsets = np.zeros(len(words) + 1, dtype=np.int64)
    np.cumsum(np.where(dense, 0, counts), out=offsets[1:])
    framed = _SEP + _SEP.join(words) + _SEP if words else _SEP
    rows_of = (keys & 0xFFFFFFFF).astype(np.int64)
    out = {
        "vocabulary": framed,
        "starts": starts.astype(_WIDE).tobytes(),
        "offsets": offsets.astype(_WIDE).tobytes(),
        "rows": rows_of[sparse_keys].astype(_dtype(row_code)).tobytes(),
        "dense_ids": np.flatnonzero(dense).astype(_WIDE).tobytes(),
        "dense_counts": counts[dense].astype(_WIDE).tobytes(),
        "dense_bits": _dense_bits(n_rows, keys_token[~sparse_keys], rows_of[~sparse_keys], int(dense.sum())),
    }
    out.update(_trigram_index(framed, starts))
    return out


def _dense_bits(n_rows: int, token_of: np.ndarray, rows: np.ndarray, n_dense: int) -> bytes:
    """The bitmaps of the dense tokens, in id order (``token_of``: ascending token ids, their
    rows beside them), ``ceil(n_rows / 8)`` little-endian bytes each."""
    if not n_dense:
        return b""
    rank = np.cumsum(np.append(True, token_of[1:] != token_of[:-1])) - 1  # 0 .. n_dense - 1
    parts = []
    for first in range(0, n_dense, _DENSE_TOKENS_AT_ONCE):
        last = min(first + _DENSE_TOKENS_AT_ONCE, n_dense)
        lo, hi = np.searchsorted(rank, [first, last])
        bits = np.zeros((last - first, n_rows), dtype=bool)
        bits[rank[lo:hi] - first, rows[lo:hi]] = True
        parts.append(np.packbits(bits, axis=1, bitorder="little").tobytes())
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
