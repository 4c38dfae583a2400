"""Writes follow the bundle limits the operator raised (`serve --max-bundle-files`), as reads do:
a bundle the read side serves can be patched, and one past the raised limit is refused. The
contract's defaults are shrunk by monkeypatching so that no test writes 10,001 files."""

from __future__ import annotations

import os

import pytest

from knowspec.impl.errors import ToolError
from knowspec.impl.okf.bundle import snapshot as snap
from knowspec.impl.okf.write import rootfs
from write_helpers import make_bundle, preview_and_apply

OPS = [{"kind": "set_lifecycle", "concept_id": "c/n0", "lifecycle": {"status": "stable", "stale_after": "2031-01-01"}}]


def _bundle(root, concepts: int):
    files = {"index.md": '---\nokf_version: "0.2"\n---\n# Index\n\n'
                         + "".join(f"- [N{i}](c/n{i}.md)\n" for i in range(concepts))}
    for i in range(concepts):
        files[f"c/n{i}.md"] = f"---\ntype: Note\ntitle: Note {i}\nstatus: draft\n---\nBody {i}\n"
    return make_bundle(root, files)


@pytest.fixture
def small_defaults(monkeypatch):
    monkeypatch.setattr(snap, "MAX_FILES", 3)
    monkeypatch.setattr(rootfs, "MAX_FILES", 3)


def test_a_bundle_past_the_default_file_limit_is_refused(tmp_path, small_defaults, runtime):
    root = _bundle(tmp_path / "kb", 4)
    with pytest.raises(ToolError) as exc:
        preview_and_apply(root, OPS)
    assert exc.value.code == "resource_limit"


def test_a_raised_file_limit_lets_a_larger_bundle_be_patched(tmp_path, small_defaults, runtime, runtime_settings):
    runtime_settings(max_bundle_files=8)
    root = _bundle(tmp_path / "kb", 4)
    _, applied = preview_and_apply(root, OPS)
    assert applied["status"] == "applied"
    assert "status: stable" in (root / "c" / "n0.md").read_text()


def test_the_raised_file_limit_is_still_enforced_on_writes(tmp_path, small_defaults, runtime, runtime_settings):
    runtime_settings(max_bundle_files=4)
    root = _bundle(tmp_path / "kb", 4)  # 5 files with the index
    with pytest.raises(ToolError) as exc:
        preview_and_apply(root, OPS)
    assert exc.value.code == "resource_limit"


def _walk(root) -> dict:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return rootfs.capture_files(fd, strict=True)
    finally:
        os.close(fd)


def test_the_stores_own_walk_follows_the_raised_file_limit(tmp_path, small_defaults, runtime, runtime_settings):
    """The walk the store falls back to (when the read side cannot vouch for the tree)."""
    root = _bundle(tmp_path / "kb", 4)
    with pytest.raises(rootfs.CaptureLimit):
        _walk(root)
    runtime_settings(max_bundle_files=8)
    assert len(_walk(root)) == 5
