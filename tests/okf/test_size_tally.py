"""The read limits' tally of a capture, moved by a write's change instead of recounted
(``limits.SizeTally``, kept by ``CapturedFiles``): the same verdict and message as a full pass."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from knowspec.impl.okf.bundle.captured_files import CapturedFiles, FileRecord, size_tally_of, sizes_or_none
from knowspec.impl.okf.bundle.limits import (MAX_DEPTH, MAX_FILE_BYTES, BundleLimits, SizeTally,
                                             unreadable_because)

DEEP = "/".join(["d"] * MAX_DEPTH) + "/x.md"  # one segment too many
PATHS = st.sampled_from(["index.md", "a.md", "b/c.md", "b/d.md", "e.md", DEEP])
SIZES = st.sampled_from([0, 10, 700, MAX_FILE_BYTES, MAX_FILE_BYTES + 1])
FILES = st.dictionaries(PATHS, SIZES, max_size=6)
LIMITS = st.builds(BundleLimits, files=st.integers(0, 7), total_bytes=st.sampled_from([0, 800, 1 << 30]),
                   concepts=st.just(10_000))


def _result(sizes: dict[str, int], writes: dict[str, int], deletes: list[str]) -> dict[str, int]:
    out = {path: size for path, size in sizes.items() if path not in deletes}
    out.update(writes)
    return out


@settings(max_examples=300)
@given(FILES, FILES, st.lists(PATHS, max_size=3), LIMITS)
def test_a_moved_tally_gives_the_full_passes_verdict_and_message(sizes, writes, deletes, limits):
    after = SizeTally.of(sizes).after(sizes.get, writes, deletes)
    result = _result(sizes, writes, deletes)
    assert after == SizeTally.of(result)
    assert after.unreadable_because(limits, lambda: result) == unreadable_because(result, limits)


def _captured(sizes: dict[str, int]) -> CapturedFiles:
    return CapturedFiles({path: FileRecord("/nowhere", path, size, 0, b"") for path, size in sizes.items()})


@given(FILES, FILES)
def test_captured_files_carry_their_tally_to_the_replaced_ones(sizes, changes):
    files = _captured(sizes)
    files.size_tally()
    replaced = files.replaced({p: FileRecord("/nowhere", p, size, 0, b"") for p, size in changes.items()
                               if p in sizes})
    assert replaced.size_tally() == SizeTally.of({p: replaced.size(p) for p in replaced})


def test_a_plain_mapping_is_tallied_by_its_bytes_and_sized_without_reads():
    files = {"a.md": b"abc", "b.md": b""}
    assert size_tally_of(files) == SizeTally(2, 3, frozenset())
    size = sizes_or_none(_captured({"a.md": 5}))
    assert (size("a.md"), size("zz.md")) == (5, None)
