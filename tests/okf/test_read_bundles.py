"""Whole bundles: the shipped sample, a foreign producer's bundle, and (optional) the upstream
interoperability fixture and the databricks corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knowspec.impl.okf.model import load_snapshot
from okf_helpers import OWN_FIXTURES, copy_tree, ctx, list_concepts, read_concept, validate, write_bundle
from optional_data import DATABRICKS, UPSTREAM_FIXTURES

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "okf-sample"


def test_sample_bundle_is_conformant_under_every_check():
    out = validate(SAMPLE, strict=True, check_links=True, check_orphans=True).structured
    assert out["diagnostics"] == []
    assert out["version"]["resolution"] == "declared"


def test_sample_bundle_lists_ten_concepts_with_lifecycle_and_trust():
    cards = {c["id"]: c for c in list_concepts(SAMPLE, as_of="2026-07-15").structured["concepts"]}
    assert len(cards) == 10
    assert cards["legacy-exporter"]["status"] == "deprecated" and cards["legacy-exporter"]["stale"] is True
    assert cards["ops/retry-policy"]["trust"] == "human-reviewed"
    assert cards["ops/incident-review"]["trust"] == "machine-confirmed"
    assert cards["computations/revenue-daily"]["computation"]["present"] is True
    assert cards["tables/customers"]["legacy_derived"]["generated"] is True


def test_sample_bundle_relations_resolve_with_fragments():
    snap = load_snapshot(str(SAMPLE), ctx())
    edges = {(e.relation.to_ref, e.target_exists) for e in snap.relations("tables/orders")}
    assert edges == {("tables/customers", True), ("glossary#order-status", True)}


def test_relation_to_escaped_hash_concept(tmp_path):
    kb = write_bundle(tmp_path / "kb", {
        "hash#name.md": "---\ntype: T\n---\n",
        "a.md": "---\ntype: T\nrelations:\n  see_also: [{target: 'hash\\#name'}, {target: 'hash'}]\n---\n",
    })
    snap = load_snapshot(str(kb), ctx())
    assert [(e.relation.to_ref, e.relation.target_id, e.target_exists) for e in snap.relations("a")] == [
        ("hash\\#name", "hash#name", True), ("hash", "hash", False)]


def test_sample_computation_projection():
    comp = read_concept(SAMPLE, "computations/revenue-daily").structured["projection"]["computation"]
    assert comp == {"runtime": "sql", "parameters": [{"name": "day", "type": "date", "required": True}],
                    "computation": "", "executor": {"resource": "https://example.invalid/runner",
                                                    "receipt": ["query_hash", "row_count"]},
                    "attester": {"resource": "https://example.invalid/attester"}}


@pytest.mark.parametrize("profile", ["base", "strict", "strict_orphans"])
def test_foreign_producer_bundle_diagnostics_per_profile(profile, tmp_path):
    manifest = json.loads((OWN_FIXTURES / "interop" / "expected.json").read_text())
    spec = manifest["profiles"][profile]
    kb = copy_tree(OWN_FIXTURES / "interop" / manifest["bundle"], tmp_path / "kb")
    got = validate(kb, strict=spec["strict"], check_orphans=spec["check_orphans"]).structured["diagnostics"]
    assert [(d["code"], d["severity"], d["file"], d["field"]) for d in got] == [
        (d["code"], d["severity"], d["file"], d["field"]) for d in spec["diagnostics"]]


@pytest.mark.upstream_fixtures
@pytest.mark.parametrize("profile", ["base", "strict", "strict_orphans"])
def test_upstream_foreign_bundle_interoperability_profiles(profile, tmp_path):
    manifest = json.loads((UPSTREAM_FIXTURES / "interoperability" / "manifest.json").read_text())
    spec = manifest["profiles"][profile]
    kb = copy_tree(UPSTREAM_FIXTURES / "interoperability" / "foreign-68ce7a0", tmp_path / "kb")
    got = validate(kb, strict=spec["strict"], check_orphans=spec["check_orphans"]).structured["diagnostics"]
    assert sorted((d["code"], d["severity"], d["file"], d["field"]) for d in got) == sorted(
        (d["code"], d["severity"], d["file"], d["field_path"]) for d in spec["diagnostics"])


@pytest.mark.slow
@pytest.mark.corpus
def test_databricks_corpus_loads_and_lists():
    out = list_concepts(DATABRICKS)
    concepts = out.structured["concepts"]
    assert len(concepts) == 5676
    assert [c["id"] for c in concepts] == sorted(c["id"] for c in concepts)
    assert out.structured["version"]["declared"] == "0.1"
    assert all(c["legacy_derived"]["generated"] for c in concepts if c["id"].startswith("concepts/"))
    first = concepts[0]["id"]
    assert read_concept(DATABRICKS, first).structured["id"] == first


@pytest.mark.slow
@pytest.mark.corpus
def test_databricks_navigation_is_mostly_resolved():
    snap = load_snapshot(str(DATABRICKS), ctx())
    edges = [e for cid in snap.concepts for e in snap.navigation(cid)]
    assert len(edges) > 10_000
    assert sum(e.exists for e in edges) / len(edges) > 0.9
