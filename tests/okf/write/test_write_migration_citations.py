"""v0.1 -> v0.2 migration of legacy ``# Citations``: the compat fixture bundles round-trip through
preview, apply, ``read_concept`` and strict ``validate_bundle``; unconvertible input blocks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from knowspec.impl.context import CallContext
from knowspec.impl.errors import ToolError
from knowspec.impl.okf.tools import read as read_tools
from knowspec.impl.okf.tools import write as write_tools
from knowspec.impl.okf.graph.v02 import citation_entries
from knowspec.impl.okf.model import load_snapshot
from write_helpers import assert_valid_output, make_bundle, visible_bytes
from tool_args import tool_args, unchecked_args

COMPAT = Path(__file__).resolve().parents[2] / "fixtures" / "okf" / "compat"
INDEX_01 = '---\nokf_version: "0.1"\n---\n# Index\n\n- [A](a.md)\n'
LEGACY = "---\ntype: Note\n---\nClaim one.[1] Claim two.[2] Again.[1]\n\n# Citations\n\n[1] [One](https://one.test/x)\n[2] https://two.test/y\n"


def _copy(name: str, tmp_path: Path) -> Path:
    dest = tmp_path / name
    shutil.copytree(COMPAT / name, dest)
    return dest


def _args(bundle, mappings, **kw):
    base = {"bundle_path": str(bundle), "timestamp_policy": "preserve", "citation_mappings": mappings,
            "generated_by": "human:migrator"}
    base.update(kw)
    tool = "apply_v02_migration" if "expected_source" in kw else "preview_v02_migration"
    return tool_args(tool, **base)


def _preview(bundle, mappings, **kw):
    out = write_tools.preview_v02_migration(_args(bundle, mappings, **kw), CallContext()).structured
    assert_valid_output("preview_v02_migration", out)
    return out


def _apply(bundle, mappings, p, **kw):
    out = write_tools.apply_v02_migration(_args(bundle, mappings, expected_source=p["source"], proof=p["proof"],
                                                expected_plan_digest=p["plan_digest"], **kw), CallContext()).structured
    assert_valid_output("apply_v02_migration", out)
    return out


def _read(bundle, concept_id):
    args = tool_args("read_concept", bundle_path=str(bundle), concept_id=concept_id)
    return read_tools.read_concept(args, CallContext()).structured


def _validate(bundle):
    args = tool_args("validate_bundle", bundle_path=str(bundle), strict=True, check_links=True,
                     check_orphans=True, target_version="0.2")
    return read_tools.validate_bundle(args, CallContext()).structured


def _legacy_view(bundle, concept_id):
    """What the read side's legacy fallback projects: (title, resource) per numbered entry."""
    concept = load_snapshot(str(bundle), CallContext()).concepts[concept_id]
    return [(title, target) for _n, title, target in citation_entries(concept)]


def test_declared_v01_fixture_round_trips_with_the_same_sources(tmp_path):
    bundle = _copy("declared-v01", tmp_path)
    assert _read(bundle, "depot-note")["legacy_fallback"]["sources_from_citations"] is True
    legacy_view = _legacy_view(bundle, "depot-note")
    assert legacy_view == [("Depot opening hours", "https://example.invalid/depots/hours")]
    mappings = [{"path": "depot-note.md", "entries": [{"source_id": "opening-hours", "legacy_number": 1}]}]
    p = _preview(bundle, mappings)
    assert p["status"] == "applicable" and p["affected_paths"] == ["depot-note.md", "index.md"]
    a = _apply(bundle, mappings, p)
    assert a["status"] == "applied" and a["result_revision"] == p["result_revision"]
    after = _read(bundle, "depot-note")
    assert after["legacy_fallback"] == {"generated_from_timestamp": False, "sources_from_citations": False}
    assert [(s["title"], s["resource"]) for s in after["projection"]["sources"]] == legacy_view
    assert [s["id"] for s in after["projection"]["sources"]] == ["opening-hours"]
    refs = after["projection"]["attributions"][0]
    assert refs["normalized_id"] == "opening-hours" and refs["references"] and refs["definitions"]
    report = _validate(bundle)
    assert report["version"]["effective"] == "0.2"
    assert report["conformance"] == {"conformant": True, "errors": 0}
    assert not [d for d in report["diagnostics"] if d["file"] == "depot-note.md"]


def test_undeclared_fixture_needs_a_root_index_to_migrate(tmp_path):
    bundle = _copy("undeclared-v01", tmp_path)
    mappings = [{"path": "observation.md",
                 "entries": [{"source_id": "observed", "legacy_entry": "[1] https://example.test/observation"}]}]
    p = _preview(bundle, mappings)
    assert p["source"]["resolution_source"] == "legacy-probe"
    assert [c["kind"] for c in p["source"]["candidates"]] == ["timestamp", "citations"]
    # The created root index has no heading: a new structural ERROR of the staged bundle.
    assert p["status"] == "blocked" and p["blockers"][0]["code"] == "index_structure_invalid"
    (bundle / "index.md").write_text("# Observations\n\n- [Observation](observation.md)\n")
    p = _preview(bundle, mappings)
    assert p["status"] == "applicable"
    assert _apply(bundle, mappings, p)["status"] == "applied"
    after = _read(bundle, "observation")
    assert [(s["id"], s["title"], s["resource"]) for s in after["projection"]["sources"]] == [
        ("observed", "", "https://example.test/observation")]
    assert (bundle / "observation.md").read_text().endswith(
        "---\n\nUndeclared legacy observation.[^observed]\n\n[^observed]: https://example.test/observation\n")
    assert _validate(bundle)["conformance"]["conformant"] is True


def test_markers_become_keyed_footnotes_and_sources_keep_entry_order(tmp_path):
    bundle = make_bundle(tmp_path / "b", {"index.md": INDEX_01, "a.md": LEGACY})
    mappings = [{"path": "a.md", "entries": [{"source_id": "two", "legacy_number": 2, "title": "Two"},
                                             {"source_id": "one", "legacy_number": 1}]}]
    p = _preview(bundle, mappings)
    _apply(bundle, mappings, p)
    text = (bundle / "a.md").read_text()
    assert text == (
        "---\ntype: Note\nsources:\n  - id: one\n    resource: https://one.test/x\n    title: One\n"
        "  - id: two\n    resource: https://two.test/y\n    title: Two\n---\n"
        "Claim one.[^one] Claim two.[^two] Again.[^one]\n\n"
        "[^one]: [One](https://one.test/x)\n[^two]: [Two](https://two.test/y)\n")
    assert _validate(bundle)["conformance"]["conformant"] is True


def _blocked(tmp_path, body_tail, mappings, name="a.md"):
    bundle = make_bundle(tmp_path / "b", {"index.md": INDEX_01, name: "---\ntype: Note\n---\n" + body_tail})
    before = visible_bytes(bundle)
    p = _preview(bundle, [{"path": name, "entries": mappings}])
    assert p["status"] == "blocked" and visible_bytes(bundle) == before
    return p, ("---\ntype: Note\n---\n" + body_tail).encode()


def test_unknown_content_in_the_section_blocks_at_its_span(tmp_path):
    tail = "x.[1]\n\n# Citations\n\n[1] [A](https://a.test)\nSee also the appendix.\n"
    p, raw = _blocked(tmp_path, tail, [{"source_id": "a", "legacy_number": 1}])
    b = p["blockers"][0]
    assert b["code"] == "unowned_citations_content"
    assert raw[b["location"]["start"]:b["location"]["end"]] == b"See also the appendix."
    assert p["manual_actions"][0]["code"] == "normalize_citations_section"


def test_marker_without_an_entry_blocks_at_the_marker(tmp_path):
    tail = "x.[1] y.[7]\n\n# Citations\n\n[1] [A](https://a.test)\n"
    p, raw = _blocked(tmp_path, tail, [{"source_id": "a", "legacy_number": 1}])
    b = p["blockers"][0]
    assert b["code"] == "unresolved_claim_marker" and raw[b["location"]["start"]:b["location"]["end"]] == b"[7]"


def test_duplicate_numbers_block_with_both_entries_spanned(tmp_path):
    tail = "x.[1]\n\n# Citations\n\n[1] [A](https://a.test)\n[1] [B](https://b.test)\n"
    p, raw = _blocked(tmp_path, tail, [{"source_id": "a", "legacy_number": 1}])
    b = p["blockers"][0]
    assert b["code"] == "duplicate_citation_number"
    assert raw[b["location"]["start"]:b["location"]["end"]] == b"[1] [A](https://a.test)\n[1] [B](https://b.test)"
    assert p["manual_actions"][0]["code"] == "disambiguate_citation_entry"


def test_mapping_metadata_that_contradicts_the_entry_blocks(tmp_path):
    tail = "x.[1]\n\n# Citations\n\n[1] [A](https://a.test)\n"
    p, _ = _blocked(tmp_path, tail, [{"source_id": "a", "legacy_number": 1, "resource": "https://other.test"}])
    assert p["blockers"][0]["code"] == "citation_resource_mismatch"


def test_markers_in_code_are_opaque_and_left_alone(tmp_path):
    bundle = make_bundle(tmp_path / "b", {"index.md": INDEX_01, "a.md":
                                          "---\ntype: Note\n---\nx.[1] `code[1]`\n\n# Citations\n\n[1] [A](https://a.test)\n"})
    mappings = [{"path": "a.md", "entries": [{"source_id": "a", "legacy_number": 1}]}]
    _apply(bundle, mappings, _preview(bundle, mappings))
    assert (bundle / "a.md").read_text().endswith("x.[^a] `code[1]`\n\n[^a]: [A](https://a.test)\n")


def test_concept_with_sources_and_citations_needs_reconciliation(tmp_path):
    bundle = make_bundle(tmp_path / "b", {"index.md": INDEX_01, "a.md":
                                          "---\ntype: Note\nsources:\n  - id: s\n    resource: https://s.test\n---\n"
                                          "x.[1]\n\n# Citations\n\n[1] [A](https://a.test)\n"})
    p = _preview(bundle, [{"path": "a.md", "entries": [{"source_id": "a", "legacy_number": 1}]}])
    assert p["status"] == "blocked" and p["manual_actions"][0]["code"] == "reconcile_sources_and_citations"
    raw = (bundle / "a.md").read_bytes()
    loc = p["blockers"][0]["location"]
    assert raw[loc["start"]:loc["end"]].startswith(b"sources:")


def test_label_collision_blocks_the_preview_and_fails_the_apply(tmp_path):
    bundle = make_bundle(tmp_path / "b", {"index.md": INDEX_01, "a.md": LEGACY})
    mappings = [{"path": "a.md", "entries": [{"source_id": "Src", "legacy_number": 1},
                                             {"source_id": "src", "legacy_number": 2}]}]
    p = _preview(bundle, mappings)
    assert p["status"] == "blocked" and p["blockers"][0]["code"] == "normalized_footnote_label_collision"
    assert p["manual_actions"][0]["code"] == "disambiguate_citation_entry"
    with pytest.raises(ToolError) as err:
        args = unchecked_args("apply_v02_migration", bundle_path=str(bundle), timestamp_policy="preserve",
                              citation_mappings=mappings, generated_by="human:migrator", expected_source=p["source"],
                              proof={}, expected_plan_digest="sha256:" + "0" * 64)
        write_tools.apply_v02_migration(args, CallContext())
    assert err.value.code == "normalized_footnote_label_collision"


@pytest.mark.parametrize("entries", [
    [{"source_id": "a"}],                                                       # no selector
    [{"source_id": "a", "legacy_number": 1}, {"source_id": "b", "legacy_number": 1}],   # duplicate number
    [{"source_id": "a", "legacy_entry": "[1] x"}, {"source_id": "b", "legacy_entry": "[1] x"}],
    [{"source_id": "a", "legacy_number": 1, "title": "A"}, {"source_id": "a", "legacy_number": 2, "title": "B"}],
    [{"source_id": "a", "legacy_entry": "bad\x00entry"}],
])
def test_malformed_mappings_are_invalid_requests(tmp_path, entries):
    bundle = make_bundle(tmp_path / "b", {"index.md": INDEX_01, "a.md": LEGACY})
    with pytest.raises(ToolError) as err:
        write_tools.preview_v02_migration(_args(bundle, [{"path": "a.md", "entries": entries}]), CallContext())
    assert err.value.code == "invalid_request"


def test_timestamp_blockers_point_at_the_legacy_key(tmp_path):
    doc = "---\ntype: Note\ntimestamp: 2026-01-02T03:04:05Z\n---\nx\n"
    bundle = make_bundle(tmp_path / "b", {"index.md": INDEX_01, "a.md": doc})
    p = _preview(bundle, [], generated_by="")
    loc = p["blockers"][0]["location"]
    assert p["blockers"][0]["code"] == "missing_generated_by"
    assert doc.encode()[loc["start"]:loc["end"]] == b"timestamp: 2026-01-02T03:04:05Z"


def test_invalid_utf8_blocker_spans_the_bad_bytes(tmp_path):
    raw = b"---\ntype: Note\n---\nok \xff\xfe here\n"
    bundle = make_bundle(tmp_path / "b", {"index.md": INDEX_01, "a.md": raw})
    p = _preview(bundle, [])
    b = p["blockers"][0]
    assert b["code"] == "invalid_utf8" and raw[b["location"]["start"]:b["location"]["end"]] == b"\xff"
    assert p["manual_actions"][0]["code"] == "repair_invalid_utf8"


def test_mixed_provenance_fixture_is_already_v02_and_stays_byte_identical(tmp_path):
    bundle = _copy("mixed-provenance", tmp_path)
    before = visible_bytes(bundle)
    p = _preview(bundle, [])
    assert p["status"] == "noop" and p["source"]["transition"] == "target-noop"
    out = write_tools.apply_v02_migration(_args(bundle, [], expected_source=p["source"]), CallContext()).structured
    assert out["status"] == "noop" and visible_bytes(bundle) == before


def test_future_version_fixture_is_blocked_at_the_declaration(tmp_path):
    bundle = _copy("future-version", tmp_path)
    p = _preview(bundle, [])
    assert p["status"] == "blocked" and p["blockers"][0]["code"] == "unsupported_migration_source"
