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
