"""Writes cost the change: the staged validation kept per document, and the revision kept per
file, give exactly what the full validation and the full hash give."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st

from knowspec.impl.okf.model import Snapshot, document_for
from knowspec.impl.okf.validation.diagnostics import validate_snapshot
from knowspec.impl.okf.validation.incremental import DocumentFindings, Options
from knowspec.impl.okf.write.document import DocumentError, split_document
from knowspec.impl.okf.write.patch import PatchRejected, apply_concept_operation
from knowspec.impl.okf.write.planner import staged_validation
from knowspec.impl.okf.write.revision import RevisionIndex, revision_of
from knowspec.impl.okf.write.yaml_text import YamlRejected


def uncancelled() -> None:
    """A call nobody cancels."""



class _Ctx:
    def check_cancelled(self, operation: str = "") -> None:
        return None


INDEXES = [
    '---\nokf_version: "0.2"\n---\n# Index\n\n- [A](a.md) - Alpha\n- [B](b.md) - Beta\n',
    '---\nokf_version: "0.1"\n---\n# Index\n\n- [A](a.md) - Alpha\n- [C](z/c.md) - Gamma\n',
    "# Index\n\n- [A](a.md) - Other words\n",
    "---\nokf_version: 2\n---\n# Index\n",
    "---\nokf_version: [\n---\n",
    None,
]
CONCEPTS = [
    "---\ntype: Note\ntitle: A\ndescription: Alpha\nstatus: draft\n---\n# A\n\nText.\n",
    "---\ntype: Note\ndescription: Beta\ntags: [x, 3]\nstatus: sideways\nstale_after: soon\n---\nBody\n",
    "---\ntitle: no type\n---\nx\n",
    "no frontmatter at all\n",
    "---\ntype: [\n---\nbroken yaml\n",
    "---\ntype: Note\nsources:\n  - id: s\n    resource: https://s\n  - id: s\n---\nSee [^s] and [^t].\n\n[^s]: S.\n",
    "---\ntype: Attested Computation\ndescription: Gamma\nruntime: 3\n---\n# Computation\n\n```\nx\n```\n",
    "---\ntype: Note\ntimestamp: yesterday\nresource: 7\n---\n# Examples\n\nnothing here\n\n# Citations\n\n[2] x\n",
    "---\ntype: Note\ngenerated:\n  by: nobody\n  at: later\nverified: []\n---\nx\n",
]
LOG = "# Log\n\n## 2026-01-02\n\n- did a thing\n\n## 2026-01-03\n\n- later\n"
PATHS = ["a.md", "b.md", "z/c.md", "z/d.md"]
OPERATIONS = [
    {"kind": "set_lifecycle", "lifecycle": {"status": "stable", "stale_after": "2031-01-01"}},
    {"kind": "set_lifecycle", "lifecycle": {"status": "deprecated", "stale_after": None}},
    {"kind": "set_generated", "generated": {"by": "process:p", "at": "2026-07-02T10:00:00Z"}},
    {"kind": "put_source", "source": {"id": "s", "resource": "https://s"}},
]


@st.composite
def bundles(draw) -> dict[str, bytes]:
    files = {p: CONCEPTS[draw(st.integers(0, len(CONCEPTS) - 1))] for p in
             draw(st.lists(st.sampled_from(PATHS), min_size=1, max_size=4, unique=True))}
    index = INDEXES[draw(st.integers(0, len(INDEXES) - 1))]
    if index is not None:
        files["index.md"] = index
    if draw(st.booleans()):
        files["z/index.md"] = "# Z\n\n- [C](c.md)\n" if draw(st.booleans()) else "---\nx: 1\n---\n"
    if draw(st.booleans()):
        files["log.md"] = LOG if draw(st.booleans()) else "## 2026-01-02\n\ntext\n"
    return {p: t.encode() for p, t in files.items()}


@st.composite
def single_concept_patches(draw, files: dict[str, bytes]) -> dict[str, bytes] | None:
    """One concept's new bytes: a real patch operation when it applies, else any other text."""
    path = draw(st.sampled_from(sorted(p for p in files if p in PATHS)))
    if draw(st.booleans()):
        op = dict(draw(st.sampled_from(OPERATIONS)), concept_id=path[:-3])
        try:
            return {path: apply_concept_operation(split_document(files[path]), op).render().encode()}
        except (PatchRejected, YamlRejected, DocumentError):
            pass
    return {path: CONCEPTS[draw(st.integers(0, len(CONCEPTS) - 1))].encode()}


def _snapshot(files: dict[str, bytes]) -> Snapshot:
    return Snapshot("", files, {p: document_for(p, b) for p, b in files.items() if p.endswith(".md")})


OPTIONS = st.builds(Options, strict=st.booleans(), selector=st.sampled_from([None, "0.1", "0.2"]),
                    profile=st.sampled_from(["date", "instant"]))
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.data(), bundles(), OPTIONS)
def test_per_document_findings_are_the_full_validation(data, files, options):
    full = validate_snapshot(_snapshot(files), _Ctx(), strict=options.strict, selector=options.selector,
                             profile=options.profile).diagnostics
    assert DocumentFindings.of(_snapshot(files), _Ctx(), options).diagnostics() == full


@SETTINGS
@given(st.data(), bundles(), OPTIONS)
def test_a_single_concept_patch_rechecked_alone_equals_a_full_validation_of_the_staged_bundle(data, files, options):
    writes = data.draw(single_concept_patches(files))
    staged = {**files, **writes}
    full = validate_snapshot(_snapshot(staged), _Ctx(), strict=options.strict, selector=options.selector,
                             profile=options.profile).diagnostics
    incremental = DocumentFindings.of(_snapshot(files), _Ctx(), options).replaced(
        {p: document_for(p, b) for p, b in writes.items()})
    assert incremental is not None
    assert incremental.diagnostics() == full
    assert incremental.errors() == [d for d in full if d["severity"] == "ERROR"]


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.data(), bundles(), st.sampled_from(["date", "instant"]))
def test_the_patch_planners_incremental_answer_is_its_full_answer(runtime, data, files, profile):
    writes = data.draw(single_concept_patches(files))
    staged = {**files, **writes}
    full = staged_validation(files, writes, profile, links=False, check=uncancelled)
    revisions = (revision_of(files), revision_of(staged))
    assert staged_validation(files, writes, profile, links=False, revisions=revisions, check=uncancelled) == full
    assert staged_validation(files, writes, profile, links=False, revisions=revisions, check=uncancelled) == full  # from the cache


def test_a_reserved_file_or_a_new_document_is_not_rechecked_alone():
    files = {"index.md": INDEXES[0].encode(), "a.md": CONCEPTS[0].encode()}
    findings = DocumentFindings.of(_snapshot(files), _Ctx(), Options(strict=True, selector="0.2"))
    assert findings.replaced({"index.md": document_for("index.md", b"# New\n")}) is None
    assert findings.replaced({"new.md": document_for("new.md", CONCEPTS[0].encode())}) is None


def test_a_legacy_index_description_follows_the_patched_concept():
    """The one cross-document rule without links: a legacy index entry's description must
    match its target's, so changing that description re-checks the index."""
    files = {"index.md": INDEXES[1].encode(), "a.md": CONCEPTS[0].encode()}
    options = Options(strict=True, selector="0.1")
    changed = {"a.md": CONCEPTS[0].replace("Alpha", "Omega").encode()}
    found = DocumentFindings.of(_snapshot(files), _Ctx(), options).replaced(
        {p: document_for(p, b) for p, b in changed.items()})
    assert found is not None
    codes = [d["code"] for d in found.diagnostics()]
    assert "index_description_mismatch" in codes
    assert found.diagnostics() == validate_snapshot(_snapshot({**files, **changed}), _Ctx(), strict=True,
                                                    selector="0.1").diagnostics


NAMES = st.sampled_from(["a", "B", "z/é", "z/a", "m-1", "Z", "é", "a/b", "a-b", "a.md"])


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(NAMES, st.binary(max_size=3), max_size=6),
       st.dictionaries(NAMES, st.binary(max_size=3), max_size=3), st.lists(NAMES, max_size=2))
def test_the_revision_index_gives_the_full_hash(files, writes, deletes):
    index = RevisionIndex(files)
    assert index.revision == revision_of(files)
    post = {**files, **writes}
    for path in deletes:
        post.pop(path, None)
    assert index.revision_with(writes, tuple(deletes)) == revision_of(post)
    assert RevisionIndex(post, index).revision == revision_of(post)
    rewritten = {**files, **{p: b for p, b in writes.items() if p in files}}
    assert index.updated(rewritten, frozenset(p for p in writes if p in files)).revision == revision_of(rewritten)


def test_one_edit_hashes_the_bundles_records_once_however_often_its_revision_is_asked(monkeypatch):
    """The preview's plan, the apply's plan, the commit's check and the next capture's index all
    ask for the base with the same file swapped: only the first reads every record."""
    from knowspec.impl import runtime as process
    from knowspec.impl.okf.write import revision

    files = {f"concepts/n{i}.md": f"body {i}".encode() for i in range(40)}
    edited = {"concepts/n7.md": b"body 7, edited"}
    hashed: list[int] = []
    real_hash = revision._hash
    monkeypatch.setattr(revision, "_hash", lambda records, state=None: hashed.append(len(records))
                        or real_hash(records, state))
    with process.activated():
        index = RevisionIndex(files)
        assert hashed == [40]
        after = revision_of({**files, **edited})
        assert index.revision_with(edited) == after and index.revision_with(edited) == after
        assert index.updated({**files, **edited}, frozenset(edited)).revision == after
        assert hashed == [40, 40]
        assert index.revision_with({"concepts/n7.md": files["concepts/n7.md"]}) == index.revision  # no change
        assert index.revision_with({"concepts/n7.md": b"other"}) == revision_of({**files, "concepts/n7.md": b"other"})
        assert hashed == [40, 40, 40]


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(NAMES, st.binary(max_size=3), max_size=10),
       st.lists(st.dictionaries(NAMES, st.binary(max_size=3), max_size=3), max_size=3))
def test_revisions_hashed_on_from_kept_block_states_are_the_full_hash(files, edits):
    """Blocks of two records: a step hashes on from the state before its first change, and each
    next index shares the states before its own first change."""
    from unittest import mock

    from knowspec.impl import runtime as process
    from knowspec.impl.okf.write import revision

    with mock.patch.object(revision, "BLOCK", 2), process.activated():
        index = RevisionIndex(files)
        for edit in edits:
            rewrites = {p: b for p, b in edit.items() if p in files}
            post = {**files, **rewrites}
            assert index.revision_with(edit) == revision_of({**files, **edit})
            index, files = index.updated(post, frozenset(rewrites)), post
            assert index.revision == revision_of(files)


def test_an_edit_hashes_the_records_from_its_block_on(monkeypatch):
    from knowspec.impl import runtime as process
    from knowspec.impl.okf.write import revision

    files = {f"concepts/n{i:02d}.md": f"body {i}".encode() for i in range(40)}
    hashed: list[int] = []
    real_hash = revision._hash
    monkeypatch.setattr(revision, "BLOCK", 8)
    monkeypatch.setattr(revision, "_hash", lambda records, state=None: hashed.append(len(records))
                        or real_hash(records, state))
    with process.activated():
        index = RevisionIndex(files)
        edited = {"concepts/n30.md": b"edited"}  # the 31st record: its block starts at the 25th
        assert index.revision_with(edited) == revision_of({**files, **edited})
        assert hashed == [40, 16]
        later = index.updated({**files, **edited}, frozenset(edited))
        again = {"concepts/n35.md": b"edited too"}
        assert later.revision_with(again) == revision_of({**files, **edited, **again})
        assert hashed == [40, 16, 8]
