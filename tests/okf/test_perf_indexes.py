"""Incremental per-snapshot indexes answer exactly like a from-scratch build, after any edit."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from knowspec.impl.okf.graph import neighbors as nb
from knowspec.impl.okf.search import concepts as sc
from knowspec.impl.okf.search import concepts_index as sci
from knowspec.impl.okf.bundle.captured_files import FileRecord
from knowspec.impl.okf.model import load_snapshot
from knowspec.impl.rules.text import case_fold
from okf_helpers import OWN_FIXTURES, ctx, write_bundle
from optional_data import UPSTREAM_FIXTURES, cases

QUERIES = ["a", "b", "note", "é", "ab", "ss", "x y", "title", "[", "\x00"]


def reference(snapshot, query: str, limit: int = 100):
    entries = [(cid, sc.SearchableConcept.of(cid, c.title or "", c.description or "", c.tags, c.body))
               for cid, c in snapshot.concepts.items()]
    return sc.search(entries, case_fold(query), limit)


def _doc(title: str, body: str, tags=()) -> str:
    tag_text = "".join(f"\n  - {t}" for t in tags)
    return f"---\ntype: Note\ntitle: \"{title}\"\ntags:{tag_text or ' []'}\n---\n{body}\n"


def test_edited_concept_is_refolded_and_only_it(tmp_path, monkeypatch):
    kb = write_bundle(tmp_path / "kb", {f"c{i}.md": _doc(f"T{i}", f"body {i}") for i in range(6)})
    sci.index_for_snapshot(load_snapshot(str(kb), ctx()))
    calls = []
    real = sci._small_of
    monkeypatch.setattr(sci, "_small_of", lambda entries: calls.extend(cid for cid, _ in entries) or real(entries))
    (kb / "c3.md").write_text(_doc("T3", "Changed Needle"))
    snapshot = load_snapshot(str(kb), ctx())
    index = sci.index_for_snapshot(snapshot)
    assert calls == ["c3"]
    assert index.search(case_fold("needle"), 10).hits == [("c3", "body")]
    assert index.search(case_fold("body"), 10) == reference(snapshot, "body", 10)


def test_ascii_and_non_ascii_bodies_are_both_searched():
    entries = [("a", sc.SearchableConcept.of("a", "", "", [], "plain ascii words")),
               ("b", sc.SearchableConcept.of("b", "", "", [], "Straße café und ascii"))]
    index = sci.ConceptSearchIndex(entries)
    assert list(index.bodies) == [b"plain ascii words", "strasse café und ascii".encode()]  # UTF-8, one copy
    assert index.search(case_fold("ASCII"), 10).hits == [("a", "body"), ("b", "body")]
    assert index.search(case_fold("STRASSE CAFÉ"), 10).hits == [("b", "body")]


def test_a_snapshot_index_keeps_every_folded_body_so_a_query_reads_no_file(tmp_path, monkeypatch):
    kb = write_bundle(tmp_path / "kb", {"c0.md": _doc("T0", "Plain ASCII Body words"),
                                        "c1.md": _doc("T1", "Die Straße Weg"),
                                        "c2.md": _doc("T2", "Un Café Noir")})
    snapshot = load_snapshot(str(kb), ctx())
    index = sci.index_for_snapshot(snapshot)
    # c1 folds ß to ss; c0 and c2 fold to their own bytes with ASCII letters lowered
    assert list(index.bodies) == [b"plain ascii body words", "die strasse weg".encode(), "un café noir".encode()]
    assert index.bodies.on_disk  # in a temporary file: only their offsets count in the cache's size
    assert index.nbytes_by_part()["bodies"] == index.bodies.offsets.itemsize * len(index.bodies.offsets)
    expected = {query: reference(snapshot, query, 10) for query in ("ascii body", "café  noir")}
    monkeypatch.setattr(FileRecord, "read", lambda record: pytest.fail(f"{record.path} read by a query"))
    for query, answer in expected.items():
        assert index.search(case_fold(query), 10) == answer
    for query in ("STRASSE WEG", "Straße weg", "body words"):
        assert index.search(case_fold(query), 10).total == 1
    assert index.search(case_fold("CAFÉ NOIR"), 10).hits == [("c2", "body")]


bodies = st.text(alphabet="abxyéß\u0301 [\x00", max_size=30)
edits = st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["write", "remove"]), bodies, bodies), max_size=6)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(edits, min_size=1, max_size=3))
def test_incremental_search_index_equals_reference_after_random_edits(rounds):
    _index_follows_edits(rounds)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(edits, min_size=1, max_size=3))
def test_an_index_whose_postings_the_helper_builds_equals_reference_after_random_edits(rounds):
    """The helper gets fresh rows' bodies as they are folded and carried rows' after them."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sci, "HELPER_MIN_ROWS", 0)
        patch.setattr(sci, "BODIES_PER_MESSAGE", 2)  # messages of fresh and carried rows mixed
        _index_follows_edits(rounds)


def _index_follows_edits(rounds):
    with tempfile.TemporaryDirectory() as tmp:
        kb = write_bundle(Path(tmp) / "kb", {"c0.md": _doc("start", "ab")})
        for round_edits in rounds:
            for n, op, title, body in round_edits:
                path = kb / f"c{n}.md"
                if op == "write":
                    path.write_text(_doc(title.replace("\x00", "").replace('"', ""), body, tags=[f"t{n}"]))
                elif path.exists():
                    path.unlink()
            snapshot = load_snapshot(str(kb), ctx())
            if snapshot.parse_errors:
                continue
            index = sci.index_for_snapshot(snapshot)
            for q in QUERIES:
                assert index.search(case_fold(q), 3) == reference(snapshot, q, 3)


def reference_edges(snapshot) -> nb.EdgeIndex:
    """The navigation/relation walk through the model's public API (independent of the builder)."""
    edges = []
    for cid in snapshot.concepts:
        for nav in snapshot.navigation(cid):
            if nav.exists:
                edges.append(nb.Edge("navigation", cid, nav.link.target_id, None, cid, nav.link.target_id))
        for rel in snapshot.relations(cid):
            if rel.target_exists:
                r = rel.relation
                edges.append(nb.Edge("relation", r.from_ref, r.to_ref, r.relation_type, cid, r.target_id))
    return nb.EdgeIndex.of(edges)


def _edges(index: nb.EdgeIndex):
    return ({k: index.leaving(k) for k, v in index.outgoing.items() if v},
            {k: index.entering(k) for k, v in index.incoming.items() if v})


def _assert_edge_index_matches_walk(root):
    for bundle in sorted(p for p in root.rglob("*") if p.is_dir() and (p / "index.md").exists()):
        try:
            snapshot = load_snapshot(str(bundle), ctx())
        except Exception:
            continue
        if snapshot.parse_errors:
            continue
        assert _edges(nb.edge_index_for(snapshot)) == _edges(reference_edges(snapshot))


def test_edge_index_matches_the_navigation_walk_on_own_fixtures():
    _assert_edge_index_matches_walk(OWN_FIXTURES)


@pytest.mark.upstream_fixtures
@pytest.mark.parametrize("fixture", cases(sorted(p.name for p in UPSTREAM_FIXTURES.iterdir())
                                          if UPSTREAM_FIXTURES.is_dir() else []))
def test_edge_index_matches_the_navigation_walk_on_upstream_fixtures(fixture):
    _assert_edge_index_matches_walk(UPSTREAM_FIXTURES / fixture)


def test_edge_index_follows_an_added_target(tmp_path):
    kb = write_bundle(tmp_path / "kb", {"a.md": "---\ntype: N\n---\n[b](b.md) [c](c.md)\n",
                                         "b.md": "---\ntype: N\nrelations:\n  uses:\n    - target: a\n---\n"})
    first = nb.edge_index_for(load_snapshot(str(kb), ctx()))
    assert [e.target for e in first.leaving("a")] == ["b"]
    (kb / "c.md").write_text("---\ntype: N\n---\n")
    snapshot = load_snapshot(str(kb), ctx())
    second = nb.edge_index_for(snapshot)
    assert [e.target for e in second.leaving("a")] == ["b", "c"]
    assert [(e.kind, e.target) for e in second.leaving("b")] == [("relation", "a")]
    assert _edges(second) == _edges(reference_edges(snapshot))


NAMES = ["a", "b", "sub/c", "sub/d"]
links = st.lists(st.tuples(st.sampled_from(["nav", "rel"]), st.sampled_from(NAMES + ["gone"]),
                           st.sampled_from([None, "sec", "other"])), max_size=5)


def _linked_doc(name: str, out) -> str:
    rels = [f"    - target: {t}{'#' + f if f else ''}" for kind, t, f in out if kind == "rel"]
    nav = " ".join(f"[x](/{t}.md{'#' + f if f else ''})" for kind, t, f in out if kind == "nav")
    front = "type: N\nparts:\n  - id: sec\n" + ("relations:\n  uses:\n" + "\n".join(rels) + "\n" if rels else "")
    return f"---\n{front}---\n# {name}\n\n{nav}\n"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(NAMES), links, min_size=1))
def test_edge_index_matches_the_navigation_walk_on_random_bundles(graph):
    with tempfile.TemporaryDirectory() as tmp:
        kb = write_bundle(Path(tmp) / "kb", {f"{n}.md": _linked_doc(n, out) for n, out in graph.items()})
        snapshot = load_snapshot(str(kb), ctx())
        assert not snapshot.parse_errors
        assert _edges(nb.edge_index_for(snapshot)) == _edges(reference_edges(snapshot))


concept_ids = st.text(alphabet="aAbé/_\U0001f600", min_size=1, max_size=6)
short_texts = st.text(alphabet="abé [ß", max_size=12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(concept_ids, short_texts, short_texts, short_texts), max_size=12, unique_by=lambda e: e[0]),
       st.sampled_from(QUERIES), st.integers(0, 5))
def test_index_page_equals_the_reference_scan_in_any_row_order(rows, query, limit):
    """The index orders only the hits its page shows (by row number when the rows follow the ID
    byte order, else through ``position``): same page, total and truncation as the full sort."""
    entries = [(cid, sc.SearchableConcept.of(cid, title, "", [tag] if tag else [], body))
               for cid, title, tag, body in rows]
    folded = case_fold(query)
    expected = sc.search(entries, folded, limit)
    assert sci.ConceptSearchIndex(entries).search(folded, limit) == expected
    in_order = sorted(entries, key=lambda e: e[0].encode())
    assert sci.ConceptSearchIndex(in_order).search(folded, limit) == expected


def test_body_signatures_wait_for_a_query_that_narrows_with_them(tmp_path):
    from knowspec.impl.okf.search import boundary_signing

    kb = write_bundle(tmp_path / "kb", {f"c{i}.md": _doc(f"T{i}", f"sql warehouse {i} Café") for i in range(5)})
    snapshot = load_snapshot(str(kb), ctx())
    index = sci.index_for_snapshot(snapshot)
    assert index.search(case_fold("warehouse"), 10) == reference(snapshot, "warehouse", 10)
    assert not index.boundaries_made()
    assert index.search(case_fold("sql warehouse 3"), 10) == reference(snapshot, "sql warehouse 3", 10)
    assert index.boundaries_made()
    (kb / "c2.md").write_text(_doc("T2", "changed sql  warehouse"))
    snapshot = load_snapshot(str(kb), ctx())
    rebuilt = sci.index_for_snapshot(snapshot)
    assert rebuilt.boundaries_made()  # the changed row signed at once, in process, the others copied
    full = boundary_signing.sign([rebuilt.bodies[row] for row in range(len(rebuilt.ids))])
    assert rebuilt.signatures() == full
    assert rebuilt.search(case_fold("sql  warehouse"), 10) == reference(snapshot, "sql  warehouse", 10)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from("aZ 9-\x00ßİéﬁ\u0301Σς_"), max_size=6), max_size=8))
def test_fields_folded_together_equal_each_folded_alone(values):
    assert sci._folded_utf8(values) == [case_fold(v).encode() for v in values]


field_texts = st.text(alphabet=st.sampled_from("ab é\x00ß"), max_size=5)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(concept_ids, field_texts, field_texts, st.lists(field_texts, max_size=3)), max_size=10,
                unique_by=lambda e: e[0]))
def test_row_fields_cut_from_the_blobs_are_the_folded_fields_each_row_was_built_from(rows):
    entries = [(cid, sc.SearchableConcept.of(cid, title, description, tags, "body"))
               for cid, title, description, tags in rows]
    index = sci.ConceptSearchIndex(entries)
    assert [index.row_fields(row) for row in range(len(entries))] == [sci._small(f) for _, f in entries]
