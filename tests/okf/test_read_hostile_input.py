"""Hostile bundle paths and contents: exact codes and messages, never a crash or an escape."""

from __future__ import annotations

import os

import pytest

from knowspec.impl.errors import ToolError
from knowspec.impl.okf.bundle import snapshot as snap
from knowspec.impl.okf.parsing.frontmatter import FrontmatterError, YamlLimitError, load_yaml_mapping
from okf_helpers import list_concepts, read_concept, validate, write_bundle
from time_guard import within

CONCEPT = "---\ntype: Note\n---\nbody\n"


def _error(call) -> ToolError:
    with pytest.raises(ToolError) as exc:
        call()
    return exc.value


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (" /tmp", "bundle_path must not contain surrounding whitespace"),
        ("relative/kb", "bundle_path must be absolute"),
        ("/tmp/../tmp", "bundle_path must be clean"),
        ("/tmp/", "bundle_path must be clean"),
        ("/tmp//x", "bundle_path must be clean"),
    ],
)
def test_bundle_path_rules_in_order(path, message):
    err = _error(lambda: list_concepts(path))
    assert (err.code, err.message) == ("invalid_request", message)


def test_symlink_root_is_rejected(tmp_path):
    real = write_bundle(tmp_path / "real", {"a.md": CONCEPT})
    os.symlink(real, tmp_path / "link")
    err = _error(lambda: list_concepts(os.path.realpath(tmp_path) + "/link"))
    assert (err.code, err.message) == ("invalid_request", "bundle_path must not be a symlink")


def test_symlink_ancestor_is_rejected(tmp_path):
    write_bundle(tmp_path / "real" / "kb", {"a.md": CONCEPT})
    os.symlink(tmp_path / "real", tmp_path / "alias")
    err = _error(lambda: list_concepts(os.path.realpath(tmp_path) + "/alias/kb"))
    assert (err.code, err.message) == ("invalid_request", "bundle_path must not contain a symlink")


def test_file_root_is_not_a_directory(tmp_path):
    kb = write_bundle(tmp_path / "kb", {"a.md": CONCEPT})
    err = _error(lambda: list_concepts(str(kb / "a.md")))
    assert (err.code, err.message) == ("invalid_request", "bundle_path must be a directory")


def test_missing_root_is_redacted(tmp_path):
    err = _error(lambda: list_concepts(os.path.realpath(tmp_path) + "/nope"))
    assert err.code == "invalid_request"
    assert "/" not in err.message


def test_symlink_escape_inside_tree_is_ignored(tmp_path):
    outside = write_bundle(tmp_path / "outside", {"secret.md": "---\ntype: Secret\n---\nTOP SECRET\n"})
    kb = write_bundle(tmp_path / "kb", {"a.md": "---\ntype: Note\n---\n[s](secret.md) [d](dir/secret.md)\n"})
    os.symlink(outside / "secret.md", kb / "secret.md")
    os.symlink(outside, kb / "dir")
    ids = [c["id"] for c in list_concepts(kb).structured["concepts"]]
    assert ids == ["a"]
    err = _error(lambda: read_concept(kb, "secret"))
    assert err.code == "concept_not_found"
    broken = [d["message"] for d in validate(kb, check_links=True).structured["diagnostics"]]
    assert broken == ['broken link to "secret.md" (target not found)', 'broken link to "dir/secret.md" (target not found)']


def test_invalid_utf8_file_is_a_parse_error(tmp_path):
    kb = write_bundle(tmp_path / "kb", {"bad.md": b"---\ntype: \xff\n---\n"})
    err = _error(lambda: list_concepts(kb))
    assert err.code == "operation_rejected"
    assert err.diagnostics[0]["code"] == "invalid_encoding"
    (d,) = validate(kb).structured["diagnostics"]
    assert d["message"] == "unparseable concept document: invalid encoding: invalid UTF-8"


def test_yaml_alias_bomb_is_resource_limit(tmp_path):
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 10) + "]")
    kb = write_bundle(tmp_path / "kb", {"bomb.md": "---\ntype: T\n" + "\n".join(lines) + "\n---\n"})
    err = _error(lambda: list_concepts(kb))
    assert (err.code, err.message) == ("resource_limit", "bundle exceeds MCP resource limits")
    assert _error(lambda: validate(kb)).code == "resource_limit"


RECURSIVE_ALIASES = ["tags: &a [*a]", "a: &a {b: *a}", "a: &a [x, [y, *a]]", "a: &a {b: [c, {d: *a}]}",
                     "a: [&a [*a], *a]"]


@pytest.mark.parametrize("yaml_text", RECURSIVE_ALIASES)
def test_a_recursive_alias_is_refused_as_a_cycle_at_once(yaml_text):
    with within(5), pytest.raises(YamlLimitError, match="YAML graph contains a cycle"):
        load_yaml_mapping("type: T\n" + yaml_text + "\n")


@pytest.mark.parametrize("yaml_text", RECURSIVE_ALIASES)
def test_a_bundle_file_with_a_recursive_alias_is_resource_limit(tmp_path, yaml_text):
    kb = write_bundle(tmp_path / "kb", {"bomb.md": f"---\ntype: T\n{yaml_text}\n---\n# Bomb\n", "a.md": CONCEPT})
    with within(10):
        err = _error(lambda: list_concepts(kb))
    assert (err.code, err.message) == ("resource_limit", "bundle exceeds MCP resource limits")


def test_an_alias_used_twice_without_a_cycle_loads():
    loaded = load_yaml_mapping("type: T\nbase: &b [x, y]\nboth: [*b, *b]\n")
    assert loaded["both"] == [["x", "y"], ["x", "y"]]


def test_yaml_deep_nesting_is_resource_limit(tmp_path):
    kb = write_bundle(tmp_path / "kb", {"deep.md": "---\ntype: T\nx: " + "[" * 70 + "]" * 70 + "\n---\n"})
    assert _error(lambda: list_concepts(kb)).code == "resource_limit"


def test_yaml_nesting_at_the_limit_loads(tmp_path):
    kb = write_bundle(tmp_path / "kb", {"ok.md": "---\ntype: T\nx: " + "[" * 60 + "]" * 60 + "\n---\n"})
    assert [c["id"] for c in list_concepts(kb).structured["concepts"]] == ["ok"]


def test_10001_files_is_resource_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(snap, "MAX_FILES", 3)
    kb = write_bundle(tmp_path / "kb", {f"f{i}.txt": "x" for i in range(4)})
    err = _error(lambda: list_concepts(kb))
    assert (err.code, err.message) == ("resource_limit", "bundle exceeds MCP resource limits")


@pytest.mark.slow
def test_10001_real_files_is_resource_limit(tmp_path):
    root = tmp_path / "kb"
    root.mkdir()
    for i in range(10_001):
        (root / f"f{i:05d}.txt").write_bytes(b"")
    err = _error(lambda: list_concepts(os.path.realpath(root)))
    assert err.code == "resource_limit"


def test_file_over_16_mib_is_resource_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(snap, "MAX_FILE_BYTES", 10)
    kb = write_bundle(tmp_path / "kb", {"big.txt": "x" * 11})
    assert _error(lambda: list_concepts(kb)).code == "resource_limit"


def test_total_bytes_over_limit_is_resource_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(snap, "MAX_TOTAL_BYTES", 15)
    kb = write_bundle(tmp_path / "kb", {"a.txt": "x" * 8, "b.txt": "x" * 8})
    assert _error(lambda: list_concepts(kb)).code == "resource_limit"


def test_depth_over_64_is_resource_limit(tmp_path):
    kb = write_bundle(tmp_path / "kb", {"/".join(["d"] * 65) + "/a.md": CONCEPT})
    assert _error(lambda: list_concepts(kb)).code == "resource_limit"


def test_transaction_crash_evidence_fails_the_load(tmp_path):
    kb = write_bundle(tmp_path / "kb", {"a.md": CONCEPT, "sub/.OKF-index-txn-1/x": "x"})
    assert _error(lambda: list_concepts(kb)).code == "invalid_request"


def test_root_okf_is_excluded_but_nested_okf_and_hidden_files_are_captured(tmp_path):
    kb = write_bundle(tmp_path / "kb", {".okf/x.md": CONCEPT, "sub/.okf/y.md": CONCEPT, ".h.md": CONCEPT})
    ids = [c["id"] for c in list_concepts(kb).structured["concepts"]]
    assert ids == [".h", "sub/.okf/y"]


def test_cancelled_call_fails_without_partial_result(tmp_path):
    from knowspec.impl.context import CallContext
    from knowspec.impl.okf.tools import read as read_tools
    from okf_helpers import list_args

    kb = write_bundle(tmp_path / "kb", {"a.md": CONCEPT})
    ctx = CallContext()
    ctx.cancel_event.set()
    with pytest.raises(ToolError) as exc:
        read_tools.list_concepts(list_args(kb), ctx)
    assert (exc.value.code, exc.value.retryable) == ("operation_cancelled", True)


def test_captured_path_over_4096_bytes_is_resource_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(snap, "MAX_PATH_BYTES", 12)
    kb = write_bundle(tmp_path / "kb", {"short.md": CONCEPT, "much-longer.md": CONCEPT})
    err = _error(lambda: list_concepts(kb))
    assert (err.code, err.message) == ("resource_limit", "bundle exceeds MCP resource limits")


def test_real_4097_byte_captured_path_is_resource_limit(tmp_path):
    segment = "s" * 200
    rel = "/".join([segment] * 20) + "/" + "x" * 96 + ".md"  # 20*201 + 99 = 4119 bytes
    kb = write_bundle(tmp_path / "kb", {})
    fd = os.open(kb, os.O_RDONLY | os.O_DIRECTORY)
    try:  # the absolute path exceeds PATH_MAX, so build it through directory descriptors
        for part in rel.split("/")[:-1]:
            os.mkdir(part, dir_fd=fd)
            child = os.open(part, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        leaf = os.open(rel.rsplit("/", 1)[1], os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(leaf, CONCEPT.encode())
        os.close(leaf)
    finally:
        os.close(fd)
    assert len(rel.encode()) > 4096
    err = _error(lambda: list_concepts(kb))
    assert (err.code, err.message) == ("resource_limit", "bundle exceeds MCP resource limits")


# -- regular expressions that once backtracked without end -----------------------------------------

@pytest.mark.parametrize("items", [22, 60, 2000])
def test_a_flow_sequence_without_its_bracket_is_refused_at_once(items):
    """Items and separators may both end in spaces: with backtracking each comma doubled the ways
    tried (22 items, a 105-byte line, held the whole server for minutes)."""
    text = "type: Note\nk: [" + "a  ," * items + "a\n"
    with within(5), pytest.raises(FrontmatterError):
        load_yaml_mapping(text)


def test_a_bundle_holding_such_a_line_lists_at_once(tmp_path):
    bundle = write_bundle(tmp_path / "kb", {"ok.md": CONCEPT,
                                           "evil.md": "---\ntype: Note\nk: [" + "a  ," * 40 + "a\n---\nbody\n"})
    with within(10):
        error = _error(lambda: list_concepts(str(bundle)))
    assert error.code == "operation_rejected"  # the parse-error envelope names evil.md
