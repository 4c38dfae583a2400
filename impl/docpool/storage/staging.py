"""SQLite pool files written whole beside the path they will take, and what dead writers left.

A first IMPORTDOC and ``pool build`` write their pool under a fresh name beside its place
(``.help.db.<pid>-<token>.importing``) and link or rename it in once committed. A writer killed
mid-way, or after linking but before removing its name, leaves that file (as big as the pool)
and its journals. Each writer therefore holds an exclusive ``flock`` on a lock file named after
its staging file for as long as it runs; the next import, removal or build of that pool removes
every staging file of it whose lock nobody holds. The lock is a file of its own, not the pool:
SQLite takes POSIX locks on the pool, and NFS emulates ``flock`` with them.
"""

from __future__ import annotations

import fcntl
import os
import re
import secrets
import stat
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

POOL_SIDECARS = ("-wal", "-shm", "-journal")
LOCK_SUFFIX = ".lock"
# Between creating its lock file and locking it a writer is unprotected for an instant; a lock
# file younger than this is never taken for a dead writer's.
GRACE_SECONDS = 60.0


def remove_pool_file(path: Path) -> None:
    """Remove a pool file and its journal files, if any."""
    for leftover in (path, *(path.with_name(path.name + suffix) for suffix in POOL_SIDECARS)):
        leftover.unlink(missing_ok=True)


@contextmanager
def staged(path: Path, purpose: str, *, owner_only: bool = False) -> Iterator[Path]:
    """A fresh name beside ``path`` (same folder, so the rename or link is atomic) for a pool
    written whole, locked as this writer's until the block ends, then removed with its journals
    (a name already linked to ``path`` leaves ``path`` whole). Dead writers' staging files of
    the same pool are removed first (:func:`sweep_dead_staging`). ``owner_only``: the file is
    made empty with mode 0600 before SQLite opens it (which takes an empty file for a new
    database, and gives its journals the database's mode)."""
    sweep_dead_staging(path)
    staging = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.{purpose}")
    lock = _lock_of(staging)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a fresh name: nobody else can hold it
        try:
            if owner_only:
                os.close(os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
            yield staging
        finally:
            remove_pool_file(staging)
            lock.unlink(missing_ok=True)
    finally:
        os.close(fd)


def link_into_place(staging: Path, target: Path) -> bool:
    """Give the committed pool ``staging`` the name ``target`` unless something has it already
    (``False``: the caller joins that pool). Every first import places its pool under one lock
    file beside ``target``: the journals a deleted pool left are removed only while no pool has
    the name (a losing import had removed the winner's live WAL, committed transactions and
    all), and without hard links the check and the rename are one step (a second rename would
    replace the first import's pool)."""
    with _placing_lock(target):
        if os.path.lexists(target):
            return False
        for suffix in ("-wal", "-shm"):  # a deleted pool's, which SQLite would apply to this one
            target.with_name(target.name + suffix).unlink(missing_ok=True)
        try:
            os.link(staging, target)
        except FileExistsError:
            return False
        except OSError:  # no hard links on this file system: the rename, exclusive under the lock
            os.replace(staging, target)
        return True


@contextmanager
def _placing_lock(target: Path) -> Iterator[None]:
    """An exclusive lock on ``.<pool>.placing.lock``, removed when released. A waiter that wakes
    on a file already unlinked (its holder removed it) opens the name again."""
    lock = target.with_name(f".{target.name}.placing{LOCK_SUFFIX}")
    while True:
        fd = _open_lock(lock)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            named = os.stat(lock)
            held = os.fstat(fd)
        except FileNotFoundError:
            os.close(fd)
            continue
        except BaseException:
            os.close(fd)
            raise
        if (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino):
            break
        os.close(fd)
    try:
        yield
    finally:
        try:
            lock.unlink(missing_ok=True)
        except OSError:  # another user's lock file in a sticky folder: it stays, and is released
            pass
        finally:
            os.close(fd)


def _open_lock(path: Path) -> int:
    """A lock file opened for writing (NFS locks only those), created with the umask's mode so
    another user's import can lock it too; read-only where only that is allowed."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except PermissionError:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)


def keep_access_of(old: Path, new: Path) -> None:
    """Give ``new`` the permission bits and, where this user may set it, the group of ``old``
    (if there is one) before it takes ``old``'s place: a rebuilt pool opened by the server's
    group (mode 0640) must not come back with the umask's mode. SQLite gives the pool's
    journals the pool's mode."""
    try:
        st = old.stat()
    except FileNotFoundError:
        return
    os.chmod(new, stat.S_IMODE(st.st_mode))
    if new.stat().st_gid != st.st_gid:
        try:
            os.chown(new, -1, st.st_gid)
        except PermissionError:  # not a member of that group: the bits still hold
            pass


def sweep_dead_staging(path: Path, *, grace: float = GRACE_SECONDS) -> list[str]:
    """Remove the staging files of ``path``'s pool whose writer is gone (its lock free and older
    than ``grace`` seconds, or no lock at all); returns the names removed. Never touches ``path``
    itself: a staging name a dead writer had already linked in is only a second name of it."""
    pattern = re.compile(re.escape(f".{path.name}.") + r"\d+-[0-9a-f]{8}\.[a-z]+")
    removed: list[str] = []
    try:
        names = os.listdir(path.parent)
    except OSError:
        return removed
    stems = {name[: -len(LOCK_SUFFIX)] if name.endswith(LOCK_SUFFIX) else name for name in names}
    for stem in sorted(stems):  # a lock alone: its writer died between removing the file and it
        if pattern.fullmatch(stem) and _removed_if_writer_gone(path.with_name(stem), grace):
            removed.append(stem)
    return removed


def _lock_of(staging: Path) -> Path:
    return staging.with_name(staging.name + LOCK_SUFFIX)


def _removed_if_writer_gone(staging: Path, grace: float) -> bool:
    """Remove ``staging``'s files and lock if its writer is gone (while this call holds the lock:
    no writer can take a name it did not create); whether it did."""
    lock = _lock_of(staging)
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)  # NFS locks only files open for writing
    except FileNotFoundError:
        return _older_than(staging, grace) and _removed(staging, None)
    except OSError:  # another user's writer: not ours to judge
        return False
    try:
        if not _older_than(lock, grace):
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held (the writer runs), or the lock cannot be told: either way left
            return False
        return _removed(staging, lock)
    finally:
        os.close(fd)


def _older_than(path: Path, seconds: float) -> bool:
    try:
        return time.time() - path.stat().st_mtime >= seconds
    except OSError:
        return False


def _removed(staging: Path, lock: Path | None) -> bool:
    try:
        remove_pool_file(staging)
        if lock is not None:
            lock.unlink(missing_ok=True)
    except OSError:
        return False
    return True
