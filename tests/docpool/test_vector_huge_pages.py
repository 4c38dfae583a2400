"""The ONNX Runtime sessions' big buffers are collapsed into huge pages (``vectors/huge_pages``).

The rules that pick what to collapse are pure and tested on maps texts; the effect is tested on
this host when its transparent huge pages are ``madvise`` (with ``always`` every buffer gets them
anyway, so the check could not fail there) and the kernel collapses on request.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from knowspec.impl import runtime as process
from knowspec.impl.docpool.vectors import huge_pages, int8_scan
from knowspec.impl.docpool.vectors.huge_pages import HUGE_PAGE, anonymous_mappings, huge_page_spans

MAPS = """\
55d25a458000-55d25f2ea000 rw-p 00000000 00:00 0                          [heap]
7fafa110b000-7fafa368c000 rw-p 00000000 00:00 0 
7fafa3700000-7fafa5300000 rw-p 00000000 00:00 0
7fafa5300000-7fafa5400000 rw-s 00000000 00:01 4711                       /dev/zero (deleted)
7fafa5400000-7fafa5600000 rw-p 00010000 08:01 1234                       /usr/lib/libfoo.so
7fafa5600000-7fafa5800000 r--p 00000000 00:00 0
7ffd0e5f3000-7ffd0e614000 rw-p 00000000 00:00 0                          [stack]
"""


def test_only_private_writable_anonymous_mappings_and_the_heap_are_candidates():
    assert anonymous_mappings(MAPS) == {
        0x55d25a458000: 0x55d25f2ea000,
        0x7fafa110b000: 0x7fafa368c000,
        0x7fafa3700000: 0x7fafa5300000,
    }


def test_spans_cover_the_whole_huge_pages_of_new_and_grown_mappings_only():
    before = {0x1000: 0x600000, 0x800000: 0xA00000, 0x10000000: 0x10400000}
    after = {0x1000: 0x600000,            # unchanged: left alone
             0x800000: 0xE00000,          # grew: the whole mapping again
             0x10000000: 0x10400000,
             0x20001000: 0x20500000,      # new: its whole pages inside, 2 MiB aligned
             0x30001000: 0x30200000}      # new, but holds no whole huge page
    assert huge_page_spans(before, after) == [(0x800000, 0x600000), (0x20200000, 0x200000)]


@given(st.dictionaries(st.integers(0, 2**36), st.integers(1, 2**28), max_size=6))
def test_every_span_is_whole_huge_pages_inside_its_mapping(starts):
    after = {start: start + length for start, length in starts.items()}
    mappings = sorted(after.items())
    for low, length in huge_page_spans({}, after):
        assert low % HUGE_PAGE == 0 and length % HUGE_PAGE == 0 and length > 0
        assert any(start <= low and low + length <= end for start, end in mappings)


def test_a_c_library_without_madvise_collapses_nothing_and_the_block_still_runs(monkeypatch):
    monkeypatch.setattr(huge_pages, "host_allows", lambda: True)

    def no_library(*args, **kwargs):
        raise OSError("no C library here")

    monkeypatch.setattr(huge_pages.ctypes, "CDLL", no_library)
    ran = []
    with process.activated(process.Runtime(process.RuntimeSettings(huge_pages=True))):
        with huge_pages.on_huge_pages():
            ran.append(bytearray(4 * HUGE_PAGE))
    assert ran and huge_pages._collapse([(0, HUGE_PAGE)]) == 0


def _thp_mode() -> str:
    try:
        text = huge_pages.THP_MODE.read_text()
    except OSError:
        return ""
    return text[text.find("[") + 1:text.find("]")] if "[" in text else ""


def _kernel_collapses_on_request() -> bool:
    """MADV_COLLAPSE works on a private anonymous mapping here (Linux 6.1+), tried on one of our own."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
    libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    size = 2 * HUGE_PAGE
    address = libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    if address in (None, ctypes.c_void_p(-1).value):
        return False
    try:
        ctypes.memset(address, 1, size)
        low = -(-address // HUGE_PAGE) * HUGE_PAGE
        return libc.madvise(low, HUGE_PAGE, huge_pages.MADV_COLLAPSE) == 0
    finally:
        libc.munmap(address, size)


PACKED_CODES_HUGE_KIB = """
import sys
import numpy as np
from knowspec.impl.server.native_memory import limit_arenas
from knowspec.impl.docpool.vectors import huge_pages, int8_scan

limit_arenas()  # malloc as `knowspec serve` sets it, before any thread
codes_bytes = int(sys.argv[1])
codes = np.random.default_rng(7).integers(-127, 128, size=(384, codes_bytes // 384), dtype=np.int8)
before = set(huge_pages.anonymous_mappings(huge_pages.MAPPINGS.read_text()))
scan = int8_scan.int8_kernel()(codes)
del codes  # numpy's own (already huge) array goes; the session keeps its packed copy
new = {start for start, end in huge_pages.anonymous_mappings(huge_pages.MAPPINGS.read_text()).items()
       if start not in before and end - start >= codes_bytes}
huge, inside = 0, False
for line in open("/proc/self/smaps"):
    fields = line.split()
    if fields and "-" in fields[0] and ":" not in fields[0]:
        inside = int(fields[0].split("-")[0], 16) in new
    elif inside and fields[0] == "AnonHugePages:":
        huge += int(fields[1])
assert scan(np.full((2, 384), int8_scan.QUERY_SHIFT, dtype=np.uint8)).shape == (2, codes_bytes // 384)
print(huge)
"""


def _packed_codes_huge_kib(on: bool, codes_bytes: int) -> int:
    """Huge pages (KiB) in the new mappings, as big as the codes, of a scan session packed in a
    fresh process whose malloc is set as the server's."""
    env = {**os.environ, "KNOWSPEC_HUGE_PAGES": "1" if on else "0"}
    done = subprocess.run([sys.executable, "-c", PACKED_CODES_HUGE_KIB, str(codes_bytes)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


@pytest.mark.skipif(int8_scan.int8_kernel() is None, reason="no onnxruntime int8 kernel")
def test_the_scan_sessions_packed_codes_sit_on_huge_pages_unless_turned_off():
    if not huge_pages.host_allows() or _thp_mode() != "madvise":
        pytest.skip("needs Linux with transparent huge pages in madvise mode (the check cannot fail otherwise)")
    if not _kernel_collapses_on_request():
        pytest.skip("this kernel does not collapse on request (MADV_COLLAPSE needs Linux 6.1)")
    codes_bytes = 384 * 40_000  # 14.6 MiB
    assert _packed_codes_huge_kib(True, codes_bytes) >= (codes_bytes - 2 * HUGE_PAGE) >> 10
    assert _packed_codes_huge_kib(False, codes_bytes) == 0
