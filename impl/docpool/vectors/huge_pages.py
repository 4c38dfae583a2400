"""Back the memory an ONNX Runtime session allocates with 2 MiB pages (Linux, best effort).

A vector call reads the query model's weights (its session allocates ~50 MiB), then the packed
codes of the int8 chunk sketch (~37 MiB per 100k chunks). On 4 KiB pages each pass also takes a
TLB miss per page, and when the two passes evict each other from the cache the page walks go to
memory too. numpy asks for huge pages for its big arrays; ONNX Runtime's allocator does not
(glibc would only with ``GLIBC_TUNABLES=glibc.malloc.hugetlb=1`` set before the process starts).
So the private anonymous mappings that a session's creation made or grew are collapsed into huge
pages once, right after (``MADV_COLLAPSE``, Linux 6.1+; it changes the page size, not the
contents, and leaves no lasting flag on the mapping). In the server, whose malloc gives every
block of 4 MiB or more a mapping of its own (``server/native_memory.py``), the packed codes always
land in a new mapping; smaller buffers cut from heap space freed earlier keep the pages they had.
Through the server, alternated with one without it (``knowspec bench docpool-vector-ab``), the
vector p50 was 1.3-1.8 ms lower in blocks of ten calls and 0.8 ms call by call, as much as the
glibc setting gives (benchmarks/README.md, "Session 47").

Nothing happens off Linux, when the host's transparent huge pages are ``never``, where the kernel
refuses (older kernels, ``prctl(PR_SET_THP_DISABLE)``), or with ``KNOWSPEC_HUGE_PAGES=0``.
"""

from __future__ import annotations

import ctypes
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from knowspec.impl import runtime as process

HUGE_PAGE = 2 << 20
MADV_COLLAPSE = 25
MAPPINGS = Path("/proc/self/maps")
THP_MODE = Path("/sys/kernel/mm/transparent_hugepage/enabled")

Mappings = dict[int, int]  # start -> end of the process's private anonymous writable mappings


def host_allows() -> bool:
    """Linux with transparent huge pages not set to ``never``."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return "[never]" not in THP_MODE.read_text()
    except OSError:
        return False


def anonymous_mappings(maps_text: str) -> Mappings:
    """The private, writable, anonymous mappings (the heap included) of a ``/proc/PID/maps`` text."""
    found: Mappings = {}
    for line in maps_text.splitlines():
        fields = line.split()
        if len(fields) < 5 or fields[4] != "0" or not fields[1].startswith("rw") or fields[1][3] != "p":
            continue
        if len(fields) > 5 and fields[5] != "[heap]":
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        found[start] = end
    return found


def huge_page_spans(before: Mappings, after: Mappings) -> list[tuple[int, int]]:
    """``(start, length)`` of the whole huge pages inside each mapping of ``after`` that is new
    or grew since ``before``."""
    spans = []
    for start, end in sorted(after.items()):
        if before.get(start) == end:
            continue
        low, high = -(-start // HUGE_PAGE) * HUGE_PAGE, end // HUGE_PAGE * HUGE_PAGE
        if high > low:
            spans.append((low, high - low))
    return spans


def _read_mappings() -> Mappings | None:
    try:
        return anonymous_mappings(MAPPINGS.read_text())
    except OSError:
        return None


def _collapse(spans: list[tuple[int, int]]) -> int:
    """Bytes the kernel collapsed; a span it refuses is left as it is, and a C library without
    ``madvise`` collapses nothing (never a reason for a session not to load)."""
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return 0
    madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    return sum(length for start, length in spans if madvise(start, length, MADV_COLLAPSE) == 0)


@contextmanager
def on_huge_pages() -> Iterator[None]:
    """Collapse into huge pages what the block allocated in new or grown anonymous mappings."""
    before = _read_mappings() if process.current().settings.huge_pages and host_allows() else None
    yield
    if before is not None:
        after = _read_mappings()
        if after is not None:
            _collapse(huge_page_spans(before, after))
