"""The same pool on SQLite, PostgreSQL and Firebird answers the doc_* tools alike.

One environment: three registered databases (``sq`` SQLite, ``pg`` PostgreSQL, ``fb`` Firebird),
each with SET DOCUMENTS INTERNAL and the same two collections imported (the sample help corpus,
ACL-restricted, and a generated corpus of Turkish and accented text). Full text is ranked by one
layer (``fulltext.search``) over the data each storage hands over, so PostgreSQL and Firebird must
equal SQLite exactly: same topics, order, scores (to the last bit) and snippets; every other tool
must answer identically everywhere.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from docpool_sample import call
from knowspec.impl.config import Settings
from knowspec.impl.context import CallContext, Caller
from knowspec.impl.docpool import catalog, recipe
from knowspec.impl.docpool.pools import open_location
from knowspec.impl.docpool.storage import firebird, postgres
from knowspec.impl.docpool.storage.base import UNRESTRICTED
from storages import (GENERATED_COLLECTION, SAMPLE, SAMPLE_COLLECTION, build_sources, fb_dsn, fb_ready,  # noqa: F401
                      pg_dsn, query_words, WORDS)

pytestmark = [pytest.mark.postgres, pytest.mark.firebird]

DATABASES = ("sq", "pg", "fb")
RESTRICTED_CALLER = Caller(user="ayse", roles=("muhasebe",), unrestricted=False)
STRANGER = Caller(user="kimse", roles=(), unrestricted=False)


@pytest.fixture(scope="module")
def env(tmp_path_factory, pg_dsn, fb_ready):
    from knowspec.impl.docpool.builder import build_pool

    root = tmp_path_factory.mktemp("parity")
    settings = Settings(appdir=root)
    build_pool(SAMPLE, settings.help_db_path, "netsim-help", title="Netsim Yardım", erisim="herkes")
    sources = build_sources(root)
    dsns = {"sq": str(root / "pool.db"), "pg": pg_dsn, "fb": fb_dsn(root, "pool")}
    importers = {"sq": recipe.import_collection, "pg": postgres.import_collection, "fb": firebird.import_collection}
    for db, kind in zip(DATABASES, ("SQLITE", "POSTGRESQL", "FIREBIRD")):
        catalog.register_database(settings.catalog_path, db, kind, dsns[db])
        catalog.execute_alter(settings.catalog_path, f"ALTER DATABASE {db} SET DOCUMENTS INTERNAL")
        for collection, source in sources.items():
            importers[db](dsns[db], source, collection)
    return settings


def ctx(settings, caller: Caller | None = None) -> CallContext:
    return CallContext(caller=caller or Caller(), settings=settings)


def search(settings, db, query, caller=None, **kw):
    return call("doc_search", ctx(settings, caller), database=db, query=query, limit=50, **kw)


OTHERS = ("pg", "fb")
# Words unicode61 cuts in two (U+19B0 is a separator to it, a letter to the query's word rule):
# one query word, a two-token phrase, ranked row by row from the candidates' texts.
SPLIT_QUERIES = ["k\u00f6pr\u00fc\u19b0\u0131\u015f\u0131k", "istanbul\u19b0bo\u011faz\u0131", "\u00e7ay\u19b0\u015fek",
                 "kart\u0131\u19b0a\u00e7", "fatura k\u00f6pr\u00fc\u19b0\u0131\u015f"]
FIXED_QUERIES = ["fatura", "stok kart", "cari hesap", "rapor yazdır", "kartı", "form", "İSTANBUL Boğazı",
                 "IŞIK", "straße", "café crème", "zürich naïve", "smørrebrød", "łódź", "œuvre", "déjà über",
                 "Ärger", "İşlem kodu", "ödeme", "kopru", "cay seker"]


def _ranked(hits):
    return [(h["collection"], h["slug"], h["score"], h["snippet"]) for h in hits]


@pytest.mark.parametrize("db", OTHERS)
def test_full_text_equals_sqlite_exactly_on_generated_queries(env, db):
    queries = query_words(11, 220) + FIXED_QUERIES + SPLIT_QUERIES
    nonempty = 0
    for q in queries:
        want = search(env, "sq", q)
        assert _ranked(search(env, db, q)) == _ranked(want), q
        nonempty += bool(want)
    assert nonempty >= 150  # the queries really exercise ranking, not empty lists


def test_split_words_are_found_and_ranked_row_by_row(env):
    from knowspec.impl.docpool.fulltext.rank import query_phrases
    from knowspec.impl.rules.fts_query import build_fts_query

    for q in SPLIT_QUERIES:
        assert query_phrases(build_fts_query(q).all_words) is None, q  # not one token per word
    found = [search(env, "sq", q) for q in SPLIT_QUERIES]
    assert sum(map(bool, found)) >= 3
    assert any("[" in h["snippet"] for hits in found for h in hits)


@pytest.mark.parametrize("db", OTHERS)
@pytest.mark.parametrize("caller", [RESTRICTED_CALLER, STRANGER], ids=["role", "stranger"])
def test_full_text_filters_acl_before_ranking_like_sqlite(env, db, caller):
    for q in query_words(12, 40) + SPLIT_QUERIES[:2]:
        assert search(env, db, q, caller) == search(env, "sq", q, caller), q


@pytest.mark.parametrize("db", OTHERS)
def test_full_text_per_collection_equals_sqlite(env, db):
    for q in query_words(13, 30) + SPLIT_QUERIES[:2]:
        for coll in (SAMPLE_COLLECTION, GENERATED_COLLECTION):
            assert search(env, db, q, collection=coll) == search(env, "sq", q, collection=coll)


_GLUE = st.sampled_from(["", "", " ", "\u19b0"])
_WORD = st.sampled_from(WORDS).flatmap(lambda w: st.integers(2, len(w)).map(lambda n: w[:n]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(st.tuples(_WORD, _GLUE), min_size=1, max_size=4), limit=st.integers(1, 30),
       caller=st.sampled_from([None, RESTRICTED_CALLER, STRANGER]),
       collection=st.sampled_from([None, SAMPLE_COLLECTION, GENERATED_COLLECTION]))
def test_every_storage_ranks_any_query_like_sqlite(env, parts, limit, caller, collection):
    query = "".join(w + glue for w, glue in parts)
    kw = {"limit": limit} | ({"collection": collection} if collection else {})
    want = call("doc_search", ctx(env, caller), database="sq", query=query, **kw)
    for db in OTHERS:
        assert call("doc_search", ctx(env, caller), database=db, query=query, **kw) == want, (db, query)


NON_FTS_CALLS = [
    ("doc_collections", {}),
    ("doc_stats", {}),
    ("doc_entities", {}),
    ("doc_entities", {"q": "kart"}),
    ("doc_entities", {"kind": "form_class", "q": "ı"}),
    ("doc_entities", {"kind": "module", "limit": 2}),
    ("doc_entity", {"kind": "form_class", "key": "tfrmcarikart"}),
    ("doc_entity", {"kind": "module", "key": "FIN"}),
    ("doc_links", {"kind": "form_class", "key": "TfrmFatura"}),
    ("doc_links", {"kind": "form_class", "key": "TfrmUretilen3"}),
    ("doc_get", {"slug": "cari-hesap-karti"}),
    ("doc_get", {"slug": "konu-005"}),
    ("doc_get", {"kind": "form_class", "key": "TfrmStokKart"}),
]


@pytest.mark.parametrize("caller", [None, RESTRICTED_CALLER, STRANGER], ids=["stdio", "role", "stranger"])
@pytest.mark.parametrize("tool,kw", NON_FTS_CALLS, ids=[f"{t}-{i}" for i, (t, _) in enumerate(NON_FTS_CALLS)])
def test_non_fts_tools_answer_identically_on_every_storage(env, tool, kw, caller):
    def answer(db):
        try:
            return call(tool, ctx(env, caller), database=db, **kw)
        except Exception as exc:  # a not-found must be the same not-found everywhere
            return (type(exc).__name__, getattr(exc, "code", None), getattr(exc, "message", str(exc)))

    want = answer("sq")
    assert answer("pg") == want
    assert answer("fb") == want


def test_every_generated_topic_reads_back_identically(env):
    for i in range(0, 40, 3):
        want = call("doc_get", ctx(env), database="sq", slug=f"konu-{i:03d}")
        assert call("doc_get", ctx(env), database="pg", slug=f"konu-{i:03d}") == want
        assert call("doc_get", ctx(env), database="fb", slug=f"konu-{i:03d}") == want


def _location(settings, db):
    return catalog.resolve_pool_location(settings.catalog_path, db)


@pytest.mark.parametrize("db", DATABASES)
def test_topics_read_without_their_bodies_are_the_same_records_with_an_empty_body(env, db):
    from dataclasses import replace

    from knowspec.impl.docpool.pools import open_location
    from knowspec.impl.docpool.storage.base import UNRESTRICTED

    pool = open_location(_location(env, db))
    try:
        ids = pool.topic_ids(UNRESTRICTED)[:25]
        full = pool.topics_by_id(ids, UNRESTRICTED)
        bare = pool.topics_by_id(ids, UNRESTRICTED, with_body=False)
    finally:
        pool.close()
    assert any(t.body_md for t in full.values())
    assert bare == {i: replace(t, body_md="") for i, t in full.items()}


def test_vectors_read_back_byte_identical_and_score_alike(env):
    from knowspec.impl.docpool.storage.base import Access
    from knowspec.impl.docpool.vectors.scoring import PoolVectors, vector_rank

    rows, streamed, restricted = {}, {}, {}
    ayse = Access(frozenset({"ayse", "muhasebe", "*"}))
    for db in DATABASES:
        with open_location(_location(env, db)) as pool:
            rows[db] = (pool.vectors("topic", UNRESTRICTED), pool.vectors("chunk", UNRESTRICTED))
            assert [pool.vector_count(w, UNRESTRICTED) for w in ("topic", "chunk")] == [len(r) for r in rows[db]]
            streamed[db] = PoolVectors.from_streams(
                *((pool.vector_count(w, UNRESTRICTED), pool.iter_vectors(w, UNRESTRICTED)) for w in ("topic", "chunk")))
            restricted[db] = [(pool.vector_count(w, ayse), list(pool.iter_vectors(w, ayse))) for w in ("topic", "chunk")]
    assert rows["sq"][0] and rows["sq"][1]
    assert rows["pg"] == rows["sq"] and rows["fb"] == rows["sq"]
    assert restricted["pg"] == restricted["sq"] and restricted["fb"] == restricted["sq"]
    assert 0 < restricted["sq"][1][0] < len(rows["sq"][1]) and restricted["sq"][1][0] == len(restricted["sq"][1][1])
    for db in DATABASES:  # the streaming loader builds what the row lists build
        whole = PoolVectors.from_vector_rows(*rows[db], streamed[db].dim)
        for name in ("topic_ids", "topic_matrix", "chunk_ids", "chunk_topic_ids", "chunk_matrix"):
            np.testing.assert_array_equal(getattr(streamed[db], name), getattr(whole, name))
    q = np.random.default_rng(3).normal(size=len(rows["sq"][1][0].vec) // 4).astype(np.float32)
    q /= np.linalg.norm(q)
    ranked = {}
    for db in DATABASES:
        pv = PoolVectors.from_vector_rows(*rows[db], len(q))
        ranked[db] = [(h.topic_id, h.score) for h in vector_rank(pv, q, None, 20)]
    for db in ("pg", "fb"):
        assert [t for t, _ in ranked[db]] == [t for t, _ in ranked["sq"]]
        assert all(abs(a - b) <= 1e-6 for (_, a), (_, b) in zip(ranked[db], ranked["sq"]))
    assert struct.calcsize("<f") * (len(q)) == len(rows["fb"][1][0].vec)


def test_search_linked_to_an_entity_filters_alike(env):
    from knowspec.impl.docpool.search import fts_ranked

    results = {}
    for db in DATABASES:
        with open_location(_location(env, db)) as pool:
            results[db] = [fts_ranked(pool, q, UNRESTRICTED, limit=50, linked_to=("form_class", key))
                           for q in ("kart", "köprü çay", "fatura")
                           for key in ("tfrmfatura", "TfrmUretilen3", "TfrmStokKart")]
    assert any(results["sq"])
    assert results["fb"] == results["sq"]
    assert results["pg"] == results["sq"]


def _failing_query(pool, access):
    """A real driver error on the call's own connection: a table no pool has."""
    query = pool._rows if hasattr(pool, "_rows") else pool._all
    query('select count(*) from "doc$no_such_table"')


@pytest.mark.parametrize("db", DATABASES)
def test_a_driver_error_while_answering_is_storage_error_on_every_storage(env, db, monkeypatch):
    from knowspec.impl.docpool import stats
    from knowspec.impl.errors import ToolError

    monkeypatch.setattr(stats, "pool_stats", _failing_query)
    with pytest.raises(ToolError) as err:
        call("doc_stats", ctx(env), database=db)
    assert err.value.code == "storage_error" and err.value.retryable
    assert err.value.message.startswith("doc_stats: pool storage failed (")
