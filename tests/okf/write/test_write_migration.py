"""v0.1 -> v0.2 migration: source resolution, timestamps, computations, proof binding."""

from __future__ import annotations


import pytest

from knowspec.impl.context import CallContext
from knowspec.impl.errors import ToolError
from knowspec.impl.okf.tools import write as write_tools
from write_helpers import assert_valid_output, make_bundle, tree_bytes, visible_bytes
from tool_args import tool_args

INDEX_01 = '---\nokf_version: "0.1"\n---\n# Index\n\n- [A](a.md)\n'
A = "---\ntype: Note\ntitle: A  # keep\ntimestamp: 2026-01-02T03:04:05Z\n---\nBody A\n"
B = "---\ntype: Note\n---\nBody B\n"


def _args(bundle, **kw):
    base = {"bundle_path": str(bundle), "timestamp_policy": "preserve", "citation_mappings": [],
            "generated_by": "human:migrator"}
    base.update(kw)
    tool = "apply_v02_migration" if "expected_source" in kw else "preview_v02_migration"
    return tool_args(tool, **base)


def _preview(bundle, **kw):
    out = write_tools.preview_v02_migration(_args(bundle, **kw), CallContext()).structured
    assert_valid_output("preview_v02_migration", out)
    return out


def _apply(bundle, p, **kw):
    extra = {"expected_source": p["source"]}
    if "proof" in p:
        extra.update(proof=p["proof"], expected_plan_digest=p["plan_digest"])
    extra.update(kw)
    out = write_tools.apply_v02_migration(_args(bundle, **extra), CallContext()).structured
    assert_valid_output("apply_v02_migration", out)
    return out


@pytest.fixture
def legacy(tmp_path):
    return make_bundle(tmp_path / "m", {"index.md": INDEX_01, "a.md": A, "b.md": B})


def test_declared_v01_bundle_migrates_timestamps_and_version(legacy):
    p = _preview(legacy)
    assert p["status"] == "applicable" and p["source"]["resolution_source"] == "declared"
    assert p["affected_paths"] == ["a.md", "index.md"]
    a = _apply(legacy, p)
    assert a["status"] == "applied" and a["changed_paths"] == ["a.md", "index.md"]
    assert (legacy / "a.md").read_text() == A.replace(
        "timestamp: 2026-01-02T03:04:05Z\n",
        'timestamp: 2026-01-02T03:04:05Z\ngenerated:\n  by: human:migrator\n  at: "2026-01-02T03:04:05Z"\n')
    assert (legacy / "index.md").read_text() == INDEX_01.replace('"0.1"', '"0.2"')
    assert (legacy / "b.md").read_text() == B
    assert _apply(legacy, p) == a  # replay after the bundle moved


def test_remove_after_copy_drops_the_legacy_key(legacy):
    p = _preview(legacy, timestamp_policy="remove_after_copy")
    _apply(legacy, p, timestamp_policy="remove_after_copy")
    assert "timestamp:" not in (legacy / "a.md").read_text()


def test_missing_producer_blocks_with_a_manual_action(legacy):
    before = tree_bytes(legacy)
    p = _preview(legacy, generated_by="")
    assert p["status"] == "blocked" and p["plan_digest"] == "" and p["result_revision"] is None
    assert [b["code"] for b in p["blockers"]] == ["missing_generated_by"]
    assert [m["code"] for m in p["manual_actions"]] == ["provide_generated_by"]
    assert tree_bytes(legacy) == before


def test_unmapped_legacy_citations_are_blocked_not_guessed(tmp_path):
    b = make_bundle(tmp_path / "c", {"index.md": INDEX_01, "a.md": B + "\n# Citations\n\n[1] [X](https://x)\n"})
    p = _preview(b)
    assert p["status"] == "blocked"
    assert p["manual_actions"][0]["code"] == "provide_citation_mapping"
    entry = (B + "\n# Citations\n\n").encode()
    assert p["blockers"][0]["location"] == {"start": len(entry), "end": len(entry) + len(b"[1] [X](https://x)")}


def test_undeclared_bundle_with_legacy_evidence_is_probed(tmp_path):
    b = make_bundle(tmp_path / "p", {"a.md": A})
    p = _preview(b)
    assert p["source"]["resolution_source"] == "legacy-probe"
    assert p["source"]["candidates"][0]["kind"] == "timestamp"
    assert p["status"] == "blocked"  # creating a root index without entries fails validation


def test_v02_bundle_is_a_target_noop_without_writing(tmp_path):
    b = make_bundle(tmp_path / "t", {"index.md": '---\nokf_version: "0.2"\n---\n', "b.md": B})
    p = _preview(b)
    assert p["status"] == "noop" and p["plan_digest"] == "" and "proof" not in p
    a = _apply(b, p)
    assert a["status"] == "noop" and a["plan_digest"] == ""
    assert not (b / ".okf").exists()


def test_future_declaration_is_blocked(tmp_path):
    b = make_bundle(tmp_path / "f", {"index.md": '---\nokf_version: "0.9"\n---\n', "b.md": B})
    p = _preview(b)
    assert p["status"] == "blocked" and p["source"]["transition"] == "blocked"
    assert p["blockers"][0]["message"] == "future declaration 0.9 cannot be rewritten as v0.2"


def test_stale_proof_is_a_revision_conflict(legacy):
    p = _preview(legacy)
    (legacy / "b.md").write_text(B + "edited\n")
    before = visible_bytes(legacy)
    with pytest.raises(ToolError) as err:
        _apply(legacy, p)
    assert err.value.code == "revision_conflict"
    assert visible_bytes(legacy) == before


@pytest.mark.parametrize("tamper", ["digest", "proof", "inputs", "selector"])
def test_tampered_binding_is_plan_mismatch(legacy, tamper):
    p = _preview(legacy)
    kw = {}
    if tamper == "digest":
        kw["expected_plan_digest"] = "sha256:" + "0" * 64
    elif tamper == "proof":
        kw["proof"] = dict(p["proof"], result_revision="sha256:" + "1" * 64)
    elif tamper == "inputs":
        kw["generated_by"] = "human:someone-else"
    else:
        kw["from"] = "0.1"
    before = tree_bytes(legacy)
    with pytest.raises(ToolError) as err:
        _apply(legacy, p, **kw)
    assert err.value.code == "plan_mismatch"
    assert tree_bytes(legacy) == before


def test_explicit_computation_is_written_with_its_asset(legacy):
    comp = {"concept_id": "b", "contract": {
        "mode": "file", "runtime": "python", "parameters": [], "computation_path": "calc/q.py",
        "executor": {"resource": "run.py", "receipt": ["out"]}, "attester": {"resource": "att.py"}},
        "asset": {"path": "calc/q.py", "content": "print('inert')\n"}}
    p = _preview(legacy, computations=[comp])
    assert "calc/q.py" in p["affected_paths"]
    _apply(legacy, p, computations=[comp])
    assert (legacy / "calc/q.py").read_text() == "print('inert')\n"
    assert "type: Attested Computation" in (legacy / "b.md").read_text()


@pytest.mark.parametrize("asset_path", ["calc/.okf/journal.json", ".okf/x.py", "calc/.OKF/txn/payload-00000"])
def test_a_computation_asset_may_not_name_a_store_folder(legacy, asset_path):
    """An asset written into a nested `.okf` planted a journal that the next call on that folder
    as a bundle obeyed: writes and deletes outside the bundle."""
    comp = {"concept_id": "b", "contract": {
        "mode": "file", "runtime": "python", "parameters": [], "computation_path": asset_path,
        "executor": {"resource": "run.py", "receipt": ["out"]}, "attester": {"resource": "att.py"}},
        "asset": {"path": asset_path, "content": "{}\n"}}
    before = tree_bytes(legacy)
    with pytest.raises(ToolError) as err:
        _preview(legacy, computations=[comp])
    assert err.value.code == "invalid_request" and "asset.path" in err.value.message
    assert tree_bytes(legacy) == before


def test_selector_conflicting_with_the_declaration_is_unsupported(legacy):
    with pytest.raises(ToolError) as err:
        _preview(legacy, **{"from": "0.2"})
    assert err.value.code == "unsupported_migration_source"


def test_explicit_v01_selector_on_an_undeclared_bundle(tmp_path):
    b = make_bundle(tmp_path / "e", {"index.md": "---\n---\n# Index\n\n- [A](a.md)\n", "a.md": A})
    p = _preview(b, **{"from": "0.1"})
    assert p["source"]["resolution_source"] == "explicit" and p["source"]["declaration_present"] is False
    assert _apply(b, p, **{"from": "0.1"})["status"] == "applied"


def test_target_noop_apply_refuses_a_bundle_whose_source_changed(tmp_path):
    b = make_bundle(tmp_path / "n", {"index.md": '---\nokf_version: "0.2"\n---\n', "b.md": B})
    p = _preview(b)
    (b / "index.md").write_text('---\nokf_version: "0.1"\n---\n')
    with pytest.raises(ToolError) as err:
        _apply(b, p)
    assert err.value.code == "source_conflict" and err.value.retryable


@pytest.mark.parametrize("policy,expected_at", [("use_generated", "2026-05-05T00:00:00Z"),
                                                ("use_timestamp", "2026-01-02T03:04:05Z")])
def test_generated_at_conflict_follows_the_policy(legacy, policy, expected_at):
    kw = {"generated_at": [{"concept_id": "a", "at": "2026-05-05T00:00:00Z"}], "timestamp_conflict_policy": policy}
    p = _preview(legacy, **kw)
    _apply(legacy, p, **kw)
    assert f'at: "{expected_at}"' in (legacy / "a.md").read_text()


def test_generated_at_conflict_rejects_by_default(legacy):
    p = _preview(legacy, generated_at=[{"concept_id": "a", "at": "2026-05-05T00:00:00Z"}])
    assert p["status"] == "blocked"


def test_documents_without_legacy_timestamps_are_left_byte_identical(tmp_path):
    odd = "---\ntype: Note\nx: &a 1\ny: *a\n---\nodd but untouched\n"
    b = make_bundle(tmp_path / "o", {"index.md": INDEX_01, "a.md": A, "odd.md": odd})
    p = _preview(b)
    assert p["status"] == "applicable" and "odd.md" not in p["affected_paths"]
    _apply(b, p)
    assert (b / "odd.md").read_text() == odd


def test_unparseable_document_blocks_the_migration(tmp_path):
    b = make_bundle(tmp_path / "u", {"index.md": INDEX_01, "a.md": A, "bad.md": "---\ntype: [oops\n---\n"})
    p = _preview(b)
    assert p["status"] == "blocked"
    assert ("migration_document_invalid", "bad.md") in [(x["code"], x["path"]) for x in p["blockers"]]
