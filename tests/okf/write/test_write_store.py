"""Store internals: CAS, replay, idempotency conflicts, receipt integrity, lock, recovery."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from knowspec.impl import runtime as process
from knowspec.impl.okf.bundle.paths import pin_root
from knowspec.impl.okf.write import atomic, journal, lock, receipts
from knowspec.impl.okf.write.plan import Plan
from knowspec.impl.okf.write.revision import revision_of
from knowspec.impl.okf.write.store import CommitRequest, Conflict, IdempotencyConflict, Store
from write_helpers import make_bundle, visible_bytes


@pytest.fixture
def store(tmp_path):
    root = make_bundle(tmp_path / "s", {"a.md": "---\ntype: Note\n---\na\n", "d/b.md": "---\ntype: Note\n---\nb\n"})
    fd, _ = pin_root(str(root))
    yield root, Store(fd, lease_timeout=0.2)
    os.close(fd)


def _request(root, writes, key="k1", digest="sha256:" + "1" * 64, base=None):
    files = visible_bytes(root)
    post = dict(files)
    post.update(writes)
    plan = Plan(digest, base or revision_of(files), revision_of(post), tuple(writes), writes,
                {p: files.get(p) for p in writes})
    return CommitRequest("cs-1", key, digest, plan)


def test_commit_publishes_and_records_a_canonical_receipt(store):
    root, s = store
    result = s.commit(_request(root, {"d/b.md": b"---\ntype: Note\n---\nB\n", "new/c.md": b"---\ntype: N\n---\n"}))
    assert not result.replayed
    assert (root / "new/c.md").read_bytes() == b"---\ntype: N\n---\n"
    assert s.lookup("k1") == result.receipt
    assert result.receipt.changed_paths() == ["d/b.md", "new/c.md"]
    assert sorted(os.listdir(root / ".okf")) == ["receipts", "txn"]  # the staging folder stays, empty
    assert os.listdir(root / ".okf" / "txn") == []


def test_stale_base_is_a_conflict_and_writes_nothing(store):
    root, s = store
    req = _request(root, {"a.md": b"x"})
    (root / "a.md").write_text("moved")
    before = visible_bytes(root)
    with pytest.raises(Conflict):
        s.commit(req)
    assert visible_bytes(root) == before


def test_same_key_same_digest_replays_and_different_digest_conflicts(store):
    root, s = store
    first = s.commit(_request(root, {"a.md": b"x"}))
    again = s.commit(_request(root, {"a.md": b"x"}, base=first.receipt.BaseRevision))
    assert again.replayed and again.receipt == first.receipt
    assert (root / "a.md").read_bytes() == b"x"
    with pytest.raises(IdempotencyConflict):
        s.commit(_request(root, {"a.md": b"y"}, digest="sha256:" + "2" * 64))


def test_a_request_whose_change_was_undone_is_committed_again_not_replayed(store):
    """Redo after undo: the same request on the same base had found its receipt and answered
    applied with nothing written."""
    root, s = store
    original = (root / "a.md").read_bytes()
    first = s.commit(_request(root, {"a.md": b"x"}))
    (root / "a.md").write_bytes(original)  # undone: the bundle is back at the request's base
    again = s.commit(_request(root, {"a.md": b"x"}))
    assert not again.replayed and again.receipt.BaseRevision == first.receipt.BaseRevision
    assert (root / "a.md").read_bytes() == b"x"
    assert s.commit(CommitRequest("cs-1", "k1", first.receipt.RequestDigest, None)).replayed  # a bare retry


@pytest.mark.parametrize("change", [
    {"writes": [{"path": "../escaped.txt"}]},
    {"writes": [{"path": "d/.okf/journal.json"}]},
    {"writes": [{"payload": "../../outside"}]},
    {"deletes": ["../victim.txt"]},
    {"deletes": ["/etc/victim"]},
    {"deletes": "a.md"},
])
def test_a_journal_naming_anything_but_bundle_files_is_refused_with_nothing_done(store, change):
    """A planted journal had deleted and written files outside the bundle on the next call,
    a read included: its paths were never checked."""
    root, s = store
    victim = root.parent / "victim.txt"
    victim.write_text("outside the bundle")
    before = visible_bytes(root)
    _commit_until_the_boundary(root, {"a.md": b"---\ntype: Note\n---\nnew\n"})
    path = root / ".okf" / "journal.json"
    manifest = json.loads(path.read_bytes())
    if "writes" in change:
        manifest["writes"] = [{**manifest["writes"][0], **change["writes"][0]}]
    else:
        manifest["deletes"] = change["deletes"]
    path.write_text(json.dumps(manifest))
    with pytest.raises(receipts.StorageCorrupt):
        s.recover()
    assert visible_bytes(root) == before
    assert victim.read_text() == "outside the bundle" and not (root.parent / "escaped.txt").exists()


def test_tampered_receipt_is_storage_corruption(store):
    root, s = store
    s.commit(_request(root, {"a.md": b"x"}))
    path = root / ".okf" / "receipts" / receipts.receipt_name("k1")
    path.write_bytes(path.read_bytes().replace(b'"FormatVersion":1', b'"FormatVersion": 1'))
    with pytest.raises(receipts.StorageCorrupt):
        s.lookup("k1")


def test_staging_without_journal_is_rolled_back(store):
    root, s = store
    before = visible_bytes(root)
    (root / ".okf" / "txn").mkdir(parents=True)
    (root / ".okf" / "txn" / "payload-00000").write_bytes(b"partial")
    assert journal.pending(s.root_fd)
    s.recover()
    assert not journal.pending(s.root_fd)
    assert visible_bytes(root) == before


def test_lock_excludes_a_second_writer_until_released(store):
    _, s = store
    held, release = threading.Event(), threading.Event()

    def holder():
        with lock.exclusive(s.root_fd):
            held.set()
            release.wait(5)

    t = threading.Thread(target=holder)
    t.start()
    held.wait(5)
    with pytest.raises(lock.LockTimeout):
        with lock.exclusive(s.root_fd, timeout=0.1):
            pass
    release.set()
    t.join()
    with lock.exclusive(s.root_fd, timeout=1):
        pass


def test_replaced_file_keeps_its_permission_bits(store):
    root, s = store
    os.chmod(root / "a.md", 0o600)
    s.commit(_request(root, {"a.md": b"x"}))
    assert (root / "a.md").stat().st_mode & 0o777 == 0o600


def test_lock_excludes_a_writer_in_another_process(store):
    import multiprocessing as mp

    root, s = store
    ctx = mp.get_context("fork")
    held, release = ctx.Event(), ctx.Event()

    def holder():
        fd, _ = pin_root(str(root))
        with lock.exclusive(fd):
            held.set()
            release.wait(5)

    proc = ctx.Process(target=holder)
    proc.start()
    assert held.wait(5)
    with pytest.raises(lock.LockTimeout):
        with lock.exclusive(s.root_fd, timeout=0.1):
            pass
    release.set()
    proc.join(5)
    with lock.exclusive(s.root_fd, timeout=1):
        pass


def test_a_one_file_commit_syncs_eight_times_once_the_store_exists(store, monkeypatch):
    root, s = store
    s.commit(_request(root, {"a.md": b"---\ntype: Note\n---\nfirst\n"}))  # makes .okf, its staging and receipts
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    s.commit(_request(root, {"a.md": b"---\ntype: Note\n---\nsecond\n"}, key="k2"))
    # payload, staging folder, journal, .okf (the boundary), the target's folder, receipt,
    # receipts folder, .okf (journal gone): no folder made or removed, so no sync for one
    assert len(synced) == 8
    assert os.listdir(root / ".okf" / "txn") == [] and not journal.pending(s.root_fd)


def _boundary_crash(name: str) -> None:
    if name == "boundary":
        raise KeyboardInterrupt("the writer dies at the durable boundary")


def _commit_until_the_boundary(root, writes) -> None:
    fd, _ = pin_root(str(root))
    try:
        with pytest.raises(KeyboardInterrupt):
            Store(fd, lease_timeout=0.2, step_hook=_boundary_crash).commit(_request(root, writes))
    finally:
        os.close(fd)


def test_a_journal_of_format_1_is_rolled_forward_from_its_commit_folder(store):
    """A journal an older version left (payloads in ``.okf/txn/<txn>/``) still finishes."""
    root, s = store
    new = b"---\ntype: Note\n---\nnew\n"
    _commit_until_the_boundary(root, {"a.md": new})
    okf = root / ".okf"
    manifest = json.loads((okf / "journal.json").read_bytes())
    assert manifest["format"] == 2 and "txn" not in manifest
    (okf / "txn" / "0123abcd").mkdir()
    os.rename(okf / "txn" / "payload-00000", okf / "txn" / "0123abcd" / "payload-00000")
    (okf / "journal.json").write_text(json.dumps({**manifest, "format": 1, "txn": "0123abcd"}))
    assert (root / "a.md").read_bytes() != new
    receipt = s.recover()
    assert receipt is not None and receipt.changed_paths() == ["a.md"]
    assert (root / "a.md").read_bytes() == new
    assert sorted(os.listdir(okf)) == ["receipts", "txn"] and os.listdir(okf / "txn") == []


@pytest.mark.parametrize("change", [{"format": 3}, {"format": 1, "txn": "../.."}, {"format": 1, "txn": None}])
def test_a_journal_that_names_no_staging_this_version_knows_is_storage_corruption(store, change):
    root, s = store
    before = visible_bytes(root)
    _commit_until_the_boundary(root, {"a.md": b"---\ntype: Note\n---\nnew\n"})
    path = root / ".okf" / "journal.json"
    manifest = json.loads(path.read_bytes())
    path.write_text(json.dumps({**manifest, **change}))
    with pytest.raises(receipts.StorageCorrupt):
        s.recover()
    assert visible_bytes(root) == before


def test_staging_an_older_version_left_in_a_commit_folder_is_rolled_back(store):
    root, s = store
    before = visible_bytes(root)
    old = root / ".okf" / "txn" / "0123abcd"
    old.mkdir(parents=True)
    (old / "payload-00000").write_bytes(b"never published\n")
    assert journal.pending(s.root_fd)
    s.recover()
    assert not journal.pending(s.root_fd)
    assert visible_bytes(root) == before and os.listdir(root / ".okf" / "txn") == []


def _receipt_files(folder, ages_s: list[float]) -> list[str]:
    """Receipt-named files whose modification times lie ``ages_s`` seconds in the past."""
    folder.mkdir(parents=True, exist_ok=True)
    now, names = time.time(), []
    for i, age in enumerate(ages_s):
        path = folder / f"{i:064x}.json"
        path.write_text("{}")
        os.utime(path, (now - age, now - age))
        names.append(path.name)
    return names


def _prune(folder) -> set[str]:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        receipts.prune(fd)
    finally:
        os.close(fd)
    return set(os.listdir(folder))


def test_prune_drops_receipts_past_retention_but_never_the_newest_thousand(tmp_path):
    day = receipts.RETENTION_SECONDS
    old = _receipt_files(tmp_path / "r", [2 * day + i for i in range(receipts.KEEP_NEWEST + 5)])
    assert _prune(tmp_path / "r") == set(old[:receipts.KEEP_NEWEST])  # all overdue: the newest stay


def test_prune_keeps_receipts_within_retention_however_many(tmp_path):
    recent = _receipt_files(tmp_path / "r", [60.0 + i for i in range(receipts.KEEP_NEWEST + 5)])
    assert _prune(tmp_path / "r") == set(recent)


def test_a_commit_scans_the_receipts_at_most_once_a_minute(store, monkeypatch):
    """A prune stats every receipt (at least the newest 1000 once a bundle has had them): done
    at every commit, it made each one-file commit 2-3 ms dearer than the change."""
    root, s = store
    clock = [1000.0]
    pruned = []
    real_prune = receipts.prune
    monkeypatch.setattr(receipts, "_clock", lambda: clock[0])
    monkeypatch.setattr(receipts, "prune", lambda fd, now=None: (pruned.append(fd), real_prune(fd, now))[1])
    with process.activated():
        for i in range(3):
            s.commit(_request(root, {"a.md": f"---\ntype: Note\n---\n{i}\n".encode()}, key=f"k{i}"))
        assert len(pruned) == 1
        clock[0] += receipts.PRUNE_INTERVAL_SECONDS
        s.commit(_request(root, {"a.md": b"---\ntype: Note\n---\nlater\n"}, key="k-later"))
        assert len(pruned) == 2


def test_a_commit_makes_every_change_of_a_step_before_it_syncs_any(store, monkeypatch):
    """Files written (and renames made) one after another, then synced: the file system may
    commit a step's changes together. Each sync still precedes the step that depends on it."""
    root, s = store
    s.commit(_request(root, {"a.md": b"---\ntype: Note\n---\nfirst\n"}))  # the store's folders exist
    events: list[str] = []
    real_fsync, real_rename, real_create = os.fsync, os.rename, atomic.create_unsynced
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append("sync"), real_fsync(fd))[1])
    monkeypatch.setattr(os, "rename", lambda *a, **k: (events.append("rename"), real_rename(*a, **k))[1])
    monkeypatch.setattr(atomic, "create_unsynced", lambda *a, **k: (events.append("create"), real_create(*a, **k))[1])
    s.commit(_request(root, {"a.md": b"---\ntype: Note\n---\nA\n", "d/b.md": b"---\ntype: Note\n---\nB\n"}, key="k2"))
    assert events == (["create"] * 4  # two payloads, the receipt, the journal
                      + ["sync"] * 5  # each of them, then the staging folder
                      + ["rename", "sync"]  # the journal named, .okf synced: the durable boundary
                      + ["rename"] * 3  # both payloads and the receipt into place
                      + ["sync"] * 4)  # the root, d/, receipts/, then .okf once the journal is gone


def test_a_commit_the_file_system_will_not_let_finish_is_said_plainly(store):
    """A folder put where a file is published: writers had answered 'tool operation was rejected'
    (and logged a traceback), readers '... cannot be finished: None'."""
    from knowspec.impl.errors import ToolError
    from knowspec.impl.okf.write import bundle_io

    root, _ = store
    _commit_until_the_boundary(root, {"a.md": b"---\ntype: Note\n---\nnew\n"})
    (root / "a.md").unlink()
    (root / "a.md").mkdir()
    fd, _ = pin_root(str(root))
    try:
        with pytest.raises(ToolError) as err:
            bundle_io.finish_interrupted(fd)
    finally:
        os.close(fd)
    assert err.value.code == "operation_rejected"
    assert err.value.message == ("bundle has an interrupted commit that cannot be finished: "
                                 "refusing to replace non-regular entry 'a.md'")


def test_a_plan_past_the_staging_limits_is_a_limit_not_bad_input(store):
    """A body the schema admits (up to 16 MiB) that one commit cannot stage had answered
    invalid_request; it is a resource limit."""
    from knowspec.impl.okf.write.rootfs import ResultOverLimits
    from knowspec.impl.okf.write.store import MAX_STAGED_PAYLOAD

    root, s = store
    before = visible_bytes(root)
    with pytest.raises(ResultOverLimits):
        s.commit(_request(root, {"a.md": b"x" * (MAX_STAGED_PAYLOAD + 1)}))
    assert visible_bytes(root) == before


def test_a_published_file_changed_before_recovery_is_named_with_the_way_out(store):
    root, s = store
    _commit_until_the_boundary(root, {"a.md": b"---\ntype: Note\n---\nnew\n"})
    manifest = json.loads((root / ".okf" / "journal.json").read_bytes())
    s_payload = root / ".okf" / "txn" / manifest["writes"][0]["payload"]
    os.rename(s_payload, root / "a.md")  # published, as a crash after the rename leaves it
    (root / "a.md").write_text("a hand edit before the next call\n")
    with pytest.raises(receipts.StorageCorrupt) as err:
        s.recover()
    assert str(err.value) == ("'a.md' changed after the interrupted commit wrote it; put its committed content "
                              "back, or remove .okf/journal.json to give the rest of that commit up")
