"""The bundle limits a read applies: the contract's defaults, or the operator's raised ones.

spec/okf/contract/read.md §7 fixes 10,000 files, 10,000 concepts and 64 MiB of captured bytes;
they stay the defaults. An operator serving larger bundles raises them once, when the server
starts (``knowspec serve --max-bundle-files N --max-bundle-bytes N``, kept in the runtime's
settings); the concept cap follows the file cap, since every concept is a file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from knowspec.impl import runtime as process

DEFAULT_MAX_FILES = 10_000
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_CONCEPTS = 10_000
MAX_FILE_BYTES = 16 * 1024 * 1024  # one file
MAX_DEPTH = 64                     # path segments
MAX_PATH_BYTES = 4096              # one path, UTF-8


@dataclass(frozen=True)
class BundleLimits:
    files: int
    total_bytes: int
    concepts: int


def limits_for(runtime: process.Runtime, files: int = DEFAULT_MAX_FILES, total_bytes: int = DEFAULT_MAX_BYTES,
               concepts: int = DEFAULT_MAX_CONCEPTS) -> BundleLimits:
    """The runtime's limits; the given defaults where the operator raised nothing."""
    settings = runtime.settings
    raised_files = settings.max_bundle_files
    return BundleLimits(
        files=raised_files or files,
        total_bytes=settings.max_bundle_bytes or total_bytes,
        concepts=max(concepts, raised_files) if raised_files else concepts,
    )


def unreadable_because(sizes: Mapping[str, int], limits: BundleLimits) -> str | None:
    """Why the read tools would refuse a bundle of these files (bundle-relative path -> bytes),
    or None. Every write checks its result with it: a write that answered success while its
    result exceeded a limit left a bundle that every later call, reads and writes alike,
    refused, with no tool to undo it."""
    if len(sizes) > limits.files:
        return f"it would hold {len(sizes)} files, over the limit of {limits.files}"
    total = sum(sizes.values())
    if total > limits.total_bytes:
        return f"it would hold {total} bytes, over the limit of {limits.total_bytes}"
    for path, size in sizes.items():
        if size > MAX_FILE_BYTES:
            return f"a file would hold {size} bytes, over the limit of {MAX_FILE_BYTES}"
        if path.count("/") + 1 > MAX_DEPTH or len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
            return f"a path would be deeper than {MAX_DEPTH} segments or longer than {MAX_PATH_BYTES} bytes"
    return None
