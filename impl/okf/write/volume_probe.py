"""Ask the bundle's volume how it compares names, by making a file in the store's private folder
and looking it up under another spelling (``path_aliases`` applies the answer).

Runs under the writer lock, in ``.okf/`` (which readers never capture), on every commit: a bundle
can move between volumes, and the probe costs a few metadata calls beside a commit's syncs. The
probe files are removed before it returns; one a crash left is removed by the next probe.
"""

from __future__ import annotations

import os

from knowspec.impl.okf.write.path_aliases import Aliasing

# (name made, the same name as a folding volume would also find it)
CASE_PROBE = ("case-probe-a", "CASE-PROBE-A")
NORMALIZATION_PROBE = ("normalization-probe-\u00e9", "normalization-probe-e\u0301")  # composed, decomposed
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _same_file(okf_fd: int, made: str, other: str) -> bool:
    """Whether ``other`` finds the file just made as ``made``: the volume answers for a name no
    entry of the folder carries (inode numbers are not compared: a FUSE volume may number each
    name apart)."""
    try:
        os.unlink(made, dir_fd=okf_fd)  # a crashed probe's
    except FileNotFoundError:
        pass
    os.close(os.open(made, _CREATE, 0o600, dir_fd=okf_fd))
    try:
        try:
            os.stat(other, dir_fd=okf_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return other not in os.listdir(okf_fd)
    finally:
        os.unlink(made, dir_fd=okf_fd)


def probe_aliasing(okf_fd: int) -> Aliasing:
    """The volume's aliasing, found in the private folder ``okf_fd``."""
    return Aliasing(case=_same_file(okf_fd, *CASE_PROBE), normalization=_same_file(okf_fd, *NORMALIZATION_PROBE))
