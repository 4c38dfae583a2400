"""The read side's half of the publication protocol (``readers.consistent_read``).

A reader that is capturing holds back the publisher's renames; a reader waits out a running
commit, honouring cancellation and the lease; a read finishes an interrupted commit first and
refuses one it cannot finish; a read of a bundle the store never wrote writes nothing.
"""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from knowspec.impl.context import CallContext
from knowspec.impl.errors import ToolError
from knowspec.impl.okf.tools import read as read_tools
from knowspec.impl.okf.bundle import snapshot
from knowspec.impl.okf.bundle.paths import pin_root
from knowspec.impl.okf.write import journal, lock
from knowspec.impl.okf.write.readers import consistent_read
from knowspec.impl.okf.write.store import Store
from test_write_store import _request
from write_helpers import make_bundle, tree_bytes, visible_bytes
from tool_args import tool_args


@pytest.fixture
def written(tmp_path):
    """A bundle the store has already committed to (so ``.okf`` exists)."""
    root = make_bundle(tmp_path / "s", {"a.md": "---\ntype: Note\n---\na\n", "d/b.md": "---\ntype: Note\n---\nb\n"})
    fd, _ = pin_root(str(root))
    store = Store(fd, lease_timeout=5)
    store.commit(_request(root, {"a.md": b"---\ntype: Note\n---\na1\n"}, key="k0"))
    yield root, store
    os.close(fd)


def _list(root) -> list[str]:
    args = tool_args("list_concepts", bundle_path=str(root))
    return [c["id"] for c in read_tools.list_concepts(args, CallContext()).structured["concepts"]]


def test_publisher_renames_only_after_a_capturing_reader_leaves(written):
    root, store = written
    before = visible_bytes(root)
    request = _request(root, {"a.md": b"---\ntype: Note\n---\na2\n", "d/b.md": b"---\ntype: Note\n---\nb2\n"}, key="k1")
    with consistent_read(store.root_fd):
        writer = threading.Thread(target=store.commit, args=(request,))
        writer.start()
        deadline = time.monotonic() + 5
        while not (root / ".okf" / "journal.json").exists() and time.monotonic() < deadline:
            time.sleep(0.005)
        assert (root / ".okf" / "journal.json").exists(), "the commit must reach its durable boundary"
        time.sleep(0.1)
        assert visible_bytes(root) == before, "no rename while a reader captures"
    writer.join(5)
    assert visible_bytes(root)["d/b.md"] == b"---\ntype: Note\n---\nb2\n"


def test_reader_waits_out_a_running_commit_up_to_the_lease(written):
    root, store = written
    with lock.exclusive(store.root_fd):
        with pytest.raises(ToolError) as info:
            with consistent_read(store.root_fd, timeout=0.1):
                pass
    assert info.value.code == "operation_rejected" and info.value.retryable


def test_waiting_reader_stops_when_cancelled(written):
    root, store = written

    def cancelled() -> None:
        raise ToolError("operation_cancelled", "load bundle cancelled")

    with lock.exclusive(store.root_fd):
        with pytest.raises(ToolError) as info:
            with consistent_read(store.root_fd, cancelled, timeout=5):
                pass
    assert info.value.code == "operation_cancelled"


def test_read_of_a_bundle_never_written_writes_nothing(tmp_path):
    root = make_bundle(tmp_path / "r", {"index.md": '---\nokf_version: "0.2"\n---\n', "c/x.md": "---\ntype: Note\n---\nx\n"})
    before = tree_bytes(root), os.stat(root).st_mtime_ns, os.stat(root / "c").st_mtime_ns
    snapshot.clear_cache()
    assert _list(root) == ["c/x"]
    assert not (root / ".okf").exists()
    assert (tree_bytes(root), os.stat(root).st_mtime_ns, os.stat(root / "c").st_mtime_ns) == before


def test_read_tool_refuses_a_journal_it_cannot_finish(written):
    root, _ = written
    before = visible_bytes(root)
    manifest = {"format": 1, "txn": "dead", "deletes": [], "receipt": "{}",
                "writes": [{"path": "a.md", "payload": "payload-00000", "digest": "0" * 64}]}
    (root / ".okf" / "journal.json").write_text(json.dumps(manifest))
    snapshot.clear_cache()
    with pytest.raises(ToolError) as info:
        _list(root)
    assert info.value.code == "operation_rejected"
    assert str(root) not in str(info.value)
    assert visible_bytes(root) == before


def _stage_for_a_dead_writer(root) -> None:
    """Staging a writer left behind: a change staged, never committed."""
    (root / ".okf" / "txn").mkdir(exist_ok=True)
    (root / ".okf" / "txn" / "payload-00000").write_bytes(b"never published\n")


def test_read_tool_rolls_back_staging_a_dead_writer_left(written):
    root, store = written
    _stage_for_a_dead_writer(root)
    snapshot.clear_cache()
    assert _list(root) == ["a", "d/b"]
    assert not journal.pending(store.root_fd)


def _read_only_recovery(monkeypatch):
    """What recovery meets on a read-only mount (running as root, chmod cannot show it)."""

    def refuse(*_args, **_kw):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(journal, "recover", refuse)


def test_read_only_bundle_with_a_journal_is_refused_not_served_mixed(written, monkeypatch):
    root, _ = written
    (root / ".okf" / "journal.json").write_text(
        json.dumps({"format": 1, "txn": "t", "writes": [], "deletes": [], "receipt": "{}"}))
    _read_only_recovery(monkeypatch)
    snapshot.clear_cache()
    with pytest.raises(ToolError) as info:
        _list(root)
    assert info.value.code == "operation_rejected" and "Read-only file system" in str(info.value)
    assert str(root) not in str(info.value)


def test_read_only_bundle_with_stale_staging_is_still_served(written, monkeypatch):
    root, store = written
    _stage_for_a_dead_writer(root)
    _read_only_recovery(monkeypatch)
    snapshot.clear_cache()
    assert _list(root) == ["a", "d/b"]
