"""Move the memory an ONNX Runtime session's creation maps onto transparent huge pages (Linux).

A vector call reads the query model's weights, then the packed codes of the int8 chunk sketch
(~37 MiB per 100k chunks). On 4 KiB pages each pass also takes a TLB miss per page, and when the
two passes evict each other from the cache the page walks go to memory too. numpy asks for huge
pages for its big arrays; ONNX Runtime's allocator does not. So the address ranges that a
session's creation newly mapped are collapsed into huge pages once, right after
(``MADV_COLLAPSE``, Linux 6.1+: the page size changes, the contents do not). Only huge pages
whose every base page is already resident are collapsed, so the process's resident size does not
grow; memory the session cut from space mapped earlier keeps its pages. Figures:
benchmarks/README.md, "Session 47".

Best effort: nothing happens off Linux, when the host's transparent huge pages are ``never``,
where the kernel refuses (older kernels, ``prctl(PR_SET_THP_DISABLE)``), or with
``KNOWSPEC_HUGE_PAGES=0``; no failure here stops a session from loading.
"""

from __future__ import annotations

import bisect
import ctypes
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from knowspec.impl import runtime as process

MADV_COLLAPSE = 25
MIN_HUGE_PAGES = 2  # a smaller new range is a heap's small growth, not a session's buffer
MAPPINGS = Path("/proc/self/maps")
THP_MODE = Path("/sys/kernel/mm/transparent_hugepage/enabled")
THP_SIZE = Path("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size")
DEFAULT_HUGE_PAGE = 2 << 20
BASE_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

Mappings = dict[int, int]  # start -> end of the process's private anonymous writable mappings


def host_allows() -> bool:
    """Linux with transparent huge pages not set to ``never``."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return b"[never]" not in THP_MODE.read_bytes()
    except OSError:
        return False


def huge_page_size() -> int:
    """The kernel's transparent huge page size (2 MiB on x86-64)."""
    try:
        return int(THP_SIZE.read_bytes()) or DEFAULT_HUGE_PAGE
    except (OSError, ValueError):
        return DEFAULT_HUGE_PAGE


def anonymous_mappings(maps: bytes) -> Mappings:
    """The private, writable, anonymous mappings (the heap included) of a ``/proc/PID/maps``
    text, read as bytes: a mapped file's name need not be UTF-8."""
    found: Mappings = {}
    for line in maps.splitlines():
        fields = line.split()
        if len(fields) < 5 or fields[4] != b"0" or fields[1][:2] != b"rw" or fields[1][3:4] != b"p":
            continue
        if len(fields) > 5 and fields[5] != b"[heap]":
            continue
        start, end = (int(x, 16) for x in fields[0].split(b"-"))
        found[start] = end
    return found


def added_ranges(before: Mappings, after: Mappings) -> list[tuple[int, int]]:
    """``(start, end)`` of every address range mapped in ``after`` and in no mapping of
    ``before``: a grown mapping gives its new tail, never what it held already."""
    old = sorted(before.items())
    starts = [start for start, _ in old]
    added = []
    for start, end in sorted(after.items()):
        at = start
        for old_start, old_end in old[max(0, bisect.bisect_right(starts, start) - 1):]:
            if old_start >= end:
                break
            if old_end <= at:
                continue
            if old_start > at:
                added.append((at, old_start))
            at = max(at, old_end)
        if at < end:
            added.append((at, end))
    return added


def huge_page_spans(ranges: list[tuple[int, int]], huge: int,
                    min_pages: int = MIN_HUGE_PAGES) -> list[tuple[int, int]]:
    """``(start, length)`` of the whole huge pages inside each range holding at least ``min_pages``."""
    spans = []
    for start, end in ranges:
        low, high = -(-start // huge) * huge, end // huge * huge
        if high - low >= min_pages * huge:
            spans.append((low, high - low))
    return spans


def _libc() -> Any | None:
    """The C library's ``madvise`` and ``mincore``, typed; None where they cannot be had."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte))
    except (OSError, AttributeError):
        return None
    return libc


def _resident_huge_pages(libc: Any, start: int, length: int, huge: int) -> list[int]:
    """Starts of the huge pages in ``[start, start + length)`` whose every base page is resident."""
    pages = length // BASE_PAGE
    vector = (ctypes.c_ubyte * pages)()
    if libc.mincore(start, length, vector) != 0:
        return []
    per_huge = huge // BASE_PAGE
    present = bytes(vector)
    return [start + i * BASE_PAGE for i in range(0, pages, per_huge)
            if all(b & 1 for b in present[i:i + per_huge])]


def collapse(spans: list[tuple[int, int]], huge: int) -> int:
    """Collapse the fully resident huge pages of ``spans``; the bytes the kernel collapsed."""
    libc = _libc()
    if libc is None:
        return 0
    done = 0
    for start, length in spans:
        for page in _resident_huge_pages(libc, start, length, huge):
            if libc.madvise(page, huge, MADV_COLLAPSE) == 0:
                done += huge
    return done


def _mappings() -> Mappings | None:
    try:
        return anonymous_mappings(MAPPINGS.read_bytes())
    except (OSError, ValueError):
        return None


@contextmanager
def on_huge_pages() -> Iterator[None]:
    """Collapse into huge pages the address ranges the block newly mapped."""
    before = _mappings() if process.current().settings.huge_pages and host_allows() else None
    yield
    if before is None:
        return
    after = _mappings()
    if after is not None:
        huge = huge_page_size()
        collapse(huge_page_spans(added_ranges(before, after), huge), huge)
