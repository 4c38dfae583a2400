"""Readers during a many-file apply see the whole old bundle or the whole new one, never a mix.

Each round of applies sets every concept's ``stale_after`` to the round's date, so a consistent
``list_concepts`` answer carries exactly one date across all its cards. Readers run through the
real read handlers: threads in this process (with and without the inotify cache) and a forked
process with its own cache. ``fsync_dir`` is slowed in the writer so each rename sequence
spans many reads.
"""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from knowspec.impl.context import CallContext
from knowspec.impl.okf.tools import read as read_tools
from knowspec.impl.okf.bundle import snapshot
from knowspec.impl.okf.bundle import watch
from knowspec.impl.okf.write import atomic
from test_write_crash import fast_dir  # noqa: F401 - fixture
from write_helpers import make_bundle, preview_and_apply
from tool_args import tool_args

CONCEPTS = 120
ROUNDS = 3
DATES = [None] + [f"20{30 + r}-01-01" for r in range(ROUNDS)]


def _bundle(root):
    files = {"index.md": '---\nokf_version: "0.2"\n---\n# Index\n\n' + ''.join(f'- [N{i}](c/n{i:03d}.md)\n' for i in range(CONCEPTS))}
    for i in range(CONCEPTS):
        files[f"c/n{i:03d}.md"] = f"---\ntype: Note\ntitle: Note {i}\nstatus: draft\n---\nBody {i}\n"
    return make_bundle(root, files)


def _ops(date: str) -> list[dict]:
    return [{"kind": "set_lifecycle", "concept_id": f"c/n{i:03d}",
             "lifecycle": {"status": "stable", "stale_after": date}} for i in range(CONCEPTS)]


def _list_dates(root) -> list:
    args = tool_args("list_concepts", bundle_path=str(root))
    cards = read_tools.list_concepts(args, CallContext()).structured["concepts"]
    return [c["stale_after"] for c in cards]


def _read_date(root, concept_id: str):
    args = tool_args("read_concept", bundle_path=str(root), concept_id=concept_id)
    return read_tools.read_concept(args, CallContext()).structured["projection"]["stale_after"]


def _state(dates: list) -> int:
    """The round a listing belongs to; fails on a mixed (torn) listing."""
    assert len(dates) == CONCEPTS, f"{len(dates)} concepts listed"
    seen = set(dates)
    assert len(seen) == 1, f"mixed read: {sorted(map(str, seen))}"
    return DATES.index(seen.pop())


class _Readers:
    """Reader threads that record the round of every answer and stop at the first error."""

    def __init__(self, root) -> None:
        self.root, self.stop = root, threading.Event()
        self.rounds: list[list[int]] = [[], [], []]
        self.errors: list[BaseException] = []
        self.threads = [threading.Thread(target=self._run, args=(k,)) for k in range(3)]

    def _run(self, k: int) -> None:
        try:
            while not self.stop.is_set():
                if k < 2:
                    self.rounds[k].append(_state(_list_dates(self.root)))
                else:  # read_concept: a reader never goes back to an older round
                    last = CONCEPTS - 1 if len(self.rounds[k]) % 2 else 0
                    self.rounds[k].append(DATES.index(_read_date(self.root, f"c/n{last:03d}")))
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            self.errors.append(exc)

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)


def _forked_reader(root, stop_r: int, out_w: int) -> None:
    """Child: list in a loop until the parent closes ``stop_r``'s peer; report the rounds."""
    snapshot.clear_cache()
    rounds, error = [], None
    try:
        os.set_blocking(stop_r, False)
        while True:
            try:
                if os.read(stop_r, 1) == b"":
                    break
            except BlockingIOError:
                pass
            rounds.append(_state(_list_dates(root)))
    except BaseException as exc:  # noqa: BLE001
        error = repr(exc)
    os.write(out_w, json.dumps({"rounds": rounds, "error": error}).encode())


def _start_child(root):
    stop_r, stop_w = os.pipe()
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(stop_w)
            os.close(out_r)
            _forked_reader(root, stop_r, out_w)
        finally:
            os._exit(0)
    os.close(stop_r)
    os.close(out_w)
    return pid, stop_w, out_r


def _finish_child(pid, stop_w, out_r) -> dict:
    os.close(stop_w)
    chunks = []
    while chunk := os.read(out_r, 1 << 16):
        chunks.append(chunk)
    os.close(out_r)
    os.waitpid(pid, 0)
    return json.loads(b"".join(chunks) or b'{"rounds": [], "error": "no report"}')


@pytest.fixture
def slow_renames(monkeypatch):
    real = atomic.fsync_dir

    def fsync_dir(fd: int) -> None:
        real(fd)
        time.sleep(0.0005)

    monkeypatch.setattr(atomic, "fsync_dir", fsync_dir)


def _monotonic(rounds: list[int]) -> bool:
    return all(a <= b for a, b in zip(rounds, rounds[1:]))


@pytest.mark.slow
@pytest.mark.parametrize("inotify", [True, False], ids=["watched", "walked"])
def test_readers_during_many_file_applies_see_all_old_or_all_new(fast_dir, monkeypatch, slow_renames, inotify):
    monkeypatch.setattr(watch, "ENABLED", inotify and watch.ENABLED)
    snapshot.clear_cache()
    root = _bundle(fast_dir / "b")
    assert _state(_list_dates(root)) == 0
    child = _start_child(root)  # fork before any thread starts
    try:
        with _Readers(root) as readers:
            for r in range(1, ROUNDS + 1):
                _, applied = preview_and_apply(root, _ops(DATES[r]))
                assert applied["status"] == "applied" and len(applied["changed_paths"]) == CONCEPTS
                time.sleep(0.02)
    finally:
        report = _finish_child(*child)
    assert not readers.errors, readers.errors[0]
    assert report["error"] is None, report["error"]
    for rounds in readers.rounds + [report["rounds"]]:
        assert _monotonic(rounds), "a reader went back to an older bundle"
    listed = readers.rounds[0] + readers.rounds[1] + report["rounds"]
    assert len(set(listed)) >= 3, "readers must have overlapped several applies"
    assert len(set(report["rounds"])) >= 2, "the second process must have read across an apply"
    assert _state(_list_dates(root)) == ROUNDS
