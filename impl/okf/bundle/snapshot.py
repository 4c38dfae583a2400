"""Capture a bundle into an immutable snapshot, reusing unchanged files across calls.

Capture (spec/okf/contract/read.md §1.1): walk the pinned root through directory descriptors, never following symlinks;
keep regular files only (type from ``lstat``); exclude the root-level ``.okf``; fail on
transaction crash evidence; validate every revision path; enforce the file, byte, depth and path
limits. Reuse: the runtime's ``okf.snapshots`` cache, keyed by the pinned root path, keeps, per
file, its identity ``(dev, ino, size, mtime_ns, ctime_ns)``, bytes and parsed :class:`Document` (a file whose
identity changed but whose bytes did not keeps its parse).

Revalidation: on Linux every captured directory is watched with inotify (:mod:`watch`), armed
before it is listed. A call that finds the event queue empty answers from the cached snapshot
(nothing under the tree changed since it was captured); events make it re-check only the named
entries. Files with several hard links (writable through a path outside the tree) are re-checked
on every call. Anything inotify cannot vouch for, any error and any non-Linux or unwatchable
tree falls back to the full ``lstat`` walk, which is also the test oracle. The root's identity
and the spec/okf/contract/read.md §5.2 ``bundle_path`` checks run on every call.
"""

from __future__ import annotations

import os
import re
import stat
import struct
import threading
from dataclasses import dataclass, field
from typing import Mapping

from knowspec.impl import runtime as process
from knowspec.impl.errors import ToolError, exception_chain
from knowspec.impl.okf.bundle import watch as inotify
from knowspec.impl.okf.bundle.captured_files import CapturedFiles, FileRecord, release_at_call_end
from knowspec.impl.okf.parsing.frontmatter import YamlLimitError
from knowspec.impl.okf.model import Document, Snapshot, document_for
from knowspec.impl.okf.bundle.limits import MAX_DEPTH, MAX_FILE_BYTES, MAX_PATH_BYTES, BundleLimits, limits_for
from knowspec.impl.okf.bundle.paths import DIR_FLAGS, check_bundle_path, pin_root
from knowspec.impl.okf.layered_map import LayeredMap, flat
from knowspec.impl.okf.write.readers import consistent_read

MAX_FILES = 10_000
MAX_TOTAL_BYTES = 64 * 1024 * 1024
READ_CHUNK = 1 << 20
LIMIT_MESSAGE = "bundle exceeds MCP resource limits"
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)

_CRASH_PREFIXES = (".okf-index-txn-", ".okf-document-txn-", ".okf-publication-private-v2-")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class Stats:
    """Counters for tests and diagnostics."""

    parsed_documents = 0
    files_read = 0
    full_walks = 0  # complete lstat walks of a tree
    incremental = 0  # revalidations that re-checked only the entries named by events


_FILE_KEY = struct.Struct("<QQQqq")


def file_key(st: os.stat_result) -> bytes | tuple:
    """What tells a file unchanged: device, inode, size, mtime and ctime (ns), packed in 40 bytes
    (a tuple of five ints was ~250 bytes a file); the tuple itself when a value does not fit."""
    values = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    try:
        return _FILE_KEY.pack(*values)
    except struct.error:  # a time past 2262, say: still exact, just bigger
        return values


@dataclass(slots=True)  # one per captured file
class _Entry:
    key: bytes | tuple  # file_key
    record: FileRecord  # what identifies the captured content (the bytes are re-read from it)
    document: Document | None
    data: bytes | None = None  # a Markdown file's bytes, in hand only until its document is parsed


@dataclass
class _Walk:
    """What one capture produces: files, directory identities, hard-linked files, the watch."""

    previous: Mapping[str, _Entry] | None
    ctx: object
    root: str = ""  # the pinned root path the file records re-read from
    limits: BundleLimits = field(default_factory=lambda: read_limits(process.current()))
    watch: inotify.DirectoryWatch | None = None
    root_dev: int = 0
    entries: Mapping[str, _Entry] = field(default_factory=dict)  # a dict while the walk writes it
    dirs: dict[str, tuple[int, int]] = field(default_factory=dict)  # prefix -> (dev, ino)
    shared: set[str] = field(default_factory=set)
    links: set[str] = field(default_factory=set)  # symbolic links skipped (a writer's store refuses them)
    # An event-driven update's re-read files that the slot already had, kept beside the slot's
    # entries (``entries`` is then the slot's own, never written) instead of a copy of them all.
    replaced: dict[str, _Entry] | None = None
    total: int = 0
    touched: set[str] | None = None  # the entries an event-driven update re-checked (None: a full walk)
    same_keys: bool = False  # an event-driven update that only re-read files it already had


@dataclass
class _CacheSlot:
    lock: threading.Lock = field(default_factory=threading.Lock)
    snapshot: Snapshot | None = None
    entries: Mapping[str, _Entry] = field(default_factory=dict)
    dirs: dict[str, tuple[int, int]] = field(default_factory=dict)
    shared: set[str] = field(default_factory=set)
    links: set[str] = field(default_factory=set)
    watch: inotify.DirectoryWatch | None = None  # None: the next call walks everything
    root_id: tuple[int, int] | None = None
    limits: tuple = ()
    nbytes: int = 0  # the captured bytes, for the runtime's memory budget


MAX_CACHED_ROOTS = 8  # least recently used roots beyond this are dropped (their watches close)


def _slots(runtime: process.Runtime) -> process.Cache:
    """Per root path, its slot; the slot revalidates itself (stamp: none), so its size is the
    budget's only other reason to drop it."""
    return runtime.cache("okf.snapshots", max_entries=MAX_CACHED_ROOTS,
                         sizeof=lambda slot: 2 * slot.nbytes, dispose=_close_watch)


def _close_watch(slot: _CacheSlot) -> None:
    watch = slot.watch
    if watch is not None and slot.lock.acquire(blocking=False):  # a running capture owns it else
        try:
            slot.watch = None
            watch.close()
        finally:
            slot.lock.release()


def clear_cache() -> None:
    _slots(process.current()).clear()


def read_limits(runtime: process.Runtime) -> BundleLimits:
    """The file and byte limits of this runtime (the module's defaults unless raised)."""
    return limits_for(runtime, files=MAX_FILES, total_bytes=MAX_TOTAL_BYTES)


def _limit_stamp(limits: BundleLimits) -> tuple:
    return (limits.files, limits.total_bytes, MAX_FILE_BYTES, MAX_DEPTH, MAX_PATH_BYTES)


def _limit() -> ToolError:
    return ToolError("resource_limit", LIMIT_MESSAGE)


def _io_failure(exc: OSError) -> ToolError:
    """An I/O failure while loading is ``invalid_request`` "load bundle: …" (spec/okf/contract/read.md §4.2)."""
    return ToolError("invalid_request", f"load bundle: {exc.strerror or 'I/O error'}")


_DOT_SEGMENTS = frozenset(("", ".", ".."))  # an empty segment, or a dot segment


def valid_revision_path(path: str) -> bool:
    """Revision-path validation (relative, clean, no backslash or control, not ``.okf``).

    spec/okf/contract/read.md §1.1.
    """
    if path == "" or path.startswith("/") or "\\" in path or _CONTROL.search(path):
        return False
    parts = path.split("/")
    if not _DOT_SEGMENTS.isdisjoint(parts):
        return False
    return parts[0] != ".okf"


def _check(ctx, operation: str = "load bundle") -> None:
    if ctx is not None:
        ctx.check_cancelled(operation)


def _check_path(rel: str, depth: int) -> None:
    """Revision-path and path/depth limit checks of one captured entry (``depth`` of its dir)."""
    try:
        encoded = rel.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolError("invalid_request", "load bundle: invalid revision path")
    if len(encoded) > MAX_PATH_BYTES or depth + 1 > MAX_DEPTH:
        raise _limit()
    if not valid_revision_path(rel):
        raise ToolError("invalid_request", "load bundle: invalid revision path")


def _arm(walk: _Walk, dir_fd: int, prefix: str, ident: tuple[int, int]) -> None:
    """Record the directory and watch it before it is listed (a racing write queues an event)."""
    walk.dirs[prefix] = ident
    if walk.watch is None:
        return
    try:
        if ident[0] != walk.root_dev:
            raise inotify.WatchUnavailable("directory on another filesystem")
        walk.watch.add(dir_fd, prefix)
    except inotify.WatchUnavailable:
        walk.watch.close()
        walk.watch = None


def _capture_dir(walk: _Walk, dir_fd: int, prefix: str, depth: int, ident: tuple[int, int]) -> None:
    _check(walk.ctx)
    _arm(walk, dir_fd, prefix, ident)
    try:
        with os.scandir(dir_fd) as it:
            names = sorted(e.name for e in it)
    except OSError as exc:
        raise ToolError("invalid_request", f"load bundle: {exc.strerror}")
    for name in names:
        rel = prefix + name
        if prefix == "" and name == ".okf":
            continue
        if name.lower().startswith(_CRASH_PREFIXES):
            raise ToolError("invalid_request", "load bundle: bundle contains interrupted transaction state")
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise _io_failure(exc)
        mode = st.st_mode
        if stat.S_ISLNK(mode):
            walk.links.add(rel)
        if stat.S_ISLNK(mode) or not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
            continue
        _check_path(rel, depth)
        if stat.S_ISDIR(mode):
            _capture_child(walk, dir_fd, name, rel + "/", depth + 1, st)
            continue
        _capture_file(walk, dir_fd, name, rel, st)
        if len(walk.entries) % 256 == 0:
            _check(walk.ctx)


def _written_entries(walk: _Walk) -> dict[str, _Entry]:
    """The walk's entries as its own dict, to add or drop entries (an event-driven update's
    replaced files merged in first)."""
    entries = walk.entries
    if walk.replaced is not None:
        entries = walk.entries = {**flat(entries), **walk.replaced}
        walk.replaced = None
    assert isinstance(entries, dict)
    return entries


def _capture_child(walk: _Walk, dir_fd: int, name: str, prefix: str, depth: int, st: os.stat_result) -> None:
    child, cst = _open_same(dir_fd, name, DIR_FLAGS, st)
    try:
        _capture_dir(walk, child, prefix, depth, (cst.st_dev, cst.st_ino))
    finally:
        os.close(child)


def _open_same(dir_fd: int, name: str, flags: int, st: os.stat_result) -> tuple[int, os.stat_result]:
    """``name`` opened, if it is still the entry ``st`` described (else the walk raced a change)."""
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        raise ToolError("invalid_request", f"load bundle: {exc.strerror}")
    fst = os.fstat(fd)
    if (fst.st_ino, fst.st_dev) != (st.st_ino, st.st_dev) or stat.S_IFMT(fst.st_mode) != stat.S_IFMT(st.st_mode):
        os.close(fd)
        raise ToolError("invalid_request", "load bundle: file changed while reading")
    return fd, fst


def _capture_file(walk: _Walk, dir_fd: int, name: str, rel: str, st: os.stat_result) -> None:
    if (rel not in walk.entries and len(walk.entries) + 1 > walk.limits.files) or st.st_size > MAX_FILE_BYTES:
        raise _limit()
    key = file_key(st)
    old = walk.previous.get(rel) if walk.previous else None
    if old is not None and old.key == key:
        entry = old
    else:
        data = _read_file(dir_fd, name, st)
        record = FileRecord.of(walk.root, rel, data, st.st_mtime_ns)
        if old is not None and old.record.digest == record.digest:
            entry = _Entry(key, record, old.document)  # the same bytes: the parse is kept
        else:
            entry = _Entry(key, record, None, data if rel.endswith(".md") else None)
    walk.total += entry.record.size
    if walk.total > walk.limits.total_bytes:
        raise _limit()
    if walk.replaced is not None and rel in walk.entries:
        walk.replaced[rel] = entry
    else:
        _written_entries(walk)[rel] = entry
    if st.st_nlink > 1:
        walk.shared.add(rel)
    else:
        walk.shared.discard(rel)


def _read_file(dir_fd: int, name: str, st: os.stat_result) -> bytes:
    fd, _ = _open_same(dir_fd, name, FILE_FLAGS, st)
    try:
        chunks = []
        size = 0
        # Ask for the stat size and one byte more: the file and its end in reads of its own size.
        # A fixed 1 MiB read allocates 1 MiB for every file and again for its end, which the
        # server's fixed mmap threshold (server/native_memory.py) would map and unmap each time.
        want = min(st.st_size + 1, READ_CHUNK)
        while True:
            try:
                chunk = os.read(fd, want)
            except OSError as exc:  # e.g. EINVAL from a /proc file
                raise _io_failure(exc)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_FILE_BYTES:
                raise _limit()
            chunks.append(chunk)
            if len(chunk) == want:  # grown since its stat: larger reads
                want = min(want * 2, READ_CHUNK)
        Stats.files_read += 1
        return b"".join(chunks)
    finally:
        os.close(fd)


def _build_documents(entries: Mapping[str, _Entry], ctx) -> dict[str, Document]:
    documents: dict[str, Document] = {}
    for i, (rel, entry) in enumerate(entries.items()):
        if not rel.endswith(".md"):
            continue
        if entry.document is None:
            if i % 64 == 0:
                _check(ctx)
            data = entry.data if entry.data is not None else entry.record.read()
            try:
                document = document_for(rel, data)
            except YamlLimitError:
                raise _limit()
            document.attach(entry.record)
            entry.document, entry.data = document, None
            Stats.parsed_documents += 1
        documents[rel] = entry.document
    return documents


def _walk_order(rel: str) -> list[str]:
    """Sort key giving the full walk's order (names sorted per directory, depth first)."""
    return rel.split("/")


class _Fallback(Exception):
    """The event-driven update cannot vouch for its result: walk the whole tree instead."""


def _full_walk(slot: _CacheSlot, root: str, root_fd: int, root_id: tuple[int, int], ctx,
               limits: BundleLimits) -> _Walk:
    Stats.full_walks += 1
    walk = _Walk(flat(slot.entries) or None, ctx, root, limits, root_dev=root_id[0])
    if inotify.available() and inotify.watchable(root_fd):
        try:
            walk.watch = inotify.DirectoryWatch()
        except inotify.WatchUnavailable:
            walk.watch = None
    try:
        _capture_dir(walk, root_fd, "", 0, root_id)
    except BaseException:
        if walk.watch is not None:
            walk.watch.close()
        raise
    return walk


class _DirFds:
    """Descriptors of already-captured directories, reopened from the root and identity-checked."""

    def __init__(self, root_fd: int, dirs: dict[str, tuple[int, int]]) -> None:
        self.fds = {"": root_fd}
        self.dirs = dirs
        self.owned: list[int] = []

    def get(self, prefix: str) -> int:
        fd = self.fds.get(prefix)
        if fd is not None:
            return fd
        parent, _, name = prefix[:-1].rpartition("/")
        parent_fd = self.get(parent + "/" if parent else "")
        try:
            fd = os.open(name, DIR_FLAGS, dir_fd=parent_fd)
        except OSError:
            raise _Fallback
        self.owned.append(fd)
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != self.dirs.get(prefix):
            raise _Fallback
        self.fds[prefix] = fd
        return fd

    def close(self) -> None:
        for fd in self.owned:
            os.close(fd)


def _drop(walk: _Walk, rel: str) -> None:
    """Forget a file or a whole directory subtree that left the tree."""
    entries = _written_entries(walk)
    entries.pop(rel, None)
    walk.shared.discard(rel)
    walk.links.discard(rel)
    sub = rel + "/"
    if sub in walk.dirs:
        for prefix in [p for p in walk.dirs if p.startswith(sub)]:
            del walk.dirs[prefix]
        for path in [p for p in entries if p.startswith(sub)]:
            del entries[path]
        walk.shared = {p for p in walk.shared if not p.startswith(sub)}
        walk.links = {p for p in walk.links if not p.startswith(sub)}
        if walk.watch is not None:
            walk.watch.remove_under(sub)


def _apply_changes(slot: _CacheSlot, watch, root: str, root_fd: int, names: set[tuple[str, str]], ctx,
                   limits: BundleLimits) -> _Walk:
    """Re-check only the named entries; removals first so a moved directory is re-armed cleanly."""
    assert slot.root_id is not None  # a slot with changes to apply was walked in full before
    walk = _Walk(slot.entries, ctx, root, limits, watch, slot.root_id[0], slot.entries, dict(slot.dirs),
                 set(slot.shared), set(slot.links), replaced={})
    fds = _DirFds(root_fd, walk.dirs)
    touched: set[str] = set()
    only_files = True  # no entry dropped, no directory captured: ``touched`` names every change
    try:
        found = []
        for prefix, name in sorted(names):
            if prefix not in walk.dirs or (prefix == "" and name == ".okf"):
                continue
            dir_fd = fds.get(prefix)
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                _drop(walk, prefix + name)
                only_files = False
                continue
            except OSError:
                raise _Fallback
            if name.lower().startswith(_CRASH_PREFIXES):
                raise _Fallback  # the full walk raises the canonical error
            rel = prefix + name
            if (stat.S_ISDIR(st.st_mode) and walk.dirs.get(rel + "/") == (st.st_dev, st.st_ino)
                    and walk.watch is not None and walk.watch.watches(rel + "/")):
                # The same, still-watched directory: its contents report through its own watch.
                # (A deleted and recreated directory can reuse the inode but has lost its watch.)
                continue
            if stat.S_ISREG(st.st_mode) and rel + "/" not in walk.dirs:
                walk.links.discard(rel)
                found.append((prefix, name, st))
                continue
            _drop(walk, rel)
            only_files = False
            if stat.S_ISLNK(st.st_mode):
                walk.links.add(rel)
            if stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode):
                found.append((prefix, name, st))
        for prefix, name, st in found:
            _check(ctx)
            rel, depth = prefix + name, prefix.count("/")
            _check_path(rel, depth)
            if stat.S_ISDIR(st.st_mode):
                only_files = False
                _capture_child(walk, fds.get(prefix), name, rel + "/", depth + 1, st)
            else:  # an existing entry keeps its place: the walk order changes only with the file set
                touched.add(rel)
                _capture_file(walk, fds.get(prefix), name, rel, st)
    except ToolError as exc:
        if exc.code == "operation_cancelled":
            raise
        raise _Fallback  # let the full walk report the first problem in its own order
    finally:
        fds.close()
    if walk.replaced is not None:  # only files the slot had were re-read: layered on its entries
        walk.entries, walk.replaced = LayeredMap(walk.entries, walk.replaced), None
    if walk.watch is None or len(walk.entries) > limits.files:
        raise _Fallback
    # The bytes held: the slot's, moved by the files re-read (a sum over every entry cost a
    # 5,000-file bundle ~0.5 ms of each capture after a write); anything dropped: counted again.
    walk.total = (slot.nbytes + sum(walk.entries[rel].record.size - _size(slot.entries.get(rel)) for rel in touched)
                  if only_files else sum(e.record.size for e in walk.entries.values()))
    if walk.total > limits.total_bytes:
        raise _Fallback
    # Comparing the key sets costs ~0.3 ms at 10,000 files; when nothing was dropped or added,
    # they are the same without looking.
    walk.same_keys = only_files and all(rel in slot.entries for rel in touched)
    if not walk.same_keys and walk.entries.keys() != slot.entries.keys():
        walk.entries = {rel: walk.entries[rel] for rel in sorted(walk.entries, key=_walk_order)}
    walk.touched = touched if only_files else None
    Stats.incremental += 1
    return walk


def _size(entry: _Entry | None) -> int:
    return 0 if entry is None else entry.record.size


def _publish(slot: _CacheSlot, walk: _Walk, path: str, root_id: tuple[int, int], ctx) -> Snapshot:
    """Install the walk's result in the slot; an unchanged file set keeps the same Snapshot."""
    entries = walk.entries
    old = slot.entries
    if slot.snapshot is not None and (walk.same_keys or entries.keys() == old.keys()):
        candidates = entries if walk.touched is None else walk.touched
        changed = {k: entries[k] for k in candidates if entries[k].record.digest != old[k].record.digest}
        if not changed:
            snapshot = slot.snapshot
        else:
            built = _build_documents(changed, ctx)
            snapshot = slot.snapshot.replaced({k: e.record for k, e in changed.items()}, built)
            snapshot.holding = _in_hand(built)
    else:
        documents = _build_documents(entries, ctx)
        _check(ctx)
        snapshot = Snapshot(path, CapturedFiles({k: e.record for k, e in entries.items()}), documents)
        snapshot.holding = _in_hand(documents)
    slot.snapshot, slot.entries, slot.dirs, slot.shared = snapshot, entries, walk.dirs, walk.shared
    slot.links = walk.links
    slot.watch, slot.root_id, slot.limits = walk.watch, root_id, _limit_stamp(walk.limits)
    slot.nbytes = walk.total if walk.touched is not None else sum(e.record.size for e in entries.values())
    if snapshot.holding:
        release_at_call_end(snapshot)
    return snapshot


def _in_hand(documents: dict[str, Document]) -> list[Document]:
    """The documents still holding the bytes they were parsed from (released when the capturing
    call ends, or by the next capture)."""
    return [d for d in documents.values() if d.holds_releasable_bytes()]


def _revalidate(slot: _CacheSlot, path: str, root_fd: int, root_id: tuple[int, int], ctx,
                limits: BundleLimits) -> Snapshot:
    if slot.snapshot is not None:
        # The call that captured it has used the bytes in hand (its first pass over the bodies);
        # later readers re-read what they need.
        slot.snapshot.release_bytes()
    watch, slot.watch = slot.watch, None  # any failure below leaves the slot needing a full walk
    walk = None
    if (watch is not None and watch.owner == os.getpid() and slot.snapshot is not None
            and slot.root_id == root_id and slot.limits == _limit_stamp(limits)):
        changes = watch.drain()
        if not changes.full:
            if not changes.names and _shared_unchanged(slot, root_fd):
                slot.watch = watch
                return slot.snapshot
            names = changes.names | {_split(rel) for rel in slot.shared}
            try:
                walk = _apply_changes(slot, watch, path, root_fd, names, ctx, limits)
            except _Fallback:
                walk = None
            except BaseException:
                watch.close()
                raise
    if walk is None:
        if watch is not None:
            watch.close()
        walk = _full_walk(slot, path, root_fd, root_id, ctx, limits)
    return _publish(slot, walk, path, root_id, ctx)


def _shared_unchanged(slot: _CacheSlot, root_fd: int) -> bool:
    """Whether every hard-linked file (no event covers writes through its other links) still
    has its captured identity; cheap when there are none."""
    if not slot.shared:
        return True
    fds = _DirFds(root_fd, slot.dirs)
    try:
        for rel in slot.shared:
            prefix, name = _split(rel)
            st = os.stat(name, dir_fd=fds.get(prefix), follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode) or file_key(st) != slot.entries[rel].key:
                return False
        return True
    except (OSError, KeyError, _Fallback):
        return False
    finally:
        fds.close()


def _split(rel: str) -> tuple[str, str]:
    prefix, _, name = rel.rpartition("/")
    return (prefix + "/" if prefix else "", name)


def capture_snapshot(bundle_path: str, ctx) -> Snapshot:
    """Pin, revalidate (cache, watch or walk), parse; the snapshot every read tool answers from.

    A failure leaves without its traceback: the walk's frames hold every byte read so far, and
    an exception kept alive by a reference cycle further up (the collector is paused here, and
    rarely runs a full pass) would keep them all in memory.
    """
    return _guarded(ctx, lambda runtime: _capture_snapshot(bundle_path, ctx, runtime))


def capture_pinned(bundle_path: str, root_fd: int, ctx, *, locked: bool = False) -> tuple[Snapshot, frozenset[str]] | None:
    """The same snapshot for a writer that pinned ``bundle_path`` itself as ``root_fd``, with the
    symbolic links the capture skipped. ``locked``: the caller holds the writers' lock, so no
    commit can publish and the readers' gate is not taken; a capture running in another thread
    then gives None (it may be waiting for that gate) and the writer captures on its own."""
    def capture(runtime: process.Runtime) -> tuple[Snapshot, frozenset[str]] | None:
        _check(ctx)
        path = check_bundle_path(bundle_path)
        root_stat = os.fstat(root_fd)
        slots = _slots(runtime)
        slot = slots.get(path, None, _CacheSlot)
        if not slot.lock.acquire(blocking=not locked):
            return None
        try:
            root_id, limits = (root_stat.st_dev, root_stat.st_ino), read_limits(runtime)
            if locked:
                snapshot = _revalidate(slot, path, root_fd, root_id, ctx, limits)
            else:
                with consistent_read(root_fd, lambda: _check(ctx)):
                    snapshot = _revalidate(slot, path, root_fd, root_id, ctx, limits)
            links = frozenset(slot.links)
        finally:
            slot.lock.release()
        slots.resize(path)
        return snapshot, links

    return _guarded(ctx, capture)


def _guarded(ctx, capture):
    runtime = process.of(ctx)
    try:
        with runtime.gc_paused():
            return capture(runtime)
    except OSError as exc:  # any I/O failure not mapped where it happened
        _forget_frames(exc)
        raise _io_failure(exc) from None
    except BaseException as exc:
        _forget_frames(exc)
        raise


def _forget_frames(exc: BaseException) -> None:
    """Drop the frames of ``exc`` and of the exceptions it chains to (each holds its own)."""
    for current in exception_chain(exc):
        current.__traceback__ = None


def _capture_snapshot(bundle_path: str, ctx, runtime: process.Runtime) -> Snapshot:
    _check(ctx)
    path = check_bundle_path(bundle_path)
    root_fd, root_stat = pin_root(path)
    try:
        slots = _slots(runtime)
        slot = slots.get(path, None, _CacheSlot)
        # A commit's renames run wholly before or after this (interrupted ones are finished first).
        with slot.lock, consistent_read(root_fd, lambda: _check(ctx)):
            snapshot = _revalidate(slot, path, root_fd, (root_stat.st_dev, root_stat.st_ino), ctx,
                                   read_limits(runtime))
        slots.resize(path)
        return snapshot
    finally:
        os.close(root_fd)
