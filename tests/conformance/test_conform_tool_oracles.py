"""The per-tool oracles restate the contracts: staleness boundaries, diffs, folding, pool facts."""

from __future__ import annotations

import json
import sqlite3

from hypothesis import given
from hypothesis import strategies as st

from knowspec.conformance.fixtures.model import Bundle, Concept
from knowspec.conformance.fixtures.pools import HELP_ID, load_fixture, write_fixture
from knowspec.conformance.oracles import okf_reads, pools
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

