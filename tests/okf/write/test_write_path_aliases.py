"""Names a volume takes for one file: the rule, the probe, and the store refusing such commits.

On a case-folding or normalising volume (macOS, Windows) writing concept ``A`` beside ``a`` had
replaced ``a``'s file while the answer reported a new concept. No case-folding volume is made in
these tests (the kernel here has none); the store takes the volume's behaviour as an argument,
and ``KNOWSPEC_CASE_FOLDING_DIR`` names a folder on a real one for the optional end-to-end test.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from knowspec.impl.context import CallContext
from knowspec.impl.errors import ToolError
from knowspec.impl.okf.bundle.paths import pin_root
from knowspec.impl.okf.tools import write as write_tools
from knowspec.impl.okf.write import volume_probe
from knowspec.impl.okf.write.path_aliases import Aliasing, first_alias
from knowspec.impl.okf.write.plan import Plan
from knowspec.impl.okf.write.revision import revision_of
from knowspec.impl.okf.write.store import CommitRequest, InvalidCommit, Store
import case_folding_volume
from tool_args import tool_args
from write_helpers import INDEX, commit_leftovers, make_bundle, visible_bytes

CASE = Aliasing(case=True)
NORMALIZATION = Aliasing(normalization=True)
COMPOSED, DECOMPOSED = "caf\u00e9.md", "cafe\u0301.md"
NOTE = "---\ntype: Note\n---\nx\n"

names = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x24F, blacklist_characters="/"), min_size=1,
                max_size=8)
paths = st.lists(names, min_size=1, max_size=3).map("/".join)


# -- the rule ---------------------------------------------------------------------------------

@given(st.lists(paths, max_size=6), st.lists(paths, max_size=3))
def test_a_volume_that_tells_names_apart_never_aliases(bundle_paths, changed):
    assert first_alias(bundle_paths, changed, Aliasing()) is None


@given(paths.filter(lambda p: p != p.swapcase() and p.casefold() == p.swapcase().casefold()))
def test_a_case_twin_of_a_bundle_path_aliases_on_a_case_folding_volume(path):
    twin = path.swapcase()
    changed, other = first_alias([path], [twin], CASE)
    assert changed != other and CASE.key(changed) == CASE.key(other)
    assert (twin + "/").startswith(changed + "/") and (path + "/").startswith(other + "/")  # the first name that folds
    assert first_alias([path], [twin], NORMALIZATION) is None


def test_composed_and_decomposed_names_alias_on_a_normalising_volume():
    assert first_alias([COMPOSED], [DECOMPOSED], NORMALIZATION) == (DECOMPOSED, COMPOSED)
    assert first_alias([COMPOSED], [DECOMPOSED], CASE) is None
    both = Aliasing(case=True, normalization=True)
    assert first_alias(["CAF\u00c9.md"], [DECOMPOSED], both) == (DECOMPOSED, "CAF\u00c9.md")


def test_a_folder_spelled_another_way_aliases():
    """``Docs/b.md`` would land in ``docs/``: a path the plan never named."""
    assert first_alias(["docs/a.md"], ["Docs/b.md"], CASE) == ("Docs", "docs")


def test_twins_the_commit_does_not_touch_are_not_its_fault():
    assert first_alias(["a.md", "A.md", "b.md"], ["b.md"], CASE) is None
    assert first_alias(["a.md", "A.md"], ["c/A.md"], CASE) is None


def test_two_names_of_one_commit_alias_each_other():
    assert first_alias([], ["A.md", "a.md"], CASE) == ("a.md", "A.md")
    assert first_alias(["a.md"], ["A.md", "a.md"], CASE) == ("a.md", "A.md")  # a move to another spelling


class _Unlooked(list):
    def __iter__(self):
        raise AssertionError("the bundle was looked through")


def test_a_change_to_files_the_bundle_holds_costs_what_it_touches():
    """The volume keeps one spelling of each name, so existing names cannot alias each other."""
    assert first_alias(_Unlooked(["a.md", "d/b.md"]), ["d/b.md", "a.md"], CASE) is None


def test_full_case_folding_is_used():
    assert first_alias(["stra\u00dfe.md"], ["STRASSE.md"], CASE) == ("STRASSE.md", "stra\u00dfe.md")


# -- the probe ----------------------------------------------------------------------------------

def _okf(root: Path) -> int:
    (root / ".okf").mkdir(parents=True, exist_ok=True)
    return os.open(root / ".okf", os.O_RDONLY | os.O_DIRECTORY)


def test_the_probe_finds_this_volume_case_sensitive_and_leaves_nothing(tmp_path):
    fd = _okf(tmp_path)
    try:
        assert volume_probe.probe_aliasing(fd) == Aliasing()
    finally:
        os.close(fd)
    assert os.listdir(tmp_path / ".okf") == []


def test_the_probe_removes_what_a_crashed_probe_left(tmp_path):
    fd = _okf(tmp_path)
    for made, _ in (volume_probe.CASE_PROBE, volume_probe.NORMALIZATION_PROBE):
        (tmp_path / ".okf" / made).write_bytes(b"")
    try:
        volume_probe.probe_aliasing(fd)
    finally:
        os.close(fd)
    assert os.listdir(tmp_path / ".okf") == []


def test_a_foreign_file_under_the_other_spelling_is_not_taken_for_the_probe(tmp_path):
    fd = _okf(tmp_path)
    (tmp_path / ".okf" / volume_probe.CASE_PROBE[1]).write_bytes(b"someone else's")
    try:
        assert volume_probe.probe_aliasing(fd).case is False
    finally:
        os.close(fd)


# -- the store ----------------------------------------------------------------------------------

def _commit(root: Path, writes: dict[str, bytes], deletes: tuple[str, ...] = (), aliasing: Aliasing | None = None):
    files = visible_bytes(root)
    post = {p: b for p, b in files.items() if p not in deletes} | writes
    digest = "sha256:" + "1" * 64
    plan = Plan(digest, revision_of(files), revision_of(post), tuple(writes), writes,
                {p: files.get(p) for p in writes}, tuple(deletes))
    fd, _ = pin_root(str(root))
    try:
        return Store(fd, lease_timeout=0.5, aliasing=aliasing).commit(CommitRequest("cs-1", "k1", digest, plan))
    finally:
        os.close(fd)


@pytest.mark.parametrize(("aliasing", "present", "written"), [
    (CASE, "a.md", "A.md"),
    (NORMALIZATION, COMPOSED, DECOMPOSED),
    (CASE, "docs/a.md", "Docs/b.md"),
])
def test_the_store_refuses_a_write_the_volume_would_put_over_another_file(tmp_path, aliasing, present, written):
    root = make_bundle(tmp_path / "b", {present: NOTE})
    before = visible_bytes(root)
    with pytest.raises(InvalidCommit, match="for one file"):
        _commit(root, {written: b"---\ntype: Note\n---\nother\n"}, aliasing=aliasing)
    assert visible_bytes(root) == before
    assert commit_leftovers(root) == set()  # nothing staged


def test_the_store_refuses_a_move_to_another_spelling_of_the_same_file(tmp_path):
    """Publishing writes ``A.md`` (over ``a.md``), then deletes ``a.md``: the concept was gone."""
    root = make_bundle(tmp_path / "b", {"a.md": NOTE})
    with pytest.raises(InvalidCommit):
        _commit(root, {"A.md": NOTE.encode()}, deletes=("a.md",), aliasing=CASE)
    assert visible_bytes(root) == {"a.md": NOTE.encode()}


def test_the_store_publishes_twins_where_the_volume_tells_them_apart(tmp_path):
    root = make_bundle(tmp_path / "b", {"a.md": NOTE})
    _commit(root, {"A.md": b"---\ntype: Note\n---\nupper\n"})  # probed: this volume
    assert visible_bytes(root) == {"a.md": NOTE.encode(), "A.md": b"---\ntype: Note\n---\nupper\n"}


def test_the_store_publishes_unrelated_writes_on_a_folding_volume(tmp_path):
    root = make_bundle(tmp_path / "b", {"a.md": NOTE})
    _commit(root, {"b.md": NOTE.encode()}, aliasing=Aliasing(case=True, normalization=True))
    assert sorted(visible_bytes(root)) == ["a.md", "b.md"]


# -- the tools ----------------------------------------------------------------------------------

def _write_concept(bundle: Path, concept_id: str) -> dict:
    args = tool_args("write_concept", bundle_path=str(bundle), concept_id=concept_id,
                     frontmatter="type: Note\ntitle: Twin\n", body="twin\n")
    return write_tools.write_concept(args, CallContext()).structured


def test_write_concept_refuses_a_case_twin_on_a_case_folding_volume(bundle, monkeypatch):
    monkeypatch.setattr(volume_probe, "probe_aliasing", lambda _fd: CASE)
    before = visible_bytes(bundle)
    with pytest.raises(ToolError) as err:
        _write_concept(bundle, "Other")
    assert err.value.code == "invalid_request"
    assert "'Other.md' and 'other.md'" in err.value.message
    assert visible_bytes(bundle) == before


def test_write_concept_writes_a_case_twin_where_the_volume_tells_them_apart(bundle):
    """okf-mcp on Linux: ``Other`` and ``other`` are two concepts in two files."""
    assert _write_concept(bundle, "Other")["path"] == "Other.md"
    assert (bundle / "other.md").read_bytes() == NOTE.encode()


@pytest.fixture
def folding_root(tmp_path):
    """A folder on a case-folding, normalising volume: ``KNOWSPEC_CASE_FOLDING_DIR`` when set,
    else a FUSE view mounted for the test (``case_folding_volume``)."""
    given_dir = os.environ.get("KNOWSPEC_CASE_FOLDING_DIR")
    if given_dir:
        yield Path(tempfile.mkdtemp(dir=given_dir))
        return
    why = case_folding_volume.unavailable()
    if why:
        pytest.skip(f"no case-folding volume: {why}, and KNOWSPEC_CASE_FOLDING_DIR is unset")
    with case_folding_volume.mounted(tmp_path / "backing", tmp_path / "volume") as mountpoint:
        yield mountpoint


def test_on_a_case_folding_volume_the_probe_says_so(folding_root):
    fd = _okf(folding_root)
    try:
        assert volume_probe.probe_aliasing(fd) == Aliasing(case=True, normalization=True)
    finally:
        os.close(fd)


def test_on_a_case_folding_volume_a_twin_is_refused_and_the_concept_kept(folding_root):
    root = make_bundle(folding_root / "b", {"index.md": INDEX, "other.md": NOTE})
    assert _write_concept(root, "new")["path"] == "new.md"  # the store works there at all
    before = visible_bytes(root)
    with pytest.raises(ToolError) as err:
        _write_concept(root, "Other")
    assert err.value.code == "invalid_request"
    assert visible_bytes(root) == before
    assert _write_concept(root, "cafe\u0301")["path"] == "cafe\u0301.md"
    with pytest.raises(ToolError):
        _write_concept(root, "caf\u00e9")
    assert sorted(os.listdir(root)) == sorted([".okf", "index.md", "new.md", "other.md", "cafe\u0301.md"])
