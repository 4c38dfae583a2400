"""The commit journal: stage payloads, cross the durable boundary, publish, recover.

Protocol (everything private lives under the root's ``.okf/``, which readers never capture):
1. every new file body is written as ``.okf/txn/payload-NNNNN``, the receipt as
   ``.okf/txn/receipt`` and the manifest as ``.okf/journal.json.tmp``; then each is fsynced, and
   ``.okf/txn`` (the folder is made once and kept: a commit makes and removes no folders, each of
   which would cost a sync);
2. the manifest is renamed to ``.okf/journal.json`` and ``.okf`` is fsynced: this rename is the
   **durable boundary**;
3. holding ``.okf`` exclusively (:func:`lock.publishing`), each payload is renamed over its
   target (root ``index.md`` last) and deletes are unlinked; the receipt is renamed into
   ``.okf/receipts``; then every folder they touched is fsynced, and the journal removed.

Every file of a step is written before any is synced, and every rename made before any folder is
synced: each sync still comes before what depends on it, while the file system may commit the
step's changes together (a 1,000-file commit took 22-38% less time than with a folder sync after
each rename; a one-file commit no less, each file's sync committing on its own on ext4).

A crash before step 2 leaves only private staging, which recovery deletes (roll back). A
crash after it leaves a journal, which recovery completes (roll forward): a payload still
in staging is renamed into place, one already moved is checked by digest. Either way every
visible file ends wholly old or wholly new. A journal of format 1 (written before the staging
folder was kept) names its payloads in ``.okf/txn/<txn>/``; it is rolled forward the same way.
A live reader holds ``.okf`` shared while it captures (:mod:`readers`), so it sees the rename
sequence wholly done or not begun.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from typing import Callable

from knowspec.impl.okf.write import atomic, lock, receipts
from knowspec.impl.okf.write.paths import is_writable_path
from knowspec.impl.okf.write.rootfs import DIR_FLAGS, open_subdir, read_regular

OKF_DIR = ".okf"
TXN_DIR = "txn"
FORMAT = 2  # payloads and the receipt straight in TXN_DIR; format 1 had a folder per commit below it
STAGED_RECEIPT = "receipt"
MAX_UNSYNCED = 64  # files written and not yet synced at once (each holds a descriptor)
JOURNAL = "journal.json"
JOURNAL_TMP = "journal.json.tmp"
MAX_JOURNAL_BYTES = 16 << 20

Step = Callable[[str], None]


def _noop(_: str) -> None:
    return None


def open_private(root_fd: int, *, create: bool) -> int | None:
    """fd of ``.okf`` (created when asked), None when absent and not created."""
    if create:
        try:
            os.mkdir(OKF_DIR, 0o755, dir_fd=root_fd)
            atomic.fsync_dir(root_fd)
        except FileExistsError:
            pass
    try:
        return os.open(OKF_DIR, DIR_FLAGS, dir_fd=root_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise receipts.StorageCorrupt(f".okf is not a private directory: {exc.strerror}") from None


def _publish_order(path: str) -> tuple[int, bytes]:
    """Root ``index.md`` is published last; everything else in byte order."""
    return (1 if path == "index.md" else 0, path.encode("utf-8"))


def write_journal(okf_fd: int, writes: dict[str, bytes], manifest_for: Callable[[list[dict]], dict],
                  step: Step = _noop) -> dict:
    """Stage every payload and the receipt, then make the manifest (``manifest_for`` of the
    payloads' entries) durable; returning means the commit must be completed. Runs under the
    writer lock, after recovery emptied the staging folder."""
    entries = [{"path": path, "payload": f"payload-{ordinal:05d}", "digest": hashlib.sha256(writes[path]).hexdigest()}
               for ordinal, path in enumerate(sorted(writes, key=_publish_order))]
    manifest = manifest_for(entries)
    staging = open_subdir(okf_fd, TXN_DIR, create=True)
    unsynced: list[int] = []

    def synced() -> None:
        fds, unsynced[:] = list(unsynced), []
        atomic.sync_all(fds)

    try:
        for entry in entries:
            if len(unsynced) >= MAX_UNSYNCED:
                synced()
            unsynced.append(atomic.create_unsynced(staging, entry["payload"], writes[entry["path"]]))
            step("staged")
        unsynced.append(atomic.create_unsynced(staging, STAGED_RECEIPT, manifest["receipt"].encode("utf-8")))
        atomic.unlink_if_exists(okf_fd, JOURNAL_TMP)
        raw = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode("utf-8")
        unsynced.append(atomic.create_unsynced(okf_fd, JOURNAL_TMP, raw))
        synced()
        atomic.fsync_dir(staging)
    finally:
        for fd in unsynced:  # a write or a step failed: the staging is cleaned up
            os.close(fd)
        os.close(staging)
    step("journal-written")
    os.rename(JOURNAL_TMP, JOURNAL, src_dir_fd=okf_fd, dst_dir_fd=okf_fd)
    atomic.fsync_dir(okf_fd)
    return manifest


def _split(path: str) -> tuple[str, str]:
    head, _, name = path.rpartition("/")
    return head, name


class Unpublishable(Exception):
    """A write that publication could never make: found before the durable boundary, where
    refusing still leaves the bundle as it was (after it, the journal would wait forever)."""


def check_publishable(root_fd: int, paths: list[str]) -> None:
    """Refuse a write or delete whose folders are files (or links), whose target is a folder,
    whose names are longer than the file system takes, or whose last existing folder this
    process may not change (a read-only folder had left a migration half-published and the
    bundle locked). Runs under the writer lock, before staging."""
    name_max = _name_max(root_fd)
    for path in paths:
        parts = path.split("/")
        if any(len(part.encode("utf-8")) > name_max for part in parts):
            raise Unpublishable(f"cannot write {path!r}: a name in it is longer than the file system takes")
        fd = os.dup(root_fd)
        try:
            for place, part in enumerate(parts):
                try:
                    st = os.stat(part, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    break  # made at publication, with everything below it
                except OSError as exc:
                    raise Unpublishable(f"cannot write {path!r}: {exc.strerror}") from None
                if place == len(parts) - 1:
                    if stat.S_ISDIR(st.st_mode):
                        raise Unpublishable(f"cannot write {path!r}: it is a folder")
                elif not stat.S_ISDIR(st.st_mode):
                    raise Unpublishable(f"cannot write {path!r}: {'/'.join(parts[:place + 1])!r} is not a folder")
                else:
                    nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
                    os.close(fd)
                    fd = nxt
                    if _holds_a_store(fd):
                        raise Unpublishable(f"cannot write {path!r}: {'/'.join(parts[:place + 1])!r} is another "
                                            "bundle, with its own store")
            if not os.access(".", os.W_OK | os.X_OK, dir_fd=fd, effective_ids=True):
                raise Unpublishable(f"cannot write {path!r}: its folder is read-only")
        finally:
            os.close(fd)


def check_not_nested(root_fd: int) -> None:
    """Refuse to write a bundle that lies inside another bundle with a store: each store locks
    its own root only, so two writers, one given the outer folder and one the inner, had both
    applied and one change was lost. (The other way round, ``check_publishable`` refuses a
    write into a folder holding a store.)"""
    fd = os.dup(root_fd)
    try:
        here = os.fstat(fd)
        while True:
            try:
                parent = os.open("..", DIR_FLAGS, dir_fd=fd)
            except OSError:  # an ancestor this process may not open: nothing above is ours to judge
                return
            os.close(fd)
            fd = parent
            above = os.fstat(fd)
            if (above.st_dev, above.st_ino) == (here.st_dev, here.st_ino):
                return  # the file system's root
            if _holds_a_store(fd):
                raise Unpublishable("the bundle lies inside another bundle, which keeps its own store: "
                                    "write through that bundle")
            here = above
    finally:
        os.close(fd)


def _holds_a_store(dir_fd: int) -> bool:
    try:
        return stat.S_ISDIR(os.stat(OKF_DIR, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _name_max(dir_fd: int) -> int:
    """The longest name, in bytes, the file system holding ``dir_fd`` takes."""
    try:
        return os.fpathconf(dir_fd, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def publish(root_fd: int, okf_fd: int, manifest: dict, step: Step = _noop,
            timeout: float = lock.DEFAULT_LEASE_TIMEOUT) -> receipts.Receipt:
    """Roll the journal forward to its post-state; idempotent, so recovery can re-run it."""
    receipt = receipts.Receipt.from_bytes(manifest["receipt"].encode("utf-8"))
    try:
        staging: int | None = os.open(_staging_of(manifest), DIR_FLAGS, dir_fd=okf_fd)
    except FileNotFoundError:
        staging = None
    try:
        with lock.publishing(okf_fd, timeout):
            touched = _rename_all(root_fd, staging, manifest, step)
        receipts_fd = open_subdir(okf_fd, receipts.RECEIPTS_DIR, create=True)
        try:
            _place_receipt(staging, receipts_fd, receipt)
            for head in sorted(touched):  # after every rename: the first sync may commit them all
                parent = open_subdir(root_fd, head)
                try:
                    atomic.fsync_dir(parent)
                finally:
                    os.close(parent)
            atomic.fsync_dir(receipts_fd)
            step("receipt")
            atomic.unlink_if_exists(okf_fd, JOURNAL)
            atomic.fsync_dir(okf_fd)
            if receipts.prune_due(receipts_fd):
                receipts.prune(receipts_fd)
        finally:
            os.close(receipts_fd)
    finally:
        if staging is not None:
            os.close(staging)
    clean_staging(okf_fd)
    return receipt


def _place_receipt(staging: int | None, receipts_fd: int, receipt: receipts.Receipt) -> None:
    """The staged receipt renamed into the receipts folder (not yet synced); written there
    instead when none is staged (a format-1 journal, or one an earlier roll-forward moved:
    the same bytes again)."""
    name = receipts.receipt_name(receipt.IdempotencyKey)
    if staging is not None:
        try:
            os.rename(STAGED_RECEIPT, name, src_dir_fd=staging, dst_dir_fd=receipts_fd)
            return
        except FileNotFoundError:
            pass
    receipts.store(receipts_fd, receipt)


def _rename_all(root_fd: int, txn_fd: int | None, manifest: dict, step: Step) -> set[str]:
    """Every payload into place and every delete done (already-moved payloads checked); the
    folders they changed, still to be synced."""
    touched: set[str] = set()
    for entry in manifest["writes"]:
        head, name = _split(entry["path"])
        parent = open_subdir(root_fd, head, create=True)
        try:
            moved = False
            if txn_fd is not None:
                try:
                    os.stat(entry["payload"], dir_fd=txn_fd, follow_symlinks=False)
                    atomic.ensure_not_link(parent, name)
                    _keep_mode(parent, name, txn_fd, entry["payload"])
                    os.rename(entry["payload"], name, src_dir_fd=txn_fd, dst_dir_fd=parent)
                    moved = True
                except FileNotFoundError:
                    pass
            if not moved:
                current = read_regular(parent, name)
                if current is None or hashlib.sha256(current).hexdigest() != entry["digest"]:
                    raise receipts.StorageCorrupt(
                        f"{entry['path']!r} changed after the interrupted commit wrote it; put its committed "
                        "content back, or remove .okf/journal.json to give the rest of that commit up")
        finally:
            os.close(parent)
        touched.add(head)
        step("published")
    for path in manifest["deletes"]:
        head, name = _split(path)
        parent = open_subdir(root_fd, head)
        try:
            atomic.unlink_if_exists(parent, name)
        finally:
            os.close(parent)
        touched.add(head)
        step("deleted")
    return touched


def _staging_of(manifest: dict) -> str:
    """The folder below ``.okf`` holding the journal's payloads, by its format."""
    match manifest.get("format"), manifest.get("txn"):
        case 2, _:
            return TXN_DIR
        case 1, str(txn) if txn not in ("", ".", "..") and "/" not in txn and "\0" not in txn:
            return f"{TXN_DIR}/{txn}"
        case 1, _:
            raise receipts.StorageCorrupt("journal manifest names no staging folder")
    raise receipts.StorageCorrupt("journal manifest has a format this version does not know")


def _keep_mode(parent: int, name: str, txn_fd: int, payload: str) -> None:
    """A replaced file keeps its permission bits (the payload is ours, never a link)."""
    try:
        mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode & 0o7777
    except FileNotFoundError:
        return
    os.chmod(payload, mode, dir_fd=txn_fd)


def clean_staging(okf_fd: int) -> None:
    """Remove what staging left (any format's); the staging folder itself stays."""
    atomic.unlink_if_exists(okf_fd, JOURNAL_TMP)
    atomic.empty_tree(okf_fd, TXN_DIR)


def pending(root_fd: int) -> bool:
    """True when an interrupted commit (journal or staging) waits for recovery."""
    return leftover(root_fd) is not None


def leftover(root_fd: int) -> str | None:
    """What an unfinished commit left: ``"journal"`` (past the durable boundary: roll
    forward), ``"staging"`` (before it: roll back) or None.

    A root ``.okf`` that is not a real directory is not ours: readers ignore it and the
    store refuses it when asked to commit.
    """
    try:
        okf_fd = open_private(root_fd, create=False)
    except receipts.StorageCorrupt:
        return None
    if okf_fd is None:
        return None
    try:
        return leftover_in(okf_fd)
    finally:
        os.close(okf_fd)


def leftover_in(okf_fd: int) -> str | None:
    """:func:`leftover` for an open ``.okf``."""
    names = set(os.listdir(okf_fd))
    if JOURNAL in names:
        return "journal"
    if JOURNAL_TMP in names or (TXN_DIR in names and _holds_anything(okf_fd, TXN_DIR)):
        return "staging"
    return None


def _holds_anything(okf_fd: int, name: str) -> bool:
    """Whether the staging folder holds an entry (or is not a folder at all: ours to remove)."""
    try:
        fd = os.open(name, DIR_FLAGS, dir_fd=okf_fd)
    except FileNotFoundError:
        return False
    except OSError:  # a file or a link in its place
        return True
    try:
        with os.scandir(fd) as entries:
            return next(entries, None) is not None
    finally:
        os.close(fd)


_PAYLOAD = re.compile(r"payload-[0-9]{5}")
_DIGEST = re.compile(r"[0-9a-f]{64}")


def _check_names(manifest: dict) -> None:
    """A journal on disk is input like any file of the bundle (a caller may have written it):
    it names only writable bundle paths, its own payloads and digests, before anything of it is
    done. A ``..`` or a store folder in it had deleted and written files outside the bundle."""
    writes, deletes = manifest.get("writes"), manifest.get("deletes")
    if not isinstance(writes, list) or not isinstance(deletes, list):
        raise receipts.StorageCorrupt("journal manifest lists no writes and deletes")
    for entry in writes:
        if not (isinstance(entry, dict) and isinstance(entry.get("path"), str) and is_writable_path(entry["path"])
                and isinstance(entry.get("payload"), str) and _PAYLOAD.fullmatch(entry["payload"])
                and isinstance(entry.get("digest"), str) and _DIGEST.fullmatch(entry["digest"])):
            raise receipts.StorageCorrupt("journal manifest names a write that is not a bundle file")
    if not all(isinstance(path, str) and is_writable_path(path) for path in deletes):
        raise receipts.StorageCorrupt("journal manifest names a delete that is not a bundle file")
    if not isinstance(manifest.get("receipt"), str):
        raise receipts.StorageCorrupt("journal manifest holds no receipt")


def recover(root_fd: int, step: Step = _noop,
            timeout: float = lock.DEFAULT_LEASE_TIMEOUT) -> receipts.Receipt | None:
    """Finish (journal present) or roll back (staging only) an interrupted commit.

    Must run under the writer lock. Returns the receipt of a rolled-forward commit.
    """
    okf_fd = open_private(root_fd, create=False)
    if okf_fd is None:
        return None
    try:
        raw = read_regular(okf_fd, JOURNAL)
        if raw is None:
            clean_staging(okf_fd)
            return None
        if len(raw) > MAX_JOURNAL_BYTES:
            raise receipts.StorageCorrupt("journal manifest is too large")
        try:
            manifest = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise receipts.StorageCorrupt("journal manifest is not JSON") from exc
        if not isinstance(manifest, dict):
            raise receipts.StorageCorrupt("journal manifest is not an object")
        _check_names(manifest)
        return publish(root_fd, okf_fd, manifest, step, timeout)
    finally:
        os.close(okf_fd)
