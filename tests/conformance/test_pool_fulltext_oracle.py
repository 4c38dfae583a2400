"""oracle_fts_ranking: doc_search full text compared with FTS5 on the suite's own pool."""

from __future__ import annotations


import pytest

from knowspec.conformance.config import RunConfig
from knowspec.conformance.fixtures.pools import write_fixture
from knowspec.conformance.mutants.killrate import kill_rate
from knowspec.conformance.oracles.pool_fulltext import common_words, expected_fts, query_words, topic_key, weights_of
from knowspec.conformance.pool_fixture import generate
from pool_target import served_fixture


def test_query_words_follow_the_contracts_rules():
    assert query_words("Şube  a FİŞİ-kasa", None) == ["sube", "fisi", "kasa"]
    assert query_words("ve kasa", "ve, ile") == ["kasa"]
    assert query_words("ve ile", "ve ile") == ["ve", "ile"]  # all stopwords: the originals stay
    assert len(query_words(" ".join(f"w{i}" for i in range(20)), None)) == 12


def test_weights_fall_back_to_the_contracts_default():
    assert weights_of("2, 1") == (2.0, 1.0)
    assert weights_of("x") == weights_of(None) == weights_of("nan") == (10.0, 5.0, 1.0)


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    return write_fixture(tmp_path_factory.mktemp("pool") / "pool", seed=3)


def test_the_reference_ranks_the_best_chunk_per_topic_by_score_then_collection_and_slug(pool):
    fx = pool.docs
    word = common_words(fx, None)[0]
    everyone = {topic_key(t) for t in fx.topics}
    hits = expected_fts(pool.directory / "docs.db", fx, word, everyone, 50)
    assert len(hits) >= 5 and len({(h.collection, h.slug) for h in hits}) == len(hits)
    assert [(h.score, h.collection, h.slug) for h in hits] == sorted((h.score, h.collection, h.slug) for h in hits)
    assert all(h.score < 0 and "[" in h.snippet for h in hits)  # FTS5's bm25 is negative; the word is marked


def test_the_reference_keeps_only_visible_topics_and_falls_back_to_any_word(pool):
    fx = pool.docs
    first, second = fx.topics_in(fx.open_id)[:2]
    db = pool.directory / "docs.db"
    both = f"{first.word} {second.word}"  # no topic holds both: AND finds nothing, OR finds two
    assert {h.slug for h in expected_fts(db, fx, both, {topic_key(t) for t in fx.topics}, 10)} == {first.slug,
                                                                                                   second.slug}
    assert [h.slug for h in expected_fts(db, fx, both, {topic_key(first)}, 10)] == [first.slug]


def test_common_words_are_frequent_and_skip_stopwords():
    fx = generate(0, "fixture")
    top = common_words(fx, None)
    assert common_words(fx, top[0])[0] != top[0]


FTS_MUTANTS = {"doc_search_fts_score_rounded": "oracle_fts_ranking[doc_search]",
               "doc_search_fts_snippet_unmarked": "oracle_fts_ranking[doc_search]",
               "doc_search_fts_ties_by_slug_descending": "oracle_fts_ranking[doc_search]",
               "help_search_score_rounded": "oracle_help_fts_ranking[help_search]",
               "help_search_snippet_unmarked": "oracle_help_fts_ranking[help_search]"}


@pytest.mark.slow
def test_fts_data_mutants_are_killed_while_the_real_server_passes(tmp_path):
    """Answers sorted by their own scores, with the right topics, but another score, snippet or
    tie order pass every other doc_search rule; FTS5 on the suite's pool tells them apart."""
    fixture, server = served_fixture(tmp_path)
    base = RunConfig(target="", family="docpool", tools=("doc_search", "help_search"),
                     checks=("oracle_fts_ranking", "oracle_help_fts_ranking"), pool_fixture=fixture.directory,
                     max_examples=2)
    results = list(kill_rate(base, server, list(FTS_MUTANTS)))
    assert results[0].name == "identity" and results[0].killed_by == () and not results[0].unreachable
    assert {r.name: r.killed_by for r in results[1:]} == {name: (case,) for name, case in FTS_MUTANTS.items()}


def test_only_the_suites_pool_files_as_served_are_compared(pool):
    """An import may land in PostgreSQL (the seed scores it with ts_rank_cd) or beside other
    collections, whose chunks count in bm25's statistics."""
    from knowspec.conformance.checks.docpool_import import PoolRun
    from knowspec.conformance.checks.pool_fulltext import _not_comparable

    fx, source = pool.docs, pool.directory / "docs.db"
    assert _not_comparable(PoolRun("fixture", "", fx, "db", source)) is None
    assert "--pool-fixture" in (_not_comparable(PoolRun("imported", "", fx, "db", source)) or "")


@pytest.mark.parametrize("ignored", ["search_bm25_weights", "chunk_fts_snippet_column", "search_stopwords"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_server_ignoring_a_recipe_row_answers_some_probe_otherwise(tmp_path, monkeypatch, seed, ignored):
    """The served pools carry a recipe that is not the contract's default (the general one and the
    open collection's own), so built-in weights, a fixed snippet column or no stopwords show."""
    from knowspec.conformance.checks import pool_fulltext as check
    from knowspec.conformance.checks.docpool_import import PoolRun
    from knowspec.conformance.oracles import pool_fulltext as oracle

    written = write_fixture(tmp_path / "pool", seed=seed)
    fx, db = written.docs, written.directory / "docs.db"
    run = PoolRun("fixture", "", fx, written.database, db)
    everyone = {topic_key(t) for t in fx.topics}
    cases = check.probes(run, list(fx.topics))

    def answers() -> list:
        return [expected_fts(db, fx, args["query"], everyone, args["limit"], coll) for args, coll in cases]

    served = answers()
    real_recipe = oracle.recipe
    monkeypatch.setattr(oracle, "recipe", lambda *a: {k: v for k, v in real_recipe(*a).items() if k != ignored})
    assert answers() != served
