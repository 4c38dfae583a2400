"""The search index's folded bodies: kept compressed (in a temporary file or in memory), given
back byte for byte."""

from __future__ import annotations

import io
import os
import tempfile

import pytest
from hypothesis import given, settings, strategies as st

from knowspec.impl import nameless_files, runtime as process
from knowspec.impl.okf.search import folded_bodies as fb

from knowspec.impl.okf.search import concepts as sc
from knowspec.impl.okf.search import concepts_index as sci
from knowspec.impl.okf.search.folded_bodies import FoldedBodies
from knowspec.impl.rules.text import case_fold

BODIES = st.lists(st.binary(max_size=300) | st.text(alphabet="ab é\u00df-", max_size=300).map(str.encode), max_size=12)


ON_DISK = pytest.mark.parametrize("on_disk", [True, False], ids=["on_disk", "in_memory"])


@ON_DISK
@settings(max_examples=100, deadline=None)
@given(bodies=BODIES)
def test_every_body_comes_back_as_it_was_given(on_disk, bodies):
    stored = FoldedBodies.of(bodies, on_disk=on_disk)
    assert stored.on_disk == on_disk
    assert len(stored) == len(bodies)
    assert list(stored) == bodies
    assert [stored[row] for row in reversed(range(len(bodies)))] == bodies[::-1]


@ON_DISK
@settings(max_examples=100, deadline=None)
@given(bodies=BODIES, order=st.randoms())
def test_stored_rows_carried_into_a_new_store_come_back_unchanged(on_disk, bodies, order):
    first = FoldedBodies.of(bodies, on_disk=on_disk)
    rows = list(range(len(bodies)))
    order.shuffle(rows)
    carried = FoldedBodies([stored for _, stored in first.stored_rows(rows)], on_disk=on_disk)
    assert list(carried) == [bodies[row] for row in rows]
    assert [bytes(first.stored(row)) for row in rows] == [bytes(s) for _, s in first.stored_rows(rows)]


@ON_DISK
@settings(max_examples=100, deadline=None)
@given(bodies=BODIES, needle=st.binary(min_size=1, max_size=4), span=st.integers(1, 400), gap=st.integers(0, 400))
def test_holding_finds_exactly_the_bodies_that_contain_the_needle(on_disk, bodies, needle, span, gap):
    stored = FoldedBodies.of(bodies, on_disk=on_disk)
    rows = list(range(len(bodies)))
    odd = rows[1::2]
    saved = fb.SPAN_BYTES, fb.GAP_BYTES
    fb.SPAN_BYTES, fb.GAP_BYTES = span, gap  # reads of every size
    try:
        assert stored.holding(rows, needle) == [row for row, body in enumerate(bodies) if needle in body]
        assert stored.holding(odd, needle) == [row for row in odd if needle in bodies[row]]
    finally:
        fb.SPAN_BYTES, fb.GAP_BYTES = saved


def test_rows_near_each_other_are_read_in_one_call(monkeypatch):
    bodies = [f"body {i} of the bundle".encode() for i in range(200)]
    stored = FoldedBodies.of(bodies)
    reads = []
    real = os.pread
    monkeypatch.setattr(nameless_files.os, "pread", lambda fd, n, at: reads.append(n) or real(fd, n, at))
    assert list(stored) == bodies
    assert len(reads) == 1
    reads.clear()
    assert stored.holding([3, 50, 199], b"of") == [3, 50, 199]
    assert len(reads) == 1  # the bodies between them are small: read over, not around
    monkeypatch.setattr(fb, "GAP_BYTES", 0)
    reads.clear()
    assert stored.holding([3, 50, 199], b"of") == [3, 50, 199]
    assert len(reads) == 3
    monkeypatch.setattr(fb, "SPAN_BYTES", 100)
    reads.clear()
    assert list(stored) == bodies
    assert max(reads) <= 100 and len(reads) > 1  # no read takes more than a span (or one body)


def test_bodies_stay_in_memory_when_no_temporary_file_can_be_made(monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError("read-only temporary folder")

    monkeypatch.setattr(tempfile, "TemporaryFile", refuse)
    stored = FoldedBodies.of([b"alpha", b"beta"])
    assert not stored.on_disk
    assert list(stored) == [b"alpha", b"beta"] and stored.holding(range(2), b"et") == [1]


def test_bodies_stay_in_memory_when_the_temporary_file_cannot_be_written(full_temporary_folder):
    stored = FoldedBodies.of([b"alpha", b"beta"])
    assert not stored.on_disk and full_temporary_folder.closed
    assert list(stored) == [b"alpha", b"beta"]


def test_bodies_stay_in_memory_where_files_cannot_be_read_at_an_offset(monkeypatch):
    monkeypatch.delattr(nameless_files.os, "pread")  # Windows
    stored = FoldedBodies.of([b"alpha", b"beta"])
    assert not stored.on_disk and list(stored) == [b"alpha", b"beta"]


def test_the_file_is_closed_with_the_store(recwarn):
    import gc
    import warnings

    warnings.simplefilter("always", ResourceWarning)
    stored = FoldedBodies.of([b"alpha"])
    file = stored._file
    del stored
    gc.collect()
    assert file.closed
    assert not [w for w in recwarn if issubclass(w.category, ResourceWarning)]


def test_the_file_kept_for_reading_holds_no_write_buffer():
    stored = FoldedBodies.of([b"alpha" * 1000, b"beta"])
    assert isinstance(stored._file, io.FileIO)  # the raw file: its write buffer was let go
    assert [stored[0], stored[1]] == [b"alpha" * 1000, b"beta"]


def test_on_disk_only_the_offsets_count_as_memory():
    bodies = [b"x" * 1000 + bytes([i]) for i in range(64)]
    assert FoldedBodies.of(bodies).nbytes() == 65 * 8
    assert FoldedBodies.of(bodies, on_disk=False).nbytes() > 65 * 8


def test_the_search_bodies_setting_keeps_an_index_s_bodies_in_memory(monkeypatch):
    monkeypatch.setenv("KNOWSPEC_SEARCH_BODIES", "memory")
    entries = [("c0", sc.SearchableConcept.of("c0", "", "", [], "sql warehouse"))]
    with process.activated(process.Runtime()):
        assert process.current().settings.search_bodies == "memory"
        assert not sci.ConceptSearchIndex(entries).bodies.on_disk
    monkeypatch.delenv("KNOWSPEC_SEARCH_BODIES")
    with process.activated(process.Runtime()):
        assert sci.ConceptSearchIndex(entries).bodies.on_disk


def test_prose_bodies_are_kept_in_well_under_their_plain_bytes():
    words = "the delta table keeps a transaction log of every commit to its files".split()
    bodies = [" ".join(words[(i + k) % len(words)] for k in range(600)).encode() for i in range(50)]
    stored = FoldedBodies.of(bodies)
    assert stored.nbytes() < sum(map(len, bodies)) / 3


def test_threads_reading_one_file_at_once_each_get_their_own_bodies():
    """Reads carry their own offset (``os.pread``): no thread moves another's position."""
    from concurrent.futures import ThreadPoolExecutor

    bodies = [f"row {i} ".encode() * (i % 17 + 1) for i in range(400)]
    stored = FoldedBodies.of(bodies)
    rows = range(len(bodies))
    needles = [f"row {i} ".encode() for i in range(0, 400, 7)] * 4
    expected = [[row for row, body in enumerate(bodies) if needle in body] for needle in needles]
    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(lambda needle: stored.holding(rows, needle), needles)) == expected
