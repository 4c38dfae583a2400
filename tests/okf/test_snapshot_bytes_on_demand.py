"""The snapshot keeps file records, not bytes (impl/okf/bundle/captured_files.py).

Bytes are in hand for the call that captured them, dropped when a read tool's call ends (else
at the next capture) and re-read on demand, served only when they hash as captured: a file
changed on disk is refused, never served as the snapshot's old content, and the next capture
serves the new one. Revisions and fingerprints come from the kept digests and equal the ones
hashed from the bytes.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from knowspec.impl.errors import ToolError
from knowspec.impl.okf.bundle import snapshot as snap
from knowspec.impl.okf.bundle.captured_files import CapturedFiles, FileChanged, FileRecord, captures_released_at_end
from knowspec.impl.okf.model import load_snapshot
from knowspec.impl.okf.tools import read as read_tools
from knowspec.impl.okf.tools.query import snapshot_fingerprint
from knowspec.impl.okf.write.revision import RevisionIndex, revision_of
from okf_helpers import ctx, list_concepts, read_concept, write_bundle


def _concept(title: str, body: str = "") -> str:
    return f"---\ntype: Note\ntitle: {title}\n---\n{body or 'body of ' + title}\n"


@pytest.fixture
def kb(tmp_path):
    snap.clear_cache()
    yield write_bundle(tmp_path / "kb", {"a.md": _concept("A", "see [B](b.md)"), "b.md": _concept("B"),
                                         "img/x.bin": "\x00\x01"})
    snap.clear_cache()


def _on_disk(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_documents_drop_their_bytes_at_the_next_capture(kb):
    first = load_snapshot(str(kb), ctx())
    assert first.concepts["a"]._raw is not None  # the capturing call reads the bodies in hand
    body = first.concepts["a"].body
    second = load_snapshot(str(kb), ctx())
    assert second is first
    assert all(d._raw is None for d in second.documents.values())
    assert isinstance(second.files, CapturedFiles)
    assert dict(second.files) == _on_disk(kb)  # re-read on demand, the same bytes
    assert second.concepts["a"].body == body and "see [B](b.md)" in body



def test_a_read_tool_call_drops_the_bytes_its_capture_parsed_when_it_returns(kb, monkeypatch):
    captured = []

    def recorded(path, context):
        captured.append(load_snapshot(path, context))
        return captured[-1]

    monkeypatch.setattr(read_tools, "load_snapshot", recorded)
    answer = list_concepts(kb)
    [held] = captured
    assert held.holding == [] and all(d._raw is None for d in held.documents.values())
    assert list_concepts(kb).structured == answer.structured  # answered again from re-read bytes
    assert held.concepts["a"].body.startswith("see [B](b.md)")

def test_bytes_stay_in_hand_until_the_outermost_read_call_returns(kb):
    seen = []

    @captures_released_at_end
    def inner():
        return load_snapshot(str(kb), ctx())

    @captures_released_at_end
    def outer():
        snapshot = inner()
        seen.append(snapshot.concepts["a"]._raw is not None)
        return snapshot

    snapshot = outer()
    assert seen == [True] and snapshot.concepts["a"]._raw is None


def test_a_failing_read_call_drops_the_bytes_too(kb):
    captured = []

    @captures_released_at_end
    def failing():
        captured.append(load_snapshot(str(kb), ctx()))
        raise ToolError("invalid_request", "refused after the capture")

    with pytest.raises(ToolError):
        failing()
    assert all(d._raw is None for d in captured[0].documents.values())

def test_a_file_changed_on_disk_is_refused_not_served_as_the_old_content(kb):
    held = load_snapshot(str(kb), ctx())
    load_snapshot(str(kb), ctx())  # releases the bytes
    stat = (kb / "b.md").stat()
    (kb / "b.md").write_text(_concept("C"))  # the same size: only the content tells
    os.utime(kb / "b.md", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises(ToolError) as raised:
        held.concepts["b"].body
    assert raised.value.code == "invalid_request" and str(kb) not in raised.value.message
    with pytest.raises(ToolError):
        held.files["b.md"]
    assert "title: C" in read_concept(kb, "b").structured["frontmatter_yaml"]  # a new capture serves the new file


def test_a_removed_file_is_refused(kb):
    held = load_snapshot(str(kb), ctx())
    load_snapshot(str(kb), ctx())
    (kb / "img" / "x.bin").unlink()
    with pytest.raises(ToolError) as raised:
        held.files["img/x.bin"]
    assert raised.value.code == "invalid_request"


FILES = st.dictionaries(st.sampled_from(["a.md", "b.md", "d/c.md", "d/e.txt", "index.md", "z.bin"]),
                        st.binary(max_size=40), min_size=1, max_size=5)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FILES, FILES)
def test_revision_and_fingerprint_from_digests_equal_the_hashed_bytes(files, edits):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "kb"
        for rel, data in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
        for step in (None, edits):
            if step is not None:
                for rel, data in step.items():
                    (root / rel).parent.mkdir(parents=True, exist_ok=True)
                    (root / rel).write_bytes(data)
            try:
                captured = load_snapshot(str(root), ctx())
            except ToolError:
                continue  # a bundle the read side refuses (e.g. undecodable frontmatter limits)
            load_snapshot(str(root), ctx())  # the bytes released: every value below is re-read or a digest
            plain = _on_disk(root)
            assert revision_of(captured.files) == revision_of(plain)
            assert RevisionIndex(captured.files).revision == revision_of(plain)
            assert snapshot_fingerprint(captured.files) == snapshot_fingerprint(plain)
            for document in captured.documents.values():
                assert document.sha256() == hashlib.sha256(plain[document.path]).hexdigest()
        snap.clear_cache()


def test_a_read_tool_answers_from_a_new_capture_when_a_file_changes_under_it(kb, monkeypatch):
    """The race (a write between the capture and a re-read) simulated: the first re-read finds
    the file changed; the tool runs again and answers."""
    load_snapshot(str(kb), ctx())
    load_snapshot(str(kb), ctx())  # bytes released: the tool below re-reads
    real_read, raced = FileRecord.read, []

    def read_once_changed(record):
        if not raced:
            raced.append(record.path)
            raise FileChanged()
        return real_read(record)

    monkeypatch.setattr(FileRecord, "read", read_once_changed)
    out = read_concept(kb, "a")
    assert raced and "see [B](b.md)" in out.structured["body"]


def test_a_read_tool_fails_cleanly_when_the_files_keep_changing(kb, monkeypatch):
    load_snapshot(str(kb), ctx())
    load_snapshot(str(kb), ctx())

    def always_changed(record):
        raise FileChanged()

    monkeypatch.setattr(FileRecord, "read", always_changed)
    with pytest.raises(ToolError) as raised:
        read_concept(kb, "a")
    assert raised.value.code == "invalid_request" and raised.value.message == "load bundle: file changed while reading"


def _counting_reads(monkeypatch) -> list[str]:
    from knowspec.impl.okf.bundle import captured_files

    reads: list[str] = []
    real = captured_files._read_verified

    def counted(record):
        reads.append(record.path)
        return real(record)

    monkeypatch.setattr(captured_files, "_read_verified", counted)
    return reads


def test_bytes_in_hand_read_a_released_file_once_and_release_it_after(kb, monkeypatch):
    load_snapshot(str(kb), ctx())
    concept = load_snapshot(str(kb), ctx()).concepts["a"]
    reads = _counting_reads(monkeypatch)
    with concept.bytes_in_hand():
        texts = (concept.body, concept.frontmatter_yaml, concept.link_target_ids(), concept.body)
    assert reads == ["a.md"] and texts[0] == texts[3] and texts[2] == ["b"]
    assert concept._raw is None
    concept.body
    assert reads == ["a.md", "a.md"]


def test_a_first_semantic_graph_reads_each_concepts_links_once(kb, monkeypatch):
    from knowspec.impl.okf.model import Snapshot
    from knowspec.impl.okf.tools.query import get_semantic_graph
    from tool_args import tool_args

    asked: list[str] = []
    real = Snapshot.navigation_targets

    def counted(self, concept_id, memo=None):
        asked.append(concept_id)
        return real(self, concept_id, memo)

    monkeypatch.setattr(Snapshot, "navigation_targets", counted)
    out = get_semantic_graph(tool_args("get_semantic_graph", bundle_path=str(kb)), ctx())
    assert sorted(asked) == ["a", "b"]  # the legacy and the v0.2 renders share them
    assert '"target": "bundle:b"' in out.text
    assert any("references" in node for node in out.structured["@graph"])
