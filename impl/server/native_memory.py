"""Give freed native heap back to the system, so a long-running server's RSS stays bounded.

Measured with ``benchmarks/fuzz_calls.py`` (12,000 stdio calls): Python's own object count stays
flat, yet RSS grew 128 → 390 MiB. The growth is glibc malloc keeping freed memory: every worker
thread gets its own arena, and the big transient buffers of a hostile call (a 70,000-character
argument, a 12,000-item array, a large answer) leave holes that malloc keeps instead of returning.
Limiting arenas to two (``mallopt(M_ARENA_MAX)``) brought the run to 213 MiB; trimming now and
then (``malloc_trim(0)``) to 163 MiB; both together to 142 MiB. Python's GIL serialises
allocation anyway, so more arenas buy nothing here.

Setting the mmap threshold (``mallopt(M_MMAP_THRESHOLD)``) also turns off glibc's dynamic
threshold, which otherwise lets big transient buffers settle in the heap (see below).

Both calls exist only in glibc; elsewhere (musl, macOS, Windows) every function here is a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from dataclasses import dataclass, field
from typing import Callable

M_ARENA_MAX = -8  # glibc's mallopt parameter number
M_MMAP_THRESHOLD = -3
# Blocks this big or bigger get their own mapping, unmapped when freed. glibc's threshold is
# dynamic otherwise: freeing a mapped block raises it to that block's size (up to 32 MiB), and
# later big transient buffers (an answer's text, a JSON tree's encoding) are cut from the heap,
# whose holes then stay resident among live data. Fixed, databricks-okf's server ends the read
# tools at 182-186 MiB instead of 204-216 (its get_semantic_graph left 40-50 MiB behind, now 20;
# benchmarks/okf_cold_memory.py). Above the 1 MiB read buffers of the transports and file
# reads, which would otherwise be mapped and unmapped at every read.
MMAP_THRESHOLD_BYTES = 4 << 20
# Fixing the mmap threshold also fixes the heap's automatic trim at glibc's 128 KiB default: every
# call's few hundred KiB of transient arrays at the heap's top were then given back and faulted in
# again (warm search_concepts at 50k concepts, p50 6 -> 8-9 ms). Not above the mmap threshold
# either: at twice it, a get_semantic_graph on databricks-okf left glibc's worker arena 7.5 MB
# larger and 6 MiB more resident in one server of seven one hour and in six of six the next (in
# every one once fewer frontmatter strings were interned), the same bytes in use, and no
# ``malloc_trim`` gave them back; at this threshold (or 1 MiB) none of 39 servers did
# (benchmarks/README.md, session 35).
M_TRIM_THRESHOLD = -1
TRIM_THRESHOLD_BYTES = MMAP_THRESHOLD_BYTES
KEEP_MMAP_THRESHOLD_BYTES = 32 << 20  # glibc's largest on 64-bit systems
KEEP_TRIM_THRESHOLD_BYTES = 1 << 30
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
ARENAS = 2
TRIM_AFTER_BYTES = 8 * 1024 * 1024  # calls that moved this much input/output since the last trim
TRIM_AFTER_CALLS = 256  # or this many calls: small calls fragment too, a trim then is a few ms
# Or one call that worked this long (thread CPU seconds): a bundle load or an index build frees
# tens of MiB of transient parse data with a small answer (databricks-okf: 335 -> 283 MiB after
# the read tools, benchmarks/okf_cold_memory.py); a trim (1-30 ms) is noise beside such a call.
TRIM_AFTER_CPU_SECONDS = 0.25
# Or once the resident size grew this much since the last trim: a quick call can free a lot
# (databricks-okf: a first validate_bundle, 0.1 s of CPU, left 12-13 MiB behind untrimmed).
TRIM_AFTER_GROWTH_BYTES = 8 * 1024 * 1024
# Or once a transport wrote an answer this big: its encoded bytes and the result it was encoded
# from are freed only then, after the call's own trim (databricks-okf: validate_bundle's and
# get_semantic_graph's answers left 13 and 35 MiB of RSS behind, benchmarks/okf_cold_memory.py).
TRIM_AFTER_ANSWER_BYTES = 1 << 20


def _glibc():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None


_LIBC = _glibc()


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas and fix its mmap and trim thresholds (call once at server start,
    before worker threads); True if all applied."""
    return bool(_LIBC is not None and _LIBC.mallopt(M_ARENA_MAX, arenas)
                and _LIBC.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
                and _LIBC.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))


def keep_freed_memory() -> bool:
    """For a short-lived worker process: keep what is freed instead of handing it back, so each
    page is faulted in once (the search index's helper process spent a third of its time in
    the kernel, faulting in again what glibc had trimmed or unmapped); True if applied."""
    return bool(_LIBC is not None and _LIBC.mallopt(M_MMAP_THRESHOLD, KEEP_MMAP_THRESHOLD_BYTES)
                and _LIBC.mallopt(M_TRIM_THRESHOLD, KEEP_TRIM_THRESHOLD_BYTES))


def release_free_memory() -> bool:
    """Return free heap pages of every arena to the system; True if glibc released any."""
    return bool(_LIBC is not None and _LIBC.malloc_trim(0))


def trim_due(calls: int, moved_bytes: int, cpu_seconds: float = 0.0, grown_bytes: int = 0) -> bool:
    """The rule: trim once enough calls, or enough input/output bytes, passed since the last trim,
    or the resident size grew enough since then, or after one call that took enough CPU time."""
    return (calls >= TRIM_AFTER_CALLS or moved_bytes >= TRIM_AFTER_BYTES or cpu_seconds >= TRIM_AFTER_CPU_SECONDS
            or grown_bytes >= TRIM_AFTER_GROWTH_BYTES)


def resident_bytes() -> int:
    """This process's resident size (Linux ``/proc/self/statm``; 0 elsewhere: no growth seen)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE_BYTES
    except (OSError, ValueError, IndexError):
        return 0



@dataclass
class HeapTrimmer:
    """Counts finished calls and their size; trims (in the calling worker thread) when ``trim_due``."""

    release: Callable[[], bool] = release_free_memory
    resident: Callable[[], int] = resident_bytes
    calls: int = 0
    moved_bytes: int = 0
    resident_after_trim: int | None = None  # None: no trim yet, the first call sets the mark
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def after_call(self, moved_bytes: int, cpu_seconds: float = 0.0) -> bool:
        """Note one finished call that read and wrote ``moved_bytes`` and took ``cpu_seconds`` of
        its thread's CPU time; True if it trimmed."""
        now = self.resident()
        with self._lock:
            self.calls += 1
            self.moved_bytes += moved_bytes
            if self.resident_after_trim is None:
                self.resident_after_trim = now
            if not trim_due(self.calls, self.moved_bytes, cpu_seconds, now - self.resident_after_trim):
                return False
            self.calls = self.moved_bytes = 0
        self._trim()
        return True

    def _trim(self) -> None:
        self.release()
        self.resident_after_trim = self.resident()

    def after_answer(self, nbytes: int) -> bool:
        """Note that a transport wrote (and let go of) an encoded answer of ``nbytes``; True if it
        trimmed (at most once per big answer, in the calling thread: never the event loop)."""
        if nbytes < TRIM_AFTER_ANSWER_BYTES:
            return False
        with self._lock:
            self.calls = self.moved_bytes = 0
        self._trim()
        return True
