"""``bundle_path`` rules (spec/okf/contract/read.md §5.2) and root pinning without following symlinks.

The root is opened component by component from ``/`` with ``O_NOFOLLOW | O_DIRECTORY``
relative to the parent's descriptor; each component is ``lstat``-ed first and its identity is
re-checked after opening. Every failure is ``invalid_request`` with the contract's message.
"""

from __future__ import annotations

import os
import stat
import sys

from knowspec.impl.errors import ToolError

MAX_BUNDLE_PATH_CHARS = 4096
REDACTED = "operation failed; sensitive path redacted"

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _invalid(message: str) -> ToolError:
    return ToolError("invalid_request", message)


def check_bundle_path(bundle_path: str) -> str:
    """Checks 1-5 of spec/okf/contract/read.md §5.2 in order; returns the path to pin."""
    if not isinstance(bundle_path, str) or bundle_path == "":
        raise _invalid("bundle_path is required")
    if len(bundle_path) > MAX_BUNDLE_PATH_CHARS:
        raise ToolError("resource_limit", "tool input exceeds the advertised schema limits")
    if "\x00" in bundle_path:  # no file system path holds a NUL; the OS would refuse it
        raise _invalid(REDACTED)
    if bundle_path != bundle_path.strip():
        raise _invalid("bundle_path must not contain surrounding whitespace")
    if not os.path.isabs(bundle_path):
        raise _invalid("bundle_path must be absolute")
    if _clean(bundle_path) != bundle_path:
        raise _invalid("bundle_path must be clean")
    if sys.platform == "darwin":
        for prefix in ("/etc", "/tmp", "/var"):
            if bundle_path == prefix or bundle_path.startswith(prefix + "/"):
                return "/private" + bundle_path
    return bundle_path


def _clean(path: str) -> str:
    """Go ``filepath.Clean`` for absolute Unix paths."""
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/" + "/".join(parts)


def pin_root(path: str) -> tuple[int, os.stat_result]:
    """Open the root directory without following any symlink; returns (fd, fstat of root)."""
    components = [c for c in path.split("/") if c]
    try:
        fd = os.open("/", DIR_FLAGS)
    except OSError:
        raise _invalid(REDACTED)
    try:
        for index, name in enumerate(components):
            last = index == len(components) - 1
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                raise _invalid(REDACTED)
            if stat.S_ISLNK(st.st_mode):
                raise _invalid(
                    "bundle_path must not be a symlink" if last else "bundle_path must not contain a symlink"
                )
            if not stat.S_ISDIR(st.st_mode):
                raise _invalid("bundle_path must be a directory")
            try:
                child = os.open(name, DIR_FLAGS, dir_fd=fd)
            except OSError:
                raise _invalid(REDACTED)
            os.close(fd)
            fd = child
            opened = os.fstat(fd)
            if (opened.st_ino, opened.st_dev) != (st.st_ino, st.st_dev):
                raise _invalid("bundle_path changed while opening")
        return fd, os.fstat(fd)
    except (OSError, ValueError):
        raise _invalid(REDACTED) from None
    except BaseException:
        os.close(fd)
        raise
