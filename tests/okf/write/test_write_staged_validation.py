"""Staged validation covers the whole staged bundle (strict 0.2, links, orphans) and blocks
only on ERRORs the edit introduces."""

from __future__ import annotations


import pytest

from knowspec.impl.context import CallContext
from knowspec.impl.errors import ToolError
from knowspec.impl.okf.tools import write as write_tools
from knowspec.impl.okf.write.planner import staged_validation
from write_helpers import make_bundle, preview, visible_bytes
from tool_args import tool_args


def uncancelled() -> None:
    """A call nobody cancels."""


INDEX = '---\nokf_version: "0.2"\n---\n# Index\n\n- [A](a.md)\n- [B](b.md)\n'
A = "---\ntype: Note\n---\n# A\n\n## Details\n\nSee [B](b.md#usage).\n"
B = "---\ntype: Note\n---\n# B\n\n## Usage\n\nText.\n"


def _files(**extra: str) -> dict[str, bytes]:
    files = {"index.md": INDEX, "a.md": A, "b.md": B}
    files.update(extra)
    return {p: t.encode() for p, t in files.items()}


def _codes(findings):
    return sorted((d["file"], d["code"]) for d in findings)


def test_a_clean_edit_has_no_findings():
    files = _files()
    assert staged_validation(files, {"b.md": B.replace("Text.", "More text.").encode()}, check=uncancelled) == ([], [])


def test_breaking_an_anchor_other_documents_link_to_is_reported_on_the_linking_document():
    files = _files()
    blocking, advisory = staged_validation(files, {"b.md": B.replace("## Usage", "## Use").encode()}, check=uncancelled)
    assert blocking == [] and _codes(advisory) == [("a.md", "link_anchor_missing")]


def test_a_new_broken_link_from_the_edited_document_is_reported():
    files = _files()
    blocking, advisory = staged_validation(files, {"b.md": (B + "\n[gone](missing.md)\n").encode()}, check=uncancelled)
    assert blocking == [] and _codes(advisory) == [("b.md", "link_target_missing")]


def test_link_and_orphan_findings_already_in_the_base_are_not_repeated():
    files = _files(**{"c.md": "---\ntype: Note\n---\n[gone](missing.md)\n"})
    blocking, advisory = staged_validation(files, {"b.md": B.replace("Text.", "Other.").encode()}, check=uncancelled)
    assert blocking == [] and advisory == []


def test_errors_elsewhere_in_the_base_block_an_edit():
    """The whole staged bundle must be conformant: an ERROR the base already has blocks too."""
    files = _files(**{"broken.md": "---\ntitle: no type\n---\nx\n"})
    blocking, _ = staged_validation(files, {"b.md": B.replace("Text.", "Other.").encode()}, check=uncancelled)
    assert ("broken.md", "concept_type_invalid") in _codes(blocking)


def test_a_new_error_in_the_edited_document_blocks():
    files = _files()
    blocking, _ = staged_validation(files, {"b.md": b"---\ntitle: no type\n---\nx\n"}, check=uncancelled)
    assert _codes(blocking) == [("b.md", "concept_type_invalid")]


def test_set_bundle_version_without_a_root_index_is_rejected(tmp_path):
    """The created root index has frontmatter only: no heading and no linked entry, a new
    structural ERROR of the staged bundle, so the preview is a diagnostic-only rejection."""
    bundle = make_bundle(tmp_path / "b", {"a.md": A, "b.md": B})
    before = visible_bytes(bundle)
    out = preview(bundle, [{"kind": "set_bundle_version", "version": "0.2"}])
    assert out["status"] == "rejected" and out["result_revision"] is None
    assert {(d["file"], d["code"]) for d in out["diagnostics"] if d["severity"] == "ERROR"} == {
        ("index.md", "index_structure_invalid")}
    assert visible_bytes(bundle) == before


def test_set_bundle_version_with_a_valid_root_index_is_applicable(tmp_path):
    bundle = make_bundle(tmp_path / "b", {"index.md": "# Index\n\n- [A](a.md)\n- [B](b.md)\n", "a.md": A, "b.md": B})
    out = preview(bundle, [{"kind": "set_bundle_version", "version": "0.2"}])
    assert out["status"] == "applicable" and out["affected_paths"] == ["index.md"]


def test_write_concept_that_breaks_an_incoming_anchor_reports_it(tmp_path):
    bundle = make_bundle(tmp_path / "b", {"index.md": INDEX, "a.md": A, "b.md": B})
    args = tool_args("write_concept", bundle_path=str(bundle), concept_id="b", frontmatter="type: Note\n", body="# B\n")
    out = write_tools.write_concept(args, CallContext()).structured
    assert out["status"] == "success"
    assert [(d["severity"], d["file"]) for d in out["diagnostics"]] == [("WARN", "a.md")]


def test_write_concept_into_a_bundle_with_a_base_error_is_refused_and_names_it(tmp_path):
    """A log.md with frontmatter is an ERROR of the base: the write is refused, nothing is written."""
    bundle = make_bundle(tmp_path / "b", {"index.md": INDEX, "a.md": A, "b.md": B,
                                          "log.md": "---\ntype: Log\n---\n# Log\n"})
    before = visible_bytes(bundle)
    args = tool_args("write_concept", bundle_path=str(bundle), concept_id="probe", frontmatter="type: Note\n", body="# P\n")
    with pytest.raises(ToolError) as err:
        write_tools.write_concept(args, CallContext())
    assert err.value.code == "operation_rejected"
    assert "log.md" in {d["file"] for d in err.value.diagnostics if d["severity"] == "ERROR"}
    assert visible_bytes(bundle) == before and not (bundle / ".okf").exists()


def test_write_concept_that_introduces_an_error_is_rejected(tmp_path):
    bundle = make_bundle(tmp_path / "b", {"index.md": INDEX, "a.md": A, "b.md": B})
    args = tool_args("write_concept", bundle_path=str(bundle), concept_id="b", frontmatter="title: T\n", body="x\n")
    with pytest.raises(ToolError) as err:
        write_tools.write_concept(args, CallContext())
    assert err.value.code == "operation_rejected"
    assert (bundle / "b.md").read_text() == B


def test_cached_parses_never_leak_between_bundles_with_the_same_paths():
    """Documents are cached by exact bytes: the same path with other bytes is parsed again."""
    good = _files()
    bad = _files(**{"b.md": "---\ntitle: no type\n---\nx\n"})
    edit = {"a.md": A.replace("See", "Read").encode()}
    assert staged_validation(good, edit, check=uncancelled) == ([], [])
    blocking, _ = staged_validation(bad, edit, check=uncancelled)
    assert _codes(blocking) == [("b.md", "concept_type_invalid")]  # the base's error, parsed from bad
    fixed = {"b.md": B.encode()}
    assert staged_validation(bad, fixed, check=uncancelled)[0] == []
    assert _codes(staged_validation(good, {"b.md": bad["b.md"]}, check=uncancelled)[0]) == [("b.md", "concept_type_invalid")]


def test_findings_cached_without_links_are_not_reused_with_links():
    """Patch plans validate without links and orphans, write_concept with them: a cached report
    of the base made one way must never stand in for the other (old findings would look new)."""
    files = _files(**{"sub/c.md": "---\ntype: Note\n---\nC.\n"})
    staged_validation(files, {"a.md": A.replace("See", "Read").encode()}, links=False, check=uncancelled)
    _, advisory = staged_validation(files, {"notes/new.md": b"---\ntype: Note\n---\nN.\n"}, check=uncancelled)
    assert "sub" not in {d["file"] for d in advisory}  # the base's own orphan note is not the write's
