"""The bundle revision: one digest over every revision-visible file (spec/okf/contract/write.md §2.1).

The digest is a hash of per-file records in path order, so a ``RevisionIndex`` keeps the records
of one revision: the revision of the same files with a few of them written is the hash of the
kept records with those swapped (a one-file write costs one file digest, not the bundle's), and
the next revision of a bundle reuses the digests of the files whose bytes it still holds.

That hash still reads every record (~1 MB at 10,000 files), and one edit asks for the same
step several times: the preview's plan, the apply's plan, the commit's check, and the next
capture's index all hash the base's records with the same files swapped. A step's revision is
a function of the base revision (which names the base's records) and the records swapped in,
added and removed, so it is kept under exactly that key (the runtime cache
``okf.write.revision_steps``) and hashed once. That once starts where the first swapped record
stands: an index keeps the hash's state after every ``BLOCK`` records (filled as asked, and
shared with the index of the next revision up to its first change), so a one-concept edit hashes
the records from its block on (half the bundle's, on average), not all of them.
"""

from __future__ import annotations

import bisect
import hashlib
import threading
from typing import Any, Callable, Mapping

from knowspec.impl import runtime as process
from knowspec.impl.okf.bundle.captured_files import CapturedFiles
from knowspec.impl.okf.layered_map import LayeredMap, flat
from knowspec.impl.okf.write.encoding import enc_bytes, enc_str

MAX_INDEXES = 8  # recent revisions (a preview's base, its result) and each root's latest
MAX_STEPS = 64    # revisions of recent steps (a base with some records swapped, added, removed)
BLOCK = 256       # records between two kept hash states (~16 KiB of records; 40 states at 10,000 files)


def file_digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _bkey(path: str) -> bytes:
    return path.encode("utf-8")


def _record(path: str, data: bytes) -> bytes:
    return enc_str(path) + enc_bytes(file_digest(data))


def _content(files: Mapping[str, bytes], path: str) -> bytes:
    """What names the content of ``files[path]``: the kept digest of a captured file (no read),
    else the bytes themselves."""
    return files.digest(path) if isinstance(files, CapturedFiles) else files[path]


def _record_of(files: Mapping[str, bytes], path: str, content: bytes) -> bytes:
    if isinstance(files, CapturedFiles):
        return enc_str(path) + enc_bytes(content)
    return _record(path, content)


def revision_of(files: Mapping[str, bytes]) -> str:
    """``sha256:`` over str(path) ‖ str(sha256(file)) for paths in ascending byte order."""
    h = hashlib.sha256()
    for path in sorted(files, key=_bkey):
        h.update(_record_of(files, path, _content(files, path)))
    return "sha256:" + h.hexdigest()


class RevisionIndex:
    """The records of one revision, in revision order."""

    paths: list[str]
    position: dict[str, int]
    files: Mapping[str, bytes]
    data: Mapping[str, bytes]  # path -> what its record was made from (bytes, or a captured digest)
    records: list[bytes]
    revision: str
    _prefixes: list[Any]  # _prefixes[j]: the hash state over records[:j * BLOCK], never updated in place
    _filling: threading.Lock

    def __init__(self, files: Mapping[str, bytes], previous: "RevisionIndex | None" = None) -> None:
        if previous is not None and files.keys() == previous.position.keys():
            self.paths, self.position = previous.paths, previous.position
        else:
            self.paths = sorted(files, key=_bkey)
            self.position = {p: i for i, p in enumerate(self.paths)}
        self.files = files  # held, so that its identity names this content while the index lives
        held: dict[str, bytes] = {}
        self.records = []
        digests = isinstance(files, CapturedFiles)
        reuse = previous is not None and isinstance(previous.files, CapturedFiles) == digests
        kept_data = flat(previous.data) if previous is not None and reuse else {}
        for path in self.paths:
            data = _content(files, path)
            # Bytes by identity (the held object is the one the record was made from); the
            # captured files' digests by value.
            kept = kept_data.get(path)
            if kept is not None and (kept is data or (digests and kept == data)):
                record = previous.records[previous.position[path]]  # type: ignore[union-attr]
            else:
                record = _record_of(files, path, data)
            held[path] = data
            self.records.append(record)
        self.data = held
        self.revision = _hash(self.records)
        self._prefixes, self._filling = [hashlib.sha256()], threading.Lock()

    def updated(self, files: Mapping[str, bytes], changed: frozenset[str]) -> "RevisionIndex":
        """The index of ``files``: these files with the bytes of ``changed`` (existing paths) replaced."""
        new = RevisionIndex.__new__(RevisionIndex)
        new.paths, new.position, new.files = self.paths, self.position, files
        new.records = list(self.records)
        swapped: dict[int, bytes] = {}
        changed_data = {}
        for path in changed:
            changed_data[path] = data = _content(files, path)
            swapped[self.position[path]] = new.records[self.position[path]] = _record_of(files, path, data)
        new.data = LayeredMap(self.data, changed_data)
        new.revision = self._step(swapped, (), (), lambda: self._swapped_revision(swapped))
        unchanged = min(swapped, default=len(self.records)) // BLOCK  # blocks before the first change
        new._prefixes, new._filling = self._prefixes[:unchanged + 1], threading.Lock()
        return new

    def revision_with(self, writes: Mapping[str, bytes], deletes: tuple[str, ...] = ()) -> str:
        """The revision of these files with ``writes`` (new or replaced), then ``deletes``, applied."""
        swapped: dict[int, bytes] = {}
        added = []
        for path, data in writes.items():
            at = self.position.get(path)
            if at is not None:
                swapped[at] = _record(path, data)
            elif path not in deletes:
                added.append((_bkey(path), _record(path, data)))
        gone = {self.position[p] for p in deletes if p in self.position}

        def full_hash() -> str:
            if not added and not gone:
                return self._swapped_revision(swapped)
            records = list(self.records)
            for at, record in swapped.items():
                records[at] = record
            keys = [_bkey(p) for i, p in enumerate(self.paths) if i not in gone]
            kept = [r for i, r in enumerate(records) if i not in gone]
            for key, record in sorted(added):
                at = bisect.bisect_left(keys, key)
                keys.insert(at, key)
                kept.insert(at, record)
            return _hash(kept)

        return self._step(swapped, tuple(sorted(added)), tuple(sorted(gone)), full_hash)

    def _swapped_revision(self, swapped: dict[int, bytes]) -> str:
        """The revision of these records with ``swapped`` (position: record; not empty), hashed on
        from the kept state of the block holding the first swap."""
        block = min(swapped) // BLOCK
        tail = self.records[block * BLOCK:]
        for at, record in swapped.items():
            tail[at - block * BLOCK] = record
        return _hash(tail, self._prefix(block))

    def _prefix(self, block: int) -> Any:
        """A copy of the hash state over the first ``block * BLOCK`` records (``block * BLOCK``
        below the record count), the states up to it kept."""
        with self._filling:  # two threads filling at once would file a state under the wrong block
            states = self._prefixes
            while len(states) <= block:
                j = len(states) - 1
                state = states[j].copy()
                state.update(b"".join(self.records[j * BLOCK:(j + 1) * BLOCK]))
                states.append(state)
            return states[block].copy()

    def _step(self, swapped: dict[int, bytes], added: tuple[tuple[bytes, bytes], ...], gone: tuple[int, ...],
              full_hash: Callable[[], str]) -> str:
        """The revision of this index's records with ``swapped`` (position: record), ``added``
        (path key, record) and ``gone`` (positions) applied: kept from an earlier ask, else
        ``full_hash()``. A swap that puts back the record already there is no change."""
        swapped = {at: r for at, r in swapped.items() if self.records[at] != r}
        if not swapped and not added and not gone:
            return self.revision
        key = (self.revision, tuple(sorted(swapped.items())), added, gone)
        return _steps().get(key, None, full_hash)


def _hash(records: list[bytes], state: Any = None) -> str:
    """The revision of ``records``, hashed on from ``state`` (the hash of the records before them)."""
    if state is None:
        return "sha256:" + hashlib.sha256(b"".join(records)).hexdigest()
    state.update(b"".join(records))
    return "sha256:" + state.hexdigest()


def _steps() -> process.Cache:
    return process.current().cache("okf.write.revision_steps", max_entries=MAX_STEPS)


def _indexes() -> process.Cache:
    return process.current().cache("okf.write.revisions", max_entries=MAX_INDEXES,
                                   sizeof=lambda index: 96 * len(index.records))


def index_files(files: Mapping[str, bytes], root: str | None = None,
                derived_from: tuple[Mapping[str, bytes], frozenset[str]] | None = None) -> RevisionIndex:
    """The revision index of ``files``, built from ``root``'s previous one, and kept by revision
    (for ``revision_with``) and as the root's latest (for the next capture). ``derived_from``:
    the files these were made from and which paths changed, so only those are hashed again."""
    cache = _indexes()
    previous = cache.peek(("root", root)) if root is not None else None
    if previous is not None and previous.files is files:  # the same captured mapping: nothing changed
        index = previous
    elif previous is not None and derived_from is not None and derived_from[0] is previous.files:
        index = previous.updated(files, derived_from[1])
    else:
        index = RevisionIndex(files, previous)
    cache.put(index.revision, None, index)
    if root is not None:
        cache.put(("root", root), None, index)
    return index


def revision_with(files: Mapping[str, bytes], base_revision: str, writes: Mapping[str, bytes],
                  deletes: tuple[str, ...] = ()) -> str:
    """The revision of ``files`` (whose revision is ``base_revision``) with ``writes`` and
    ``deletes`` applied: from the base's index when one is kept, else hashed in full."""
    index = _indexes().peek(base_revision)
    if index is not None:
        return index.revision_with(writes, deletes)
    post = dict(files)
    post.update(writes)
    for path in deletes:
        post.pop(path, None)
    return revision_of(post)
