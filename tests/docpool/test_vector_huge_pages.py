"""What an ONNX Runtime session's creation newly maps is collapsed into huge pages (``vectors/huge_pages``).

The rules that pick what to collapse are pure and tested on maps texts; the kernel's part is
tested where transparent huge pages are ``madvise`` and the kernel collapses on request.
"""

from __future__ import annotations

import contextlib
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
from knowspec.impl.docpool.vectors.huge_pages import added_ranges, anonymous_mappings, huge_page_spans

MAPS = (b"55d25a458000-55d25f2ea000 rw-p 00000000 00:00 0                          [heap]\n"
        b"7fafa110b000-7fafa368c000 rw-p 00000000 00:00 0 \n"
        b"7fafa3700000-7fafa5300000 rw-p 00000000 00:00 0\n"
        b"7fafa5300000-7fafa5400000 rw-s 00000000 00:01 4711                       /dev/zero (deleted)\n"
        b"7fafa5400000-7fafa5600000 rw-p 00010000 08:01 1234                       /data/caf\xe9.bin\n"
        b"7fafa5600000-7fafa5800000 r--p 00000000 00:00 0\n"
        b"7ffd0e5f3000-7ffd0e614000 rw-p 00000000 00:00 0                          [stack]\n")
MIB = 1 << 20
HUGE = 2 * MIB


def test_only_private_writable_anonymous_mappings_and_the_heap_are_candidates():
    assert anonymous_mappings(MAPS) == {
        0x55d25a458000: 0x55d25f2ea000,
        0x7fafa110b000: 0x7fafa368c000,
        0x7fafa3700000: 0x7fafa5300000,
    }


def test_a_grown_or_merged_mapping_adds_only_its_new_addresses():
    before = {0: 6 * MIB, 8 * MIB: 10 * MIB, 64 * MIB: 70 * MIB}
    after = {0: 6 * MIB,                  # unchanged
             8 * MIB: 14 * MIB,           # grew: its tail alone
             32 * MIB: 40 * MIB,          # new
             62 * MIB: 72 * MIB}          # merged with a neighbour on both sides of an old one
    assert added_ranges(before, after) == [(10 * MIB, 14 * MIB), (32 * MIB, 40 * MIB),
                                           (62 * MIB, 64 * MIB), (70 * MIB, 72 * MIB)]


def test_spans_are_the_whole_huge_pages_of_ranges_holding_at_least_two():
    ranges = [(10 * MIB, 14 * MIB), (33 * MIB, 40 * MIB), (62 * MIB, 64 * MIB), (70 * MIB + 1, 75 * MIB)]
    assert huge_page_spans(ranges, HUGE) == [(10 * MIB, 4 * MIB), (34 * MIB, 6 * MIB)]


@st.composite
def disjoint_mappings(draw) -> dict[int, int]:
    """Non-overlapping mappings, as a maps file lists them."""
    cuts = sorted(set(draw(st.lists(st.integers(0, 2**30), max_size=12))))
    pairs = list(zip(cuts[::2], cuts[1::2]))
    return {start: end for start, end in pairs if end > start}


@given(disjoint_mappings(), disjoint_mappings())
def test_added_ranges_lie_in_new_mappings_and_outside_every_old_one(before, after):
    added = added_ranges(before, after)
    for start, end in added:
        assert start < end
        assert any(a <= start and end <= b for a, b in after.items())
        assert all(end <= a or b <= start for a, b in before.items())
    for low, length in huge_page_spans(added, HUGE):
        assert low % HUGE == 0 and length % HUGE == 0 and length >= 2 * HUGE
        assert any(start <= low and low + length <= end for start, end in added)


def test_no_c_library_or_unreadable_maps_leave_the_block_running(monkeypatch, tmp_path):
    monkeypatch.setattr(huge_pages, "host_allows", lambda: True)
    monkeypatch.setattr(huge_pages, "_libc", lambda: None)
    garbage = tmp_path / "maps"
    garbage.write_bytes(b"\xff\xfe not a maps line\n" + MAPS)
    ran = []
    with process.activated(process.Runtime(process.RuntimeSettings(huge_pages=True))):
        with huge_pages.on_huge_pages():
            ran.append(bytearray(4 * HUGE))
        monkeypatch.setattr(huge_pages, "MAPPINGS", garbage)
        with huge_pages.on_huge_pages():
            ran.append(bytearray(4 * HUGE))
    assert len(ran) == 2 and huge_pages.collapse([(0, HUGE)], HUGE) == 0


def _skip_unless_collapsing_host() -> None:
    """Skip unless this host collapses on request and gives no huge page unasked ("madvise":
    with "always" every buffer gets them anyway, so the checks could not fail)."""
    try:
        mode = huge_pages.THP_MODE.read_text()
    except OSError:
        mode = ""
    if not huge_pages.host_allows() or "[madvise]" not in mode:
        pytest.skip("needs Linux with transparent huge pages in madvise mode (the check cannot fail otherwise)")
    with _own_mapping(2 * HUGE) as address:
        ctypes.memset(address, 1, 2 * HUGE)
        if huge_pages.collapse([(_aligned(address), HUGE)], HUGE) != HUGE:
            pytest.skip("this kernel does not collapse on request (MADV_COLLAPSE needs Linux 6.1)")


def _aligned(address: int) -> int:
    return -(-address // HUGE) * HUGE


@contextlib.contextmanager
def _own_mapping(size: int):
    """A private anonymous mapping of ``size`` bytes, mapped here rather than by malloc."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
    libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    address = libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    assert address not in (None, ctypes.c_void_p(-1).value)
    try:
        yield address
    finally:
        libc.munmap(address, size)


def _mapping_kib(address: int, field: str) -> int:
    """``field`` (Rss, AnonHugePages) in KiB of the mapping holding ``address``, from smaps."""
    inside = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if fields and "-" in fields[0] and ":" not in fields[0]:
                start, end = (int(x, 16) for x in fields[0].split("-"))
                inside = start <= address < end
            elif inside and fields[0] == f"{field}:":
                return int(fields[1])
    raise AssertionError(f"no mapping holds {address:#x}")


def test_only_fully_resident_huge_pages_are_collapsed_so_the_resident_size_does_not_grow():
    _skip_unless_collapsing_host()
    with _own_mapping(5 * HUGE) as address:
        low = _aligned(address)
        ctypes.memset(low, 1, 2 * HUGE)                   # two huge pages, every base page touched
        for offset in range(2 * HUGE, 4 * HUGE, 64 * 1024):
            ctypes.memset(low + offset, 1, 1)              # two more with holes
        rss, huge = _mapping_kib(low, "Rss"), _mapping_kib(low, "AnonHugePages")
        assert huge_pages.collapse([(low, 4 * HUGE)], HUGE) == 2 * HUGE
        assert _mapping_kib(low, "AnonHugePages") - huge == (2 * HUGE) >> 10
        assert _mapping_kib(low, "Rss") == rss


PACKED_CODES_HUGE_KIB = """
import sys
import numpy as np
from knowspec.impl.server.native_memory import limit_arenas
from knowspec.impl.docpool.vectors import huge_pages, int8_scan

limit_arenas()  # malloc as `knowspec serve` sets it, before any thread
codes_bytes = int(sys.argv[1])
codes = np.random.default_rng(7).integers(-127, 128, size=(384, codes_bytes // 384), dtype=np.int8)
before = set(huge_pages.anonymous_mappings(huge_pages.MAPPINGS.read_bytes()))
scan = int8_scan.int8_kernel()(codes)
del codes  # numpy's own (already huge) array goes; the session keeps its packed copy
new = {start for start, end in huge_pages.anonymous_mappings(huge_pages.MAPPINGS.read_bytes()).items()
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


def test_the_scan_sessions_packed_codes_sit_on_huge_pages_unless_turned_off():
    _skip_unless_collapsing_host()
    if int8_scan.int8_kernel() is None:
        pytest.skip("no onnxruntime int8 kernel")
    codes_bytes = 384 * 40_000  # 14.6 MiB
    assert _packed_codes_huge_kib(True, codes_bytes) >= (codes_bytes - 2 * HUGE) >> 10
    assert _packed_codes_huge_kib(False, codes_bytes) == 0
