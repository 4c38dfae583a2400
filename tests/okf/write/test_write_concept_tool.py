"""write_concept: whole-document create/replace through the same transactional store."""

from __future__ import annotations

import json

import pytest

from knowspec.impl.context import CallContext
from knowspec.impl.errors import ToolError
from knowspec.impl.okf.tools import write as write_tools
from write_helpers import assert_valid_output, tree_bytes, visible_bytes
from tool_args import tool_args, unchecked_args


def _write(bundle, concept_id="notes/new", frontmatter="type: Note\ntitle: New\n", body="# New\n\nText.\n"):
    args = tool_args("write_concept", bundle_path=str(bundle), concept_id=concept_id, frontmatter=frontmatter, body=body)
    out = write_tools.write_concept(args, CallContext()).structured
    assert_valid_output("write_concept", out)
    return out


def test_creates_a_concept_with_exact_bytes(bundle):
    before = visible_bytes(bundle)
    out = _write(bundle)
    # The whole staged bundle is validated with orphans: the new folder has no index.md.
    assert out == {"status": "success", "path": "notes/new.md", "diagnostics": [
        {"severity": "INFO", "file": "notes", "message": "missing index.md, skipping orphan check for this directory"}]}
    after = visible_bytes(bundle)
    # okf-mcp's layout: a blank line after the closing fence.
    assert after.pop("notes/new.md") == b"---\ntype: Note\ntitle: New\n---\n\n# New\n\nText.\n"
    assert after == before


def test_replaces_an_existing_concept_in_place(bundle):
    _write(bundle, "arch/cache", "type: Note\n", "new body\n")
    assert (bundle / "arch/cache.md").read_bytes() == b"---\ntype: Note\n---\n\nnew body\n"


@pytest.mark.parametrize(("frontmatter", "body", "written"), [
    ("type: Note\n", "no newline", b"---\ntype: Note\n---\n\nno newline\n"),
    ("type: Note", "", b"---\ntype: Note\n---\n\n\n"),
    ("---\ntype: Note\n---\n", "x\n", b"---\ntype: Note\n---\n\nx\n"),
    ("---\ntype: Note\n...\n", "x\n", b"---\ntype: Note\n---\n\nx\n"),
    ("---\ntype: Note\n", "x\n", b"---\ntype: Note\n---\n\nx\n"),
])
def test_written_layout_is_okf_mcps(bundle, frontmatter, body, written):
    """Fences, a blank line, a newline-terminated body; fences in the argument are YAML markers."""
    assert _write(bundle, "arch/cache", frontmatter, body)["status"] == "success"
    assert (bundle / "arch/cache.md").read_bytes() == written


def test_a_second_yaml_document_in_the_frontmatter_is_refused(bundle):
    before = visible_bytes(bundle)
    with pytest.raises(ToolError) as err:
        _write(bundle, "arch/cache", "---\ntype: Note\n---\ntitle: smuggled\n", "x\n")
    assert err.value.code == "invalid_request"
    assert visible_bytes(bundle) == before


def test_identical_write_is_success_and_changes_nothing(bundle):
    _write(bundle)
    snapshot = visible_bytes(bundle)
    assert _write(bundle)["status"] == "success"
    assert visible_bytes(bundle) == snapshot


def test_identical_request_replays_its_receipt_after_a_foreign_edit_elsewhere(bundle):
    # Identity excludes the base revision (spec/okf/contract/write.md §3.3 step 5): a retry after
    # another file changed finds the earlier receipt and publishes nothing new.
    _write(bundle)
    (bundle / "arch/cache.md").write_text("---\ntype: Note\n---\nhand edit elsewhere\n")
    receipts = sorted((bundle / ".okf" / "receipts").iterdir())
    _write(bundle)
    assert sorted((bundle / ".okf" / "receipts").iterdir()) == receipts


def test_writing_a_concept_back_after_another_write_puts_it_back(bundle):
    """A, then B, then A again had answered success and left B: the receipt of the first A was
    replayed though the file no longer held it (§7.2 step 3)."""
    _write(bundle)
    (bundle / "notes/new.md").write_text("---\ntype: Note\n---\nhand edit\n")
    _write(bundle)
    assert (bundle / "notes/new.md").read_text().endswith("# New\n\nText.\n")
    _write(bundle, body="# New\n\nText 2.\n")
    _write(bundle)
    assert (bundle / "notes/new.md").read_text().endswith("# New\n\nText.\n")
    (bundle / "notes/new.md").unlink()
    _write(bundle)
    assert (bundle / "notes/new.md").read_text().endswith("# New\n\nText.\n")


@pytest.mark.parametrize("frontmatter", ["title: no type\n", "type: 123\n"])
def test_concept_without_valid_type_is_rejected_without_writing(bundle, frontmatter):
    before = tree_bytes(bundle)
    with pytest.raises(ToolError) as err:
        _write(bundle, frontmatter=frontmatter)
    assert err.value.code == "operation_rejected"
    assert json.loads(err.value.text)["status"] == "rejected"
    assert tree_bytes(bundle) == before


def test_invalid_yaml_is_invalid_request_with_recovery_step(bundle):
    with pytest.raises(ToolError) as err:
        _write(bundle, frontmatter="type: [oops\n")
    assert err.value.code == "invalid_request"
    assert err.value.diagnostics[0]["field"] == "frontmatter"


@pytest.mark.parametrize("concept_id", ["../x", "index", "a/log", "x.md", ".hidden", "a:b"])
def test_reserved_or_escaping_ids_are_invalid_request(bundle, concept_id):
    before = tree_bytes(bundle)
    with pytest.raises(ToolError) as err:
        _write(bundle, concept_id=concept_id)
    assert err.value.code == "invalid_request"
    assert tree_bytes(bundle) == before


def test_oversized_frontmatter_is_resource_limit(bundle):
    args = unchecked_args("write_concept", bundle_path=str(bundle), concept_id="notes/new",
                          frontmatter="type: Note\nx: " + "a" * (1 << 20) + "\n", body="")
    with pytest.raises(ToolError) as err:
        write_tools.write_concept(args, CallContext())
    assert err.value.code == "resource_limit"


def test_write_through_symlinked_directory_is_refused(bundle, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (bundle / "linked").symlink_to(outside)
    with pytest.raises(ToolError):
        _write(bundle, concept_id="linked/x")
    assert list(outside.iterdir()) == []


def test_delimiter_inside_frontmatter_is_invalid_request(bundle):
    before = tree_bytes(bundle)
    with pytest.raises(ToolError) as err:
        _write(bundle, frontmatter="type: Note\n---\ntitle: smuggled\n")
    assert err.value.code == "invalid_request"
    assert tree_bytes(bundle) == before
