"""Property: on any sequence of edits, the watch-maintained snapshot equals a fresh stat walk."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from knowspec.impl import runtime as process
from knowspec.impl.errors import ToolError
from knowspec.impl.okf.bundle import snapshot as snap
from knowspec.impl.okf.bundle import watch
from knowspec.impl.okf import layered_map
from knowspec.impl.okf.layered_map import LayeredMap
from knowspec.impl.okf.model import Snapshot, document_for, load_snapshot
from okf_helpers import ctx
from test_perf_watch import oracle_files

pytestmark = pytest.mark.skipif(not watch.available(), reason="inotify is Linux only")

DIRS = ["", "d1/", "d2/", "d1/e/"]
NAMES = ["a.md", "b.md", "c.txt", "d1", "e"]

paths = st.tuples(st.sampled_from(DIRS), st.sampled_from(NAMES)).map(lambda t: t[0] + t[1])
ops = st.one_of(
    st.tuples(st.just("write"), paths, st.binary(max_size=24)),
    st.tuples(st.just("append"), paths, st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("remove"), paths, st.none()),
    st.tuples(st.just("mkdir"), paths, st.none()),
    st.tuples(st.just("rename"), paths, paths),
    st.tuples(st.just("symlink"), paths, paths),
    st.tuples(st.just("load"), st.none(), st.none()),
)


def _apply(root: Path, op: str, a, b) -> None:
    try:
        if op in ("write", "append"):
            (root / a).parent.mkdir(parents=True, exist_ok=True)
            with open(root / a, "ab" if op == "append" else "wb") as fh:
                fh.write(b"---\ntype: N\n---\n" + b if op == "write" else b)
        elif op == "remove":
            target = root / a
            shutil.rmtree(target) if target.is_dir() and not target.is_symlink() else target.unlink()
        elif op == "mkdir":
            (root / a).mkdir(parents=True)
        elif op == "rename":
            os.rename(root / a, root / b)
        elif op == "symlink":
            os.symlink(root / b, root / a)
    except OSError:
        pass  # impossible edits (missing parent, non-empty target …) are simply skipped


def _outcome(load):
    try:
        return load()
    except ToolError as exc:
        return (exc.code, exc.message)


def _watched_tree(tmp: Path) -> Path:
    """A small bundle, loaded once so that its snapshot is cached and watched."""
    root = tmp / "kb"
    (root / "d1").mkdir(parents=True)
    (root / "a.md").write_bytes(b"---\ntype: N\n---\nstart\n")
    load_snapshot(str(root), ctx())
    return root


def _agree_with_stat_walks(edits, after_load=lambda root: None) -> None:
    """Make ``edits`` on a watched tree; at every load the watched snapshot's files (or its
    refusal) equal a fresh stat walk's, then ``after_load(root)`` checks more."""
    with tempfile.TemporaryDirectory() as tmp:
        root = _watched_tree(Path(tmp))
        for op, a, b in edits + [("load", None, None)]:
            if op != "load":
                _apply(root, op, a, b)
                continue
            got = _outcome(lambda: load_snapshot(str(root), ctx()).files)
            want = _outcome(lambda: oracle_files(root))
            assert got == want
            after_load(root)
        snap.clear_cache()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, max_size=14))
def test_watch_and_stat_walk_agree_on_random_edits(edits):
    _agree_with_stat_walks(edits)


def _views(snapshot: Snapshot) -> tuple:
    return (list(snapshot.files.items()), [(p, type(d).__name__, d.path) for p, d in snapshot.documents.items()],
            [(i, c.path) for i, c in snapshot.concepts.items()], list(snapshot.indexes), list(snapshot.logs),
            [(e.file, e.code, e.message) for e in snapshot.parse_errors], snapshot.scanned_files)


def _skipped_links(root: Path) -> set[str]:
    found = set()
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            if path.is_symlink():
                found.add(path.relative_to(root).as_posix())
    return found


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, max_size=14))
def test_a_snapshot_updated_in_place_equals_one_built_afresh_and_knows_its_symlinks(edits):
    """Edits that keep the file set update the cached snapshot without rebuilding it
    (``Snapshot.replaced``); every view of it is what a fresh build gives, and the symbolic
    links the capture skipped (a writer's store refuses them) are the tree's."""
    with tempfile.TemporaryDirectory() as tmp:
        root = _watched_tree(Path(tmp))
        for op, a, b in edits + [("load", None, None)]:
            if op != "load":
                _apply(root, op, a, b)
                continue
            fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
            try:
                found = snap.capture_pinned(str(root), fd, ctx())
            except ToolError:
                continue
            finally:
                os.close(fd)
            assert found is not None
            got, links = found
            fresh = Snapshot(got.root, got.files, {p: document_for(p, d) for p, d in got.files.items() if p.endswith(".md")})
            assert _views(got) == _views(fresh)
            assert links == _skipped_links(root)
        snap.clear_cache()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, max_size=14))
def test_the_watched_total_bytes_limit_agrees_with_a_stat_walk(edits):
    """The bytes a watched snapshot holds are carried from capture to capture, moved by the
    files re-read: a bundle growing past (or shrinking under) a low byte limit is refused (or
    served) exactly when a fresh walk says so, and the kept count is the files' sum."""
    def kept_count_is_the_sum(root: Path) -> None:
        slot = snap._slots(process.current()).peek(str(root))
        if slot is not None and slot.snapshot is not None:
            assert slot.nbytes == sum(e.record.size for e in slot.entries.values())

    with process.activated(process.Runtime(process.RuntimeSettings(max_bundle_bytes=90))):
        _agree_with_stat_walks(edits, kept_count_is_the_sum)


def test_a_long_run_of_one_file_edits_layers_then_flattens_and_stays_a_fresh_build():
    """Each edit of a run is layered on the last snapshot's maps (no iteration in between), the
    changes flattened at once when they pass their share of the bundle; lookups all along and
    every view at the end are what a fresh build gives."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "kb"
        root.mkdir()
        for i in range(120):
            (root / f"c{i:03d}.md").write_text(f"---\ntype: Note\ntitle: T{i}\n---\nbody {i}\n")
        load_snapshot(str(root), ctx())
        for i in range(90):
            (root / f"c{i:03d}.md").write_text(f"---\ntype: Note\ntitle: E{i}\n---\nedited {i}\n")
            got = load_snapshot(str(root), ctx())
            assert got.concepts[f"c{i:03d}"].title == f"E{i}" and got.concepts[f"c{i + 1:03d}"].title == f"T{i + 1}"
            assert got.documents[f"c{i:03d}.md"] is got.concepts[f"c{i:03d}"]
            if i == 10:
                assert isinstance(got.documents, LayeredMap) and not got.documents.flattened
            if i == layered_map.MIN_CHANGES:  # the 65th change of the run: past the floor
                assert got.documents.flattened
        fresh = Snapshot(got.root, got.files, {p: document_for(p, d) for p, d in got.files.items() if p.endswith(".md")})
        assert _views(got) == _views(fresh)
        snap.clear_cache()
