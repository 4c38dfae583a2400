"""A real case-folding, normalisation-insensitive volume for tests, as macOS's APFS is by default:
a FUSE view of a backing folder in which a name finds the entry whose folded form it shares.

    python case_folding_volume.py BACKING MOUNTPOINT    # runs in the foreground until unmounted

Case-preserving: a new entry keeps the spelling it was made with. ``mounted`` (a context manager)
starts it and unmounts it; it needs ``/dev/fuse``, libfuse 3 (Debian's ``fuse3``) and ``mfusepy``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import sys
import time
import unicodedata
from pathlib import Path
from typing import Iterator


def fold(name: str) -> str:
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", name).casefold())


def unavailable() -> str | None:
    """Why no volume can be mounted here, or None."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    if shutil.which("fusermount3") is None:
        return "no fusermount3 (Debian's fuse3 package)"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as exc:
        return f"mfusepy with libfuse is not usable: {exc}"
    return None


@contextlib.contextmanager
def mounted(backing: Path, mountpoint: Path, timeout: float = 10.0) -> Iterator[Path]:
    backing.mkdir(parents=True, exist_ok=True)
    mountpoint.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, __file__, str(backing), str(mountpoint)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + timeout
        while not os.path.ismount(mountpoint):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"case-folding volume did not mount: {proc.stderr.read().decode()[-500:]}"
                                   if proc.poll() is not None else "case-folding volume did not mount in time")
            time.sleep(0.05)
        yield mountpoint
    finally:
        subprocess.run(["fusermount3", "-u", str(mountpoint)], capture_output=True)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()


def _serve(backing: str, mountpoint: str) -> None:
    import mfusepy

    class CaseFolding(mfusepy.Operations):
        use_ns = True

        def __init__(self, root: str) -> None:
            self.root = root

        def _real(self, path: str) -> str:
            """The backing path: each name the entry it folds to, or itself when there is none."""
            real = self.root
            for name in path.strip("/").split("/"):
                if not name:
                    continue
                candidate = os.path.join(real, name)
                if not os.path.lexists(candidate) and os.path.isdir(real):
                    key = fold(name)
                    candidate = next((os.path.join(real, n) for n in os.listdir(real) if fold(n) == key), candidate)
                real = candidate
            return real

        def _call(self, fn, *args):
            try:
                return fn(*args)
            except OSError as exc:
                raise mfusepy.FuseOSError(exc.errno or errno.EIO) from None

        def getattr(self, path, fh=None):
            st = self._call(os.fstat, fh) if path is None else self._call(os.lstat, self._real(path))
            return {k: getattr(st, k) for k in ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_ino",
                                                "st_atime", "st_mtime", "st_ctime")}

        def readdir(self, path, fh):
            return [".", "..", *self._call(os.listdir, self._real(path))]

        def readlink(self, path):
            return self._call(os.readlink, self._real(path))

        def access(self, path, amode):
            if not os.access(self._real(path), amode):
                raise mfusepy.FuseOSError(errno.EACCES)
            return 0

        def chmod(self, path, mode):
            return self._call(os.chmod, self._real(path), mode)

        def chown(self, path, uid, gid):
            return self._call(os.chown, self._real(path), uid, gid)

        def utimens(self, path, times=None):
            real = self._real(path)
            return self._call(lambda: os.utime(real) if times is None else os.utime(real, ns=times))

        def mkdir(self, path, mode):
            return self._call(os.mkdir, self._real(path), mode)

        def rmdir(self, path):
            return self._call(os.rmdir, self._real(path))

        def unlink(self, path):
            return self._call(os.unlink, self._real(path))

        def symlink(self, target, source):
            return self._call(os.symlink, source, self._real(target))

        def rename(self, old, new):
            return self._call(os.rename, self._real(old), self._real(new))

        def statfs(self, path):
            st = os.statvfs(self._real(path))
            return {k: getattr(st, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree",
                                                "f_files", "f_flag", "f_frsize", "f_namemax")}

        def open(self, path, flags):
            return self._call(os.open, self._real(path), flags)

        def create(self, path, mode, fi=None):
            return self._call(os.open, self._real(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)

        def read(self, path, size, offset, fh):
            return self._call(os.pread, fh, size, offset)

        def write(self, path, data, offset, fh):
            return self._call(os.pwrite, fh, data, offset)

        def truncate(self, path, length, fh=None):
            return self._call(os.truncate, fh if path is None else self._real(path), length)

        def flush(self, path, fh):
            return 0

        def release(self, path, fh):
            return self._call(os.close, fh)

        def fsync(self, path, datasync, fh):
            return self._call(os.fsync, fh)

        def fsyncdir(self, path, datasync, fh):
            return 0

    mfusepy.FUSE(CaseFolding(os.path.realpath(backing)), mountpoint, foreground=True, nothreads=True)


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2])
