"""The bundle limits a read applies: the contract's defaults, or the operator's raised ones.

spec/okf/contract/read.md §7 fixes 10,000 files, 10,000 concepts and 64 MiB of captured bytes;
they stay the defaults. An operator serving larger bundles raises them once, when the server
starts (``knowspec serve --max-bundle-files N --max-bundle-bytes N``, kept in the runtime's
settings); the concept cap follows the file cap, since every concept is a file.
"""

from __future__ import annotations

from dataclasses import dataclass
from knowspec.impl import runtime as process

DEFAULT_MAX_FILES = 10_000
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_CONCEPTS = 10_000


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

