"""Snapshot reuse: revalidated on every call, unchanged files never re-parsed, never stale."""

from __future__ import annotations

import os

from knowspec.impl.okf.layered_map import LayeredMap
from knowspec.impl.okf.model import load_snapshot
from knowspec.impl.okf.bundle.snapshot import Stats
from okf_helpers import ctx, list_concepts, read_concept, write_bundle


def _concept(title: str) -> str:
    return f"---\ntype: Note\ntitle: {title}\n---\nbody of {title}\n"


def test_unchanged_bundle_returns_same_snapshot_without_reparse(tmp_path):
    kb = write_bundle(tmp_path / "kb", {"a.md": _concept("A"), "b.md": _concept("B"), "img.png": b"\x89PNG"})
    first = load_snapshot(str(kb), ctx())
    parsed, read = Stats.parsed_documents, Stats.files_read
    second = load_snapshot(str(kb), ctx())
    assert second is first
    assert (Stats.parsed_documents, Stats.files_read) == (parsed, read)


def test_edited_file_is_reread_and_only_it_is_reparsed(tmp_path):
    kb = write_bundle(tmp_path / "kb", {"a.md": _concept("A"), "b.md": _concept("B")})
    assert read_concept(kb, "a").structured["projection"]["title"] == "A"
    before = load_snapshot(str(kb), ctx())
    parsed = Stats.parsed_documents
    (kb / "a.md").write_text(_concept("A2 edited"))
    after = load_snapshot(str(kb), ctx())
    assert after is not before
    assert Stats.parsed_documents == parsed + 1
    assert after.concepts["b"] is before.concepts["b"]
    assert read_concept(kb, "a").structured["projection"]["title"] == "A2 edited"


def test_an_edit_shares_the_unchanged_documents_instead_of_copying_them(tmp_path):
    kb = write_bundle(tmp_path / "kb", {f"c{i}.md": _concept(f"C{i}") for i in range(20)})
    before = load_snapshot(str(kb), ctx())
    (kb / "c3.md").write_text(_concept("C3 edited"))
    after = load_snapshot(str(kb), ctx())
    assert isinstance(after.documents, LayeredMap) and not after.documents.flattened
    assert after.documents["c3.md"] is not before.documents["c3.md"]
    assert after.concepts["c4"] is before.concepts["c4"] and after.concepts["c3"].title == "C3 edited"
    assert list(after.documents) == list(before.documents) and list(after.concepts) == list(before.concepts)


def test_same_size_same_mtime_rewrite_is_still_seen(tmp_path):
    kb = write_bundle(tmp_path / "kb", {"a.md": _concept("AAAA")})
    st = os.stat(kb / "a.md")
    load_snapshot(str(kb), ctx())
    (kb / "a.md").write_text(_concept("BBBB"))
    os.utime(kb / "a.md", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert read_concept(kb, "a").structured["projection"]["title"] == "BBBB"


def test_new_and_deleted_files_change_the_concept_set(tmp_path):
    kb = write_bundle(tmp_path / "kb", {"a.md": _concept("A")})
    assert [c["id"] for c in list_concepts(kb).structured["concepts"]] == ["a"]
    (kb / "b.md").write_text(_concept("B"))
    assert [c["id"] for c in list_concepts(kb).structured["concepts"]] == ["a", "b"]
    (kb / "a.md").unlink()
    assert [c["id"] for c in list_concepts(kb).structured["concepts"]] == ["b"]


def test_new_target_makes_a_broken_link_resolve(tmp_path):
    kb = write_bundle(tmp_path / "kb", {"a.md": "---\ntype: N\n---\n[b](b.md)\n"})
    snap1 = load_snapshot(str(kb), ctx())
    assert [e.exists for e in snap1.navigation("a")] == [False]
    (kb / "b.md").write_text(_concept("B"))
    snap2 = load_snapshot(str(kb), ctx())
    assert [e.exists for e in snap2.navigation("a")] == [True]


def test_revision_changes_with_content_and_is_stable_otherwise(tmp_path):
    kb = write_bundle(tmp_path / "kb", {"a.md": _concept("A")})
    rev1 = load_snapshot(str(kb), ctx()).revision
    assert load_snapshot(str(kb), ctx()).revision == rev1
    (kb / "a.md").write_text(_concept("Z"))
    assert load_snapshot(str(kb), ctx()).revision != rev1


def test_a_file_key_is_exact_whether_packed_or_not(tmp_path):
    import dataclasses

    from knowspec.impl.okf.bundle.snapshot import file_key

    path = tmp_path / "a.md"
    path.write_text("x")
    st = os.stat(path)
    assert file_key(st) == file_key(os.stat(path)) and isinstance(file_key(st), bytes)

    @dataclasses.dataclass
    class Far:  # a modification time past what 64-bit nanoseconds hold (year 2262)
        st_dev: int = st.st_dev
        st_ino: int = st.st_ino
        st_size: int = st.st_size
        st_mtime_ns: int = 1 << 63
        st_ctime_ns: int = st.st_ctime_ns

    far = Far()
    assert file_key(far) == (st.st_dev, st.st_ino, st.st_size, 1 << 63, st.st_ctime_ns) != file_key(st)  # type: ignore[arg-type]
