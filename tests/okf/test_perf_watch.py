"""Event-driven revalidation: a cached snapshot is reused only while inotify saw no change.

Every test checks the answer against the full ``lstat`` walk (the oracle) and, where it matters,
that the cheap path was the one taken (``Stats.incremental`` / ``Stats.full_walks``).
"""

from __future__ import annotations

import os
import shutil
import struct

import pytest

from knowspec.impl import runtime as process
from knowspec.impl.errors import ToolError
from knowspec.impl.okf.bundle import snapshot as snap
from knowspec.impl.okf.bundle import watch
from knowspec.impl.okf.model import load_snapshot
from knowspec.impl.okf.bundle.paths import pin_root
from knowspec.impl.okf.layered_map import LayeredMap
from okf_helpers import ctx, write_bundle

pytestmark = pytest.mark.skipif(not watch.available(), reason="inotify is Linux only")


def _concept(title: str) -> str:
    return f"---\ntype: Note\ntitle: {title}\n---\nbody of {title}\n"


def oracle_files(root) -> dict[str, bytes]:
    """A from-scratch stat walk with no cache and no watch."""
    fd, st = pin_root(str(root))
    try:
        walk = snap._Walk(None, None, str(root), root_dev=st.st_dev)
        snap._capture_dir(walk, fd, "", 0, (st.st_dev, st.st_ino))
    finally:
        os.close(fd)
    return {rel: e.record.read() for rel, e in walk.entries.items()}


def load(root):
    return load_snapshot(str(root), ctx())


def assert_current(root) -> None:
    assert load(root).files == oracle_files(root)


@pytest.fixture
def kb(tmp_path):
    return write_bundle(tmp_path / "kb", {"a.md": _concept("A"), "b.md": _concept("B"), "sub/c.md": _concept("C")})


def _counts():
    return snap.Stats.full_walks, snap.Stats.incremental


def test_unchanged_tree_answers_from_cache_without_walking(kb):
    first = load(kb)
    walks, incremental = _counts()
    assert load(kb) is first
    assert _counts() == (walks, incremental)


def test_edit_is_seen_and_only_that_entry_is_rechecked(kb):
    first = load(kb)
    (kb / "sub" / "c.md").write_text(_concept("C edited"))
    walks, _ = _counts()
    second = load(kb)
    assert second.concepts["sub/c"].title == "C edited"
    assert second.concepts["a"] is first.concepts["a"]
    assert snap.Stats.full_walks == walks
    assert_current(kb)


def test_an_edit_layers_the_rewritten_entry_on_the_cached_entries_instead_of_copying_them(kb):
    load(kb)
    slot = snap._slots(process.current()).peek(str(kb))
    before = slot.entries
    (kb / "a.md").write_text(_concept("A edited"))
    load(kb)
    assert isinstance(slot.entries, LayeredMap) and not slot.entries.flattened
    assert slot.entries["b.md"] is before["b.md"] and slot.entries["a.md"] is not before["a.md"]
    assert list(slot.entries) == list(before)
    assert_current(kb)


def test_same_size_same_mtime_rewrite_is_seen(kb):
    load(kb)
    st = os.stat(kb / "a.md")
    (kb / "a.md").write_text(_concept("Z"))
    os.utime(kb / "a.md", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert load(kb).concepts["a"].title == "Z"


def test_create_and_delete_files_are_seen(kb):
    load(kb)
    (kb / "d.md").write_text(_concept("D"))
    assert "d" in load(kb).concepts
    (kb / "a.md").unlink()
    assert "a" not in load(kb).concepts
    assert_current(kb)


def test_rename_file_is_seen(kb):
    load(kb)
    os.rename(kb / "a.md", kb / "sub" / "moved.md")
    concepts = load(kb).concepts
    assert "a" not in concepts and "sub/moved" in concepts
    assert_current(kb)


def test_new_directory_with_files_is_captured_and_watched(kb):
    load(kb)
    (kb / "new" / "deep").mkdir(parents=True)
    (kb / "new" / "deep" / "x.md").write_text(_concept("X"))
    assert "new/deep/x" in load(kb).concepts
    (kb / "new" / "deep" / "x.md").write_text(_concept("X2"))
    assert load(kb).concepts["new/deep/x"].title == "X2"
    assert_current(kb)


def test_deleted_directory_drops_its_files(kb):
    load(kb)
    shutil.rmtree(kb / "sub")
    assert "sub/c" not in load(kb).concepts
    assert_current(kb)


def test_directory_deleted_and_recreated_between_calls_is_recaptured(kb):
    """The new directory may reuse the old inode; it has lost its watch all the same."""
    (kb / "empty").mkdir()
    load(kb)
    (kb / "empty").rmdir()
    (kb / "empty").mkdir()
    (kb / "empty" / "x.md").write_text(_concept("X"))
    assert "empty/x" in load(kb).concepts
    (kb / "empty" / "x.md").write_text(_concept("X2"))
    assert load(kb).concepts["empty/x"].title == "X2"
    assert_current(kb)


def test_renamed_directory_moves_its_files_and_stays_watched(kb):
    load(kb)
    os.rename(kb / "sub", kb / "other")
    concepts = load(kb).concepts
    assert "sub/c" not in concepts and "other/c" in concepts
    (kb / "other" / "c.md").write_text(_concept("C3"))
    assert load(kb).concepts["other/c"].title == "C3"
    assert_current(kb)


def test_directory_replaced_by_file_and_back(kb):
    load(kb)
    shutil.rmtree(kb / "sub")
    (kb / "sub").write_text("plain asset")
    assert load(kb).files["sub"] == b"plain asset"
    (kb / "sub").unlink()
    (kb / "sub").mkdir()
    (kb / "sub" / "c.md").write_text(_concept("C4"))
    assert load(kb).concepts["sub/c"].title == "C4"
    assert_current(kb)


def test_symlink_created_in_place_of_a_file_is_not_captured(kb):
    load(kb)
    (kb / "a.md").unlink()
    os.symlink(kb / "b.md", kb / "a.md")
    assert "a" not in load(kb).concepts
    assert_current(kb)


def test_write_racing_the_capture_is_seen_next_call(kb, monkeypatch):
    real_read = snap._read_file
    raced = []

    def read_then_race(dir_fd, name, st):
        data = real_read(dir_fd, name, st)
        if name == "b.md" and not raced:
            raced.append(True)
            (kb / "a.md").write_text(_concept("A raced"))  # a.md was already read
        return data

    monkeypatch.setattr(snap, "_read_file", read_then_race)
    first = load(kb)
    assert first.concepts["a"].title == "A"
    assert raced
    assert load(kb).concepts["a"].title == "A raced"
    assert_current(kb)


def test_crash_evidence_created_later_fails_like_the_walk(kb):
    load(kb)
    (kb / "sub" / ".okf-index-txn-1").write_text("x")
    with pytest.raises(ToolError) as err:
        load(kb)
    assert "interrupted transaction" in err.value.message
    (kb / "sub" / ".okf-index-txn-1").unlink()
    assert_current(kb)


def test_root_okf_changes_never_change_the_snapshot(kb):
    (kb / ".okf").mkdir()
    first = load(kb)
    (kb / ".okf" / "state").write_text("x")
    (kb / ".okf" / "state2").write_text("y")
    assert load(kb) is first


def test_replaced_root_is_reloaded(kb, tmp_path):
    load(kb)
    os.rename(kb, tmp_path / "old")
    write_bundle(kb, {"z.md": _concept("Z")})
    walks, _ = _counts()
    assert sorted(load(kb).concepts) == ["z"]
    assert snap.Stats.full_walks == walks + 1


def test_hard_linked_file_written_from_outside_is_seen(kb, tmp_path):
    outside = tmp_path / "outside.md"
    outside.write_text(_concept("L"))
    os.link(outside, kb / "linked.md")
    load(kb)
    with open(outside, "r+") as fh:  # same inode, written through a path the watch cannot see
        fh.write(_concept("M"))
    assert load(kb).concepts["linked"].title == "M"


def test_queue_overflow_falls_back_to_the_full_walk(kb, monkeypatch):
    load(kb)
    (kb / "a.md").write_text(_concept("A overflow"))
    monkeypatch.setattr(watch.DirectoryWatch, "drain", lambda self: watch.Changes(full=True))
    walks, _ = _counts()
    assert load(kb).concepts["a"].title == "A overflow"
    assert snap.Stats.full_walks == walks + 1


def test_overflow_event_is_classified_as_full_rescan():
    w = watch.DirectoryWatch()
    try:
        changes = watch.Changes()
        w._classify(struct.pack("iIII", -1, watch.IN_Q_OVERFLOW, 0, 0), changes)
        assert changes.full
    finally:
        w.close()


def test_moved_away_root_watch_is_a_full_rescan(tmp_path):
    w = watch.DirectoryWatch()
    try:
        fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
        w.add(fd, "")
        os.close(fd)
        os.rename(tmp_path, str(tmp_path) + "-moved")
        assert w.drain().full
    finally:
        w.close()
        os.rename(str(tmp_path) + "-moved", tmp_path)


def test_without_inotify_the_stat_walk_still_sees_changes(kb, monkeypatch):
    monkeypatch.setattr(watch, "ENABLED", False)
    snap.clear_cache()
    load(kb)
    (kb / "a.md").write_text(_concept("A walk"))
    walks, _ = _counts()
    assert load(kb).concepts["a"].title == "A walk"
    assert snap.Stats.full_walks == walks + 1


def test_lowered_limit_is_enforced_on_a_cached_tree(kb, monkeypatch):
    load(kb)
    monkeypatch.setattr(snap, "MAX_FILES", 2)
    with pytest.raises(ToolError) as err:
        load(kb)
    assert err.value.code == "resource_limit"


def test_limit_crossed_by_an_event_fails_like_the_walk(kb, monkeypatch):
    monkeypatch.setattr(snap, "MAX_FILES", 3)
    load(kb)
    (kb / "d.md").write_text(_concept("D"))
    with pytest.raises(ToolError) as err:
        load(kb)
    assert err.value.code == "resource_limit"
    (kb / "d.md").unlink()
    assert_current(kb)


def test_unchanged_hard_linked_file_keeps_the_cached_snapshot(kb, tmp_path):
    os.link(kb / "a.md", tmp_path / "elsewhere.md")
    first = load(kb)
    walks, incremental = _counts()
    assert load(kb) is first
    assert _counts() == (walks, incremental)


def test_event_updates_keep_the_walks_file_order_whether_files_are_rewritten_or_added(kb):
    """A rewrite keeps every file where it was (the key sets are known equal, never compared);
    a new file takes its place in walk order, as the full walk would put it."""
    load(kb)
    (kb / "b.md").write_text(_concept("B edited"))
    walks, incremental = _counts()
    assert list(load(kb).files) == list(oracle_files(kb))
    assert _counts() == (walks, incremental + 1)
    (kb / "aa.md").write_text(_concept("AA"))
    (kb / "sub" / "c.md").write_text(_concept("C edited"))
    assert list(load(kb).files) == list(oracle_files(kb))
    assert snap.Stats.full_walks == walks
