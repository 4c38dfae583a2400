"""Capture a bundle into an immutable snapshot, reusing unchanged files across calls.

Capture (§1.1): walk the pinned root through directory descriptors, never following symlinks;
keep regular files only (type from ``lstat``); exclude the root-level ``.okf``; fail on
transaction crash evidence; validate every revision path; enforce the file, byte, depth and path
limits. Reuse: a process-wide cache keyed by the pinned root path keeps, per file, its identity
``(dev, ino, size, mtime_ns, ctime_ns)``, bytes and parsed :class:`Document`. Every call walks
and ``lstat``s again; only new or changed files are read and parsed again, and an unchanged
tree returns the very same :class:`Snapshot`.
"""

from __future__ import annotations

import os
import re
import stat
import threading
from collections import OrderedDict
from dataclasses import dataclass

from knowspec.impl.errors import ToolError
from knowspec.impl.okf.frontmatter import YamlLimitError
from knowspec.impl.okf.gcpause import gc_paused
from knowspec.impl.okf.model import Document, Snapshot, document_for
from knowspec.impl.okf.paths import DIR_FLAGS, check_bundle_path, pin_root

MAX_FILES = 10_000
MAX_TOTAL_BYTES = 64 * 1024 * 1024
MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 64
MAX_PATH_BYTES = 4096
LIMIT_MESSAGE = "bundle exceeds MCP resource limits"
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)

_CRASH_PREFIXES = (".okf-index-txn-", ".okf-document-txn-", ".okf-publication-private-v2-")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class Stats:
    """Counters for tests and diagnostics (documents parsed, files read)."""

    parsed_documents = 0
    files_read = 0


@dataclass
class _Entry:
    key: tuple
    data: bytes
    document: Document | None


@dataclass
class _CacheSlot:
    entries: dict[str, _Entry]
    snapshot: Snapshot


MAX_CACHED_ROOTS = 8  # least recently used roots beyond this are dropped
_cache: OrderedDict[str, _CacheSlot] = OrderedDict()
_cache_lock = threading.Lock()


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()


def _limit() -> ToolError:
    return ToolError("resource_limit", LIMIT_MESSAGE)


def valid_revision_path(path: str) -> bool:
    """§1.1 revision-path validation (relative, clean, no backslash or control, not ``.okf``)."""
    if path == "" or path.startswith("/") or "\\" in path or _CONTROL.search(path):
        return False
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return False
    return parts[0] != ".okf"


def _check(ctx, operation: str = "load bundle") -> None:
    if ctx is not None:
        ctx.check_cancelled(operation)


def _capture(root_fd: int, previous: dict[str, _Entry] | None, ctx) -> dict[str, _Entry]:
    """Capture every regular file under the pinned root (at most MAX_DEPTH descriptors open)."""
    entries: dict[str, _Entry] = {}
    total = [0]
    _capture_dir(root_fd, "", 0, previous, entries, total, ctx)
    return entries


def _capture_dir(dir_fd, prefix, depth, previous, entries, total, ctx) -> None:
    _check(ctx)
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
        mode = st.st_mode
        if stat.S_ISLNK(mode) or not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
            continue
        try:
            encoded = rel.encode("utf-8")
        except UnicodeEncodeError:
            raise ToolError("invalid_request", "load bundle: invalid revision path")
        if len(encoded) > MAX_PATH_BYTES or depth + 1 > MAX_DEPTH:
            raise _limit()
        if not valid_revision_path(rel):
            raise ToolError("invalid_request", "load bundle: invalid revision path")
        if stat.S_ISDIR(mode):
            try:
                child = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
            except OSError as exc:
                raise ToolError("invalid_request", f"load bundle: {exc.strerror}")
            try:
                cst = os.fstat(child)
                if (cst.st_ino, cst.st_dev) != (st.st_ino, st.st_dev):
                    raise ToolError("invalid_request", "load bundle: file changed while reading")
                _capture_dir(child, rel + "/", depth + 1, previous, entries, total, ctx)
            finally:
                os.close(child)
            continue
        if len(entries) + 1 > MAX_FILES or st.st_size > MAX_FILE_BYTES:
            raise _limit()
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        old = previous.get(rel) if previous else None
        entry = old if old is not None and old.key == key else _Entry(key, _read_file(dir_fd, name, st), None)
        total[0] += len(entry.data)
        if total[0] > MAX_TOTAL_BYTES:
            raise _limit()
        entries[rel] = entry
        if len(entries) % 256 == 0:
            _check(ctx)


def _read_file(dir_fd: int, name: str, st: os.stat_result) -> bytes:
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise ToolError("invalid_request", f"load bundle: {exc.strerror}")
    try:
        fst = os.fstat(fd)
        if (fst.st_ino, fst.st_dev) != (st.st_ino, st.st_dev) or not stat.S_ISREG(fst.st_mode):
            raise ToolError("invalid_request", "load bundle: file changed while reading")
        chunks = []
        size = 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_FILE_BYTES:
                raise _limit()
            chunks.append(chunk)
        Stats.files_read += 1
        return b"".join(chunks)
    finally:
        os.close(fd)


def _build_documents(entries: dict[str, _Entry], ctx) -> dict[str, Document]:
    documents: dict[str, Document] = {}
    for i, (rel, entry) in enumerate(entries.items()):
        if not rel.endswith(".md"):
            continue
        if entry.document is None:
            if i % 64 == 0:
                _check(ctx)
            try:
                entry.document = document_for(rel, entry.data)
            except YamlLimitError:
                raise _limit()
            Stats.parsed_documents += 1
        documents[rel] = entry.document
    return documents


def capture_snapshot(bundle_path: str, ctx) -> Snapshot:
    """Pin, capture (reusing the cache), parse; the snapshot every read tool answers from."""
    with gc_paused():
        return _capture_snapshot(bundle_path, ctx)


def _capture_snapshot(bundle_path: str, ctx) -> Snapshot:
    _check(ctx)
    path = check_bundle_path(bundle_path)
    root_fd, _root_stat = pin_root(path)
    try:
        with _cache_lock:
            slot = _cache.get(path)
            if slot is not None:
                _cache.move_to_end(path)
        previous = slot.entries if slot else None
        entries = _capture(root_fd, previous, ctx)
    finally:
        os.close(root_fd)
    if slot is not None and entries.keys() == slot.entries.keys() and all(
        entries[k] is slot.entries[k] for k in entries
    ):
        return slot.snapshot
    documents = _build_documents(entries, ctx)
    _check(ctx)
    snapshot = Snapshot(path, {k: e.data for k, e in entries.items()}, documents)
    with _cache_lock:
        _cache[path] = _CacheSlot(entries, snapshot)
        _cache.move_to_end(path)
        while len(_cache) > MAX_CACHED_ROOTS:
            _cache.popitem(last=False)
    return snapshot
