"""The per-tool oracles restate the contracts: staleness boundaries, diffs, folding, pool facts."""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3

import pytest

from hypothesis import given
from hypothesis import strategies as st

from knowspec.conformance.fixtures.model import Bundle, Concept
from knowspec.conformance.fixtures.pools import HELP_ID, load_fixture, write_fixture
from knowspec.conformance.oracles import okf_reads, okf_sections, pools
from knowspec.conformance.oracles.okf_writes import body_of, diff_sides, snapshot
from knowspec.conformance.pool_fixture import fold, generate


def test_date_staleness_flips_on_the_stale_after_day_itself():
    assert [okf_reads.stale_value("2025-03-01", as_of) for as_of, _ in okf_reads.day_boundaries("2025-03-01")] \
        == [False, True, True]


def test_instant_staleness_flips_at_the_same_instant_in_another_offset():
    boundaries = okf_reads.instant_boundaries("2025-01-10T12:00:00+02:00")
    assert boundaries[1][0] == "2025-01-10T10:00:00Z"
    assert [okf_reads.stale_value("2025-01-10T12:00:00+02:00", a, "instant-0b87c52") for a, _ in boundaries] \
        == [False, True, True]


def test_list_concepts_quirk_a_missing_stale_after_is_false_with_as_of_under_the_date_profile():
    assert okf_reads.stale_value("", "2025-01-01") is False
    assert okf_reads.stale_value("", "2025-01-01", tool="search_concepts") is None
    assert okf_reads.stale_value("", None) is None
    assert okf_reads.stale_value("2025-01-10", "2025-01-10T00:00:00Z", "instant-0b87c52") is None


def test_cards_are_sorted_by_id_bytes_not_by_case_folded_text():
    bundle = Bundle("b", (Concept("b"), Concept("Z"), Concept("a"), Concept("é")))
    assert [c["id"] for c in okf_reads.expected_cards(bundle)] == ["Z", "a", "b", "é"]


def test_section_terms_keep_first_occurrence_order_without_repeats():
    assert okf_reads.section_terms("NEEDLE Thread needle") == ["needle", "thread"]


def test_diff_sides_rebuild_both_files_of_a_whole_file_diff():
    diff = '--- a/b.md\n+++ b/b.md\n----\n-type: "Note"\n----\n-\n+---\n+type: "Note"\n+status: stable\n+---\n+\n'
    assert diff_sides(diff) == {"b.md": ('---\ntype: "Note"\n---\n\n', '---\ntype: "Note"\nstatus: stable\n---\n\n')}


def test_body_of_is_the_text_after_the_closing_fence():
    assert body_of("---\ntype: Note\n---\nHello\n\nworld") == "Hello\n\nworld"
    assert body_of("no fence") == "no fence"


def test_snapshot_leaves_hidden_journals_out(tmp_path):
    (tmp_path / "a.md").write_text("x")
    (tmp_path / ".okf").mkdir()
    (tmp_path / ".okf" / "journal").write_text("y")
    assert snapshot(tmp_path) == {"a.md": b"x"}


@given(st.text(alphabet="aıiIİkl", min_size=1, max_size=8))
def test_every_turkish_variant_folds_like_the_word(word):
    assert all(fold(v) == fold(word) for v in pools.turkish_variants(word))


@given(st.integers(0, 2**16), st.from_regex(r"[a-z0-9]{4,16}", fullmatch=True),
       st.from_regex(r"[a-z0-9]{4,16}", fullmatch=True))
def test_two_runs_with_the_same_seed_share_no_invented_word(seed, token, other):
    """An import keeps earlier runs' collections: a search across collections must find this
    run's topics only (a second HTTP run had failed oracle_doc_search on a correct server)."""
    if token == other:
        return
    ours = {fold(t.word) for t in generate(seed, token).topics}
    theirs = {fold(t.word) for t in generate(seed, other).topics}
    assert not any(a.startswith(b) or b.startswith(a) for a in ours for b in theirs)


def test_pool_fixture_written_and_loaded_gives_the_same_facts(tmp_path):
    written = write_fixture(tmp_path, seed=3)
    loaded = load_fixture(tmp_path)
    assert (loaded.docs, loaded.help) == (written.docs, written.help)
    assert json.loads((tmp_path / "fixture.json").read_text())["seed"] == 3
    with sqlite3.connect(tmp_path / "help.db") as con:
        assert con.execute('select id, kind from "doc$collection"').fetchall() == [(HELP_ID, "help")]
        assert con.execute('select count(*) from "doc$topic"').fetchone()[0] == len(written.help.topics)


def test_a_fixture_written_by_another_suite_version_is_refused(tmp_path):
    """Its facts are regenerated from the seed: another version's files would be judged wrong."""
    write_fixture(tmp_path, seed=3)
    manifest = tmp_path / "fixture.json"
    old = {k: v for k, v in json.loads(manifest.read_text()).items() if k != "format"}
    manifest.write_text(json.dumps(old))
    with pytest.raises(ValueError, match="another version of the suite"):
        load_fixture(tmp_path)


def test_restricted_counts_depend_on_the_caller():
    fx = generate(1, "abcd")
    everyone, anonymous = pools.pool_counts(fx, None), pools.pool_counts(fx, frozenset({"*"}))
    assert everyone["topic"] == len(fx.topics) and anonymous["topic"] < everyone["topic"]
    assert anonymous["acl"] < everyone["acl"]


def test_a_fixture_marked_embedded_expects_one_vector_per_visible_topic_and_chunk(tmp_path):
    write_fixture(tmp_path, seed=3)
    assert pools.pool_counts(load_fixture(tmp_path).docs, None)["topic_vec"] == 0
    manifest = tmp_path / "fixture.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "vectors": True}))
    docs = load_fixture(tmp_path).docs
    anonymous = pools.pool_counts(docs, frozenset({"*"}))
    assert (anonymous["topic_vec"], anonymous["chunk_vec"]) == (anonymous["topic"], anonymous["chunk"]) != (0, 0)


def test_help_related_is_ordered_by_confidence_then_slug_and_bounded(tmp_path):
    write_fixture(tmp_path, seed=5)
    fx = load_fixture(tmp_path).help
    for topic in fx.topics:
        related = pools.help_related(fx, topic)
        assert len(related) <= 10 and topic.slug not in {r["slug"] for r in related}



# ---- search_sections, restated (oracles/okf_sections.py) -------------------------------------------

def test_the_contract_example_is_one_section_on_lines_4_to_5():
    assert okf_sections.sections_of(b"---\ntype: Note\n---\n# Retry\nDeadline permits jitter.\n") == [
        okf_sections.Section("Retry", 4, 5, "# Retry\nDeadline permits jitter.")]


def test_sections_cut_at_atx_and_setext_headings_but_not_at_fenced_hashes():
    body = ("   \n\n# One #\n\ntext\n\n### Three\n\nTwo\n---\n\n```\n# not a heading\n```\n\n"
            "~~~~\n```\n## nor this\n~~~~\n    # indented code\n\nlast")
    got = okf_sections.sections_of(("---\ntype: Note\ntitle: T\n---\n" + body + "\n").encode())
    assert [(s.heading, s.line_start, s.line_end) for s in got] == [
        ("One", 7, 10), ("Three", 11, 12), ("Two", 13, 26)]   # the blank preamble (lines 5-6) is dropped


def test_a_preamble_keeps_its_own_section_and_a_crlf_is_one_line_whose_cr_is_not_text():
    got = okf_sections.sections_of(b"---\ntype: Note\n---\nintro\r\n\r\n# Head\r\nbody\r\n")
    assert [(s.heading, s.line_start, s.line_end, s.text) for s in got] == [
        ("", 4, 5, "intro\r\n"), ("Head", 6, 7, "# Head\r\nbody")]


def test_query_terms_fold_then_nfc_and_split_on_everything_but_letters_numbers_marks():
    assert okf_sections.query_terms("STRASSE straße re-try Cafe\u0301 CAFÉ x2") \
        == ["strasse", "re", "try", "café", "x2"]


def test_snippet_starts_80_runes_before_the_first_term_token_and_holds_512_runes():
    text = "é " * 50 + "Straße " + "t" * 600    # the term at rune 100 (byte 150)
    snippet = okf_sections.snippet(text, ["strasse"])
    assert snippet.startswith("é " * 40 + "Straße") and len(snippet) == 512
    assert okf_sections.snippet("ab " * 300, ["zz"]) == ("ab " * 300)[:512]


def test_bm25_weights_the_heading_thrice_and_the_title_twice():
    corpus = okf_sections.index_sections([("a", "a.md", "Guide", b"---\ntype: Note\n---\n# Guide\nguide\n")])
    (hit,) = okf_sections.expected_hits(corpus, ["guide"])
    tf = length = 2 + 3 + 2   # two body tokens, the heading's once x3, the title's once x2
    idf = math.log(1 + (1 - 1 + 0.5) / (1 + 0.5))
    assert corpus[0].tf["guide"] == tf and hit["score"] == pytest.approx(idf * tf * 2.2 / (tf + 1.2 * 1.0), rel=1e-12)
    assert length == corpus[0].length


def test_a_term_only_in_the_concept_title_matches_every_section_of_that_concept():
    corpus = okf_sections.index_sections([("n", "n.md", "Jitter notes", b"---\ntype: Note\n---\n# A\nx\n# B\ny\n")])
    assert [h["heading"] for h in okf_sections.expected_hits(corpus, ["jitter"])] == ["A", "B"]


def test_snapshot_revision_is_go_json_of_every_file_record_by_path(tmp_path):
    files = {"z.txt": b"", "a&b.md": b"x"}
    text = ('[{"path":"a\\u0026b.md","size":1,"sha256":"%s"},{"path":"z.txt","size":0,"sha256":"%s"}]'
            % (hashlib.sha256(b"x").hexdigest(), hashlib.sha256(b"").hexdigest()))
    assert okf_sections.snapshot_revision(files) == hashlib.sha256(text.encode()).hexdigest()


def test_captured_files_leave_out_only_the_root_okf_and_symlinks(tmp_path):
    (tmp_path / ".okf").mkdir()
    (tmp_path / ".okf" / "journal").write_text("j")
    (tmp_path / "sub" / ".okf").mkdir(parents=True)
    (tmp_path / "sub" / ".okf" / "kept").write_text("k")
    (tmp_path / ".hidden.md").write_text("h")
    (tmp_path / "link.md").symlink_to(tmp_path / ".hidden.md")
    assert okf_sections.captured_files(tmp_path) == {"sub/.okf/kept": b"k", ".hidden.md": b"h"}


def test_the_section_rules_fixture_holds_each_trap():
    """Pinned so that an edit of the fixture cannot quietly lose a rule the check relies on."""
    from knowspec.conformance.checks.okf_oracles import section_rules_bundle

    bundle = section_rules_bundle()
    hits = {(h["concept_id"], h["line_start"]): h for h in okf_reads.expected_section_hits(bundle, "jitter")}
    assert {k: (h["heading"], h["line_end"]) for k, h in hits.items() if k[0] == "retry"} == {
        ("retry", 11): ("", 12), ("retry", 13): ("Retry policy", 16), ("retry", 17): ("Backoff", 20),
        ("retry", 25): ("Setext heading", 34)}                  # ### Limits (21-24) holds no jitter
    assert hits[("jitter-notes", 5)]["heading"] == "Overview"   # by the title alone, snippet from the start
    assert [k for k in hits if k[0] == "blank-start"] == [("blank-start", 7)]
    assert hits[("crlf", 5)]["snippet"].endswith("jitter\r\n") and hits[("crlf", 5)]["line_end"] == 7
    (far,) = okf_reads.expected_section_hits(bundle, "STRASSE")
    assert far["snippet"].startswith("Ünïcödé " * 10) and len(far["snippet"]) == 512
    odd = sorted((k[1], h["heading"]) for k, h in hits.items() if k[0] == "odd-headings")
    assert [heading for _, heading in odd] == ["", "Line oneline two jitter"]  # "#" and "## ##" cut nothing
    assert [h["heading"] for h in okf_reads.expected_section_hits(bundle, "oneline")] == ["Line oneline two jitter"]
    best = okf_reads.expected_section_hits(bundle, "jitter")[0]
    assert (best["concept_id"], best["heading"]) == ("jitter-notes", "Jitter")   # heading x3 and title x2


# ---- concept cards and the read_concept projection (oracles/okf_cards.py) ---------------------------

def test_a_card_writes_blank_text_fields_as_empty_and_a_projection_as_null():
    from knowspec.conformance.oracles import okf_cards

    concept = Concept("n", title=" ", tags=("ops", "ops"))
    card, projection = okf_cards.concept_card(concept), okf_cards.expected_projection(concept)
    assert (card["title"], card["description"], card["tags"]) == ("", "", ["ops", "ops"])
    assert (projection["title"], projection["description"], projection["resource"]) == (None, None, None)


def test_a_card_is_stale_only_with_as_of_and_a_stale_after_valid_for_the_profile():
    from knowspec.conformance.oracles import okf_cards

    dated, odd = Concept("d", stale_after="2025-03-01"), Concept("o", stale_after="soon")
    assert [okf_cards.concept_card(dated, a)["stale"] for a in (None, "2025-02-28", "2025-03-01")] == [None, False, True]
    assert okf_cards.concept_card(odd, "2025-03-01")["stale"] is None      # not list_concepts' false
    instant = okf_cards.concept_card(dated, "2025-03-01T00:00:00Z", "instant-0b87c52")
    assert (instant["stale"], instant["stale_after"]) == (None, None)     # a date is no instant


def test_status_is_stable_when_absent_and_null_with_its_raw_text_when_blank():
    from knowspec.conformance.oracles import okf_cards

    assert okf_cards.status_fields(Concept("a")) == (
        "stable", {"present": False, "valid": True, "raw": None, "effective": "stable"})
    assert okf_cards.status_fields(Concept("a", status="draft"))[1] == {
        "present": True, "valid": True, "raw": "draft", "effective": "draft"}
    assert okf_cards.status_fields(Concept("a", status="  ")) == (
        None, {"present": True, "valid": False, "raw": "  ", "effective": None})


def test_trust_counts_only_events_with_a_valid_actor_and_an_rfc3339_instant():
    from knowspec.conformance.fixtures.model import Event
    from knowspec.conformance.oracles import okf_cards

    at = "2025-01-01T00:00:00Z"
    trust = [okf_cards.trust(Concept("a", verified=events)) for events in (
        (), (Event("team:x", at),), (Event("bot/2", at),), (Event("bot/2", at), Event("human:ana", at)),
        (Event("human:ana", "2025-01-01"),), (Event("human:", at), Event("a/b/c", at)))]
    assert trust == ["unverified", "unverified", "machine-confirmed", "human-reviewed", "unverified", "unverified"]


def test_projection_lists_events_with_any_actor_and_keeps_the_valid_half_of_generated():
    from knowspec.conformance.fixtures.model import Event
    from knowspec.conformance.oracles import okf_cards

    concept = Concept("a", generated=Event("team:x", "2025-01-01T00:00:00Z"),
                      verified=(Event("team:x", "2025-01-01T00:00:00Z"), Event("bot/2", "nope")))
    projection = okf_cards.expected_projection(concept)
    assert projection["verified"] == [{"by": "team:x", "at": "2025-01-01T00:00:00Z"}]
    assert projection["generated"] == {"by": None, "at": "2025-01-01T00:00:00Z"}
    assert okf_cards.generated(Event("a/1", "2025-13-01T00:00:00Z")) == {"by": "a/1", "at": None}
    assert okf_cards.generated(Event("", "nope")) is None


def test_footnote_labels_fold_and_collapse_ascii_space_only():
    from knowspec.conformance.oracles import okf_cards

    assert [okf_cards.normalised_label(x) for x in ("Spec", "GA4  Schema", " ga4\tschema ", "Straße", "ẞ", "ﬃ")] \
        == ["spec", "ga4 schema", "ga4 schema", "strasse", "ss", "ffi"]
    assert okf_cards.normalised_label("a\u00a0b") == "a\u00a0b"     # a non-ASCII space is kept


def test_attributions_join_every_spelling_of_a_label_and_name_it_by_the_smallest():
    from knowspec.conformance.fixtures.model import Source
    from knowspec.conformance.oracles import okf_cards

    concept = Concept("a", text="Claim.[^RFC] More.[^zz]\n\n[^rfc]: The RFC",
                      sources=(Source("https://x/1", id="rfc"), Source("https://x/2"), Source("https://x/3", id="Rfc")))
    rfc, zz = okf_cards.attributions(concept)
    assert (rfc["id"], rfc["normalized_id"]) == ("RFC", "rfc")
    assert [s["resource"] for s in rfc["sources"]] == ["https://x/1", "https://x/3"]
    assert rfc["references"] == [{"id": "RFC", "raw": "[^RFC]"}]
    assert rfc["definitions"] == [{"id": "rfc", "text": "The RFC", "raw": "[^rfc]:"}]
    assert (zz["id"], zz["sources"], zz["definitions"]) == ("zz", [], [])


def test_sources_and_events_compare_as_multisets_but_tags_in_order():
    from knowspec.conformance.oracles import okf_cards

    want = {"tags": ["a", "b"], "sources": [{"id": "1"}, {"id": "2"}], "verified": [{"by": "x"}, {"by": "y"}]}
    assert okf_cards.field_differences({**want, "sources": want["sources"][::-1],
                                        "verified": want["verified"][::-1]}, want) == {}
    assert set(okf_cards.field_differences({**want, "tags": ["b", "a"]}, want)) == {"tags"}
    assert set(okf_cards.field_differences({"tags": ["a", "b"]}, want)) == {"sources", "verified"}


def test_items_compared_as_a_multiset_may_spell_their_keys_in_any_order():
    from knowspec.conformance.oracles import okf_cards

    want = {"sources": [{"id": "b", "resource": "y"}, {"id": "a", "resource": "z"}]}
    got = {"sources": [{"resource": "y", "id": "b"}, {"resource": "z", "id": "a"}]}   # by id, by resource: 2 orders
    assert okf_cards.field_differences(got, want) == {}
    assert okf_cards.field_differences({"sources": [{"resource": "y", "id": "a"}]}, want) != {}


def test_a_relation_ref_names_the_concept_before_its_first_unescaped_hash():
    from knowspec.conformance.checks.okf_cards import concept_part, edge_ends

    assert [concept_part(r) for r in ("a#part", "hash\\#name", "hash\\#name#s1", "a#b\\#c")] \
        == ["a", "hash#name", "hash#name", "a"]
    assert edge_ends({"kind": "navigation", "from": "hash#name", "to": "b"}) == ("hash#name", "b")
    assert edge_ends({"kind": "relation", "from": "hash\\#name", "to": "b#part"}) == ("hash#name", "b")


def test_the_new_frontmatter_keys_come_last_so_older_fixtures_keep_their_bytes():
    from knowspec.conformance.fixtures.model import Event, render_frontmatter

    plain = render_frontmatter(Concept("a", title="A", stale_after="2025-01-01"))
    richer = render_frontmatter(Concept("a", title="A", stale_after="2025-01-01", status="draft",
                                        generated=Event("w/1", "2025-01-01T00:00:00Z")))
    assert richer.startswith(plain + "\n") and richer.endswith('at: "2025-01-01T00:00:00Z"')


def test_the_cards_fixture_holds_each_trap():
    """Pinned so that an edit of the fixture cannot quietly lose a rule the card checks rely on."""
    from knowspec.conformance.fixtures.strategies import cards_bundle
    from knowspec.conformance.oracles import okf_cards

    bundle = cards_bundle()
    retry, backoff, team = (okf_cards.expected_projection(bundle.concept(c)) for c in ("ops/retry", "ops/backoff",
                                                                                         "notes/team"))
    assert (retry["trust"], backoff["trust"], team["trust"]) == ("human-reviewed", "machine-confirmed", "unverified")
    assert (retry["status"], backoff["status"], team["status"]) == ("draft", None, "deprecated")
    assert retry["tags"] == ["ops", "net", "ops"] and len(retry["sources"]) == 3 and len(retry["verified"]) == 2
    assert [(a["id"], len(a["sources"]), len(a["references"]), len(a["definitions"])) for a in retry["attributions"]] \
        == [("RFC", 2, 1, 1)]
    assert backoff["generated"] == {"by": None, "at": "2025-01-01T00:00:00Z"} and team["verified"] and not team["title"]
    assert (team["stale_after"], backoff["stale_after"]) == (None, "2025-02-28")
