"""The search index's helper process: it signs the bodies and builds a large index's postings
exactly as the in-process code would; where it cannot run, or fails, or the call is cancelled,
the index answers the same without it."""

from __future__ import annotations

import logging
import os
import stat
import sys

import pytest

from knowspec.impl.okf.search import boundary_signing as signing
from knowspec.impl.okf.search import concepts as sc
from knowspec.impl.okf.search import concepts_index as sci
from knowspec.impl.okf.search import index_helper
from knowspec.impl.okf.search.folded_bodies import FoldedBodies
from knowspec.impl.rules.text import case_fold


def _entries() -> list[tuple[str, sc.SearchableConcept]]:
    return [(f"c{i}", sc.SearchableConcept.of(f"c{i}", f"Title {i}", "a description" if i % 3 else "",
                                              [f"tag-{i % 4}"], f"sql warehouse {i} café " * (i + 1)))
            for i in range(30)]


QUERIES = ["warehouse 7 sql", "sql warehouse 2", "ql wa", "café", "title 1", "tag-3", "descr", "zz", "e"]


@pytest.mark.parametrize("on_disk", [True, False], ids=["bodies-in-a-file", "bodies-in-memory"])
def test_the_helper_process_signs_the_stored_bodies_like_the_bulk_signer(on_disk):
    bodies = [f"sql warehouse {i} café-au-lait".encode() * (i % 5 + 1) for i in range(300)]
    stored = FoldedBodies.of(bodies, on_disk=on_disk)
    assert stored.on_disk is on_disk
    payload = {"bodies": stored.handed_down()}
    assert index_helper.run("sign", payload) == signing.sign(bodies)


def test_without_a_helper_every_candidate_is_verified_with_the_same_answers(monkeypatch, caplog):
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    entries = _entries()
    index = sci.ConceptSearchIndex(entries)
    with caplog.at_level(logging.WARNING, logger=index_helper.__name__):
        for query in ("warehouse 7 sql", "sql warehouse 2", "ql wa"):
            assert index.search(case_fold(query), 10) == sc.search(entries, case_fold(query), 10)
    assert not index.boundaries_made()
    assert len([r for r in caplog.records if "helper" in r.getMessage()]) == 1  # tried once, not per query


def test_a_helper_that_fails_leaves_the_answers_unchanged(monkeypatch, tmp_path, caplog):
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'no numpy here' >&2\nexit 3\n")
    broken.chmod(broken.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(sys, "executable", str(broken))
    entries = _entries()
    with caplog.at_level(logging.WARNING, logger=index_helper.__name__):
        assert sci.ConceptSearchIndex(entries).search("sql warehouse 7", 10) == sc.search(entries, "sql warehouse 7", 10)
    assert any("exit 3: no numpy here" in r.getMessage() for r in caplog.records)


def test_a_cancelled_search_stops_the_helper(monkeypatch, tmp_path):
    slow = tmp_path / "python"
    pid_file = tmp_path / "pid"
    slow.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 30\n")
    slow.chmod(slow.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(sys, "executable", str(slow))
    monkeypatch.setattr(index_helper, "POLL_SECONDS", 0.05)

    class Cancelled(Exception):
        pass

    def cancel() -> None:
        if pid_file.exists() and pid_file.read_text().strip():
            raise Cancelled

    with pytest.raises(Cancelled):
        sci.ConceptSearchIndex(_entries()).search("sql warehouse 7", 10, cancel)
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped


def test_a_large_index_has_its_postings_built_by_the_helper_with_the_same_answers(monkeypatch):
    entries = _entries()
    in_process = sci.ConceptSearchIndex(entries)
    monkeypatch.setattr(sci, "HELPER_MIN_ROWS", 0)
    runs = []
    real = index_helper.Helper.start
    monkeypatch.setattr(index_helper.Helper, "start", lambda job, *args: runs.append(job) or real(job, *args))
    by_helper = sci.ConceptSearchIndex(entries)
    assert sorted(runs) == ["postings", "postings_part"]  # two helpers tokenise the bodies
    for query in QUERIES:
        folded = case_fold(query)
        assert by_helper.search(folded, 10) == in_process.search(folded, 10) == sc.search(entries, folded, 10), query


def _answers_the_same_after_a_warning(caplog, warning: str) -> None:
    """A large index built while its helpers fail: the failure logged, the answers unchanged."""
    entries = _entries()
    with caplog.at_level(logging.WARNING, logger=index_helper.__name__):
        index = sci.ConceptSearchIndex(entries)
    assert any(warning in r.getMessage() for r in caplog.records)
    for query in QUERIES:
        assert index.search(case_fold(query), 10) == sc.search(entries, case_fold(query), 10), query


def test_a_large_index_is_built_in_process_when_no_helper_starts(monkeypatch, caplog):
    monkeypatch.setattr(sci, "HELPER_MIN_ROWS", 0)
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    _answers_the_same_after_a_warning(caplog, "postings")


def test_the_helper_never_imports_a_knowspec_folder_from_the_working_folder(monkeypatch, tmp_path):
    planted = tmp_path / "knowspec"
    planted.mkdir()
    (planted / "__init__.py").write_text(f"open({str(tmp_path / 'imported')!r}, 'w').close()\n")
    monkeypatch.chdir(tmp_path)
    bodies = [b"sql warehouse", b"delta table"]
    stored = FoldedBodies.of(bodies, on_disk=False)
    payload = {"bodies": stored.handed_down()}
    assert index_helper.run("sign", payload) == signing.sign(bodies)
    assert not (tmp_path / "imported").exists()


def test_a_failing_second_helper_leaves_the_index_built_in_process(monkeypatch, caplog):
    monkeypatch.setattr(sci, "HELPER_MIN_ROWS", 0)
    monkeypatch.setattr(sci, "BODIES_PER_MESSAGE", 4)  # both helpers get bodies
    real = index_helper.Helper.start.__func__
    monkeypatch.setattr(index_helper.Helper, "start", classmethod(
        lambda cls, job, *args: real(cls, "no_such_job" if job == "postings_part" else job, *args)))
    _answers_the_same_after_a_warning(caplog, "failed")


def test_a_platform_that_cannot_pass_descriptors_builds_the_index_in_process(monkeypatch, caplog):
    monkeypatch.setattr(sci, "HELPER_MIN_ROWS", 0)
    real = index_helper.subprocess.Popen

    def popen(*args, pass_fds=(), **kwargs):
        if pass_fds:
            raise ValueError("pass_fds is not supported on Windows.")
        return real(*args, **kwargs)

    monkeypatch.setattr(index_helper.subprocess, "Popen", popen)
    _answers_the_same_after_a_warning(caplog, "could not start")
