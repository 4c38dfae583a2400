"""Every help_* / doc_* tool on the sample pools, checked against the seed's shapes and rules."""

from __future__ import annotations

import json
import shutil

import pytest
from jsonschema import Draft202012Validator

from docpool_sample import PUBLIC, RESTRICTED, SCHEMAS, call, make_env, sample_config, sample_topics
from knowspec.codegen.bundle import bundle_schema
from knowspec.impl.docpool.builder import build_pool
from knowspec.impl.errors import ToolError

TOOLS = ["doc_collections", "doc_search", "doc_get", "doc_entity", "doc_entities", "doc_links",
         "help_search", "help_get_topic", "help_form_info", "help_stats", "doc_stats"]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return make_env(tmp_path_factory.mktemp("pools"))


@pytest.fixture
def ctx(env):
    return env.ctx()


def _validate(tool, out):
    schema = bundle_schema(SCHEMAS / f"{tool}.output.schema.json")
    errors = list(Draft202012Validator(schema).iter_errors(out))
    assert not errors, [e.message for e in errors]


def _raw(tool, ctx, **kw):
    from tool_args import tool_args
    from knowspec.impl.docpool import tools
    return getattr(tools, tool)(tool_args(tool, **kw), ctx).structured


CALLS = [
    ("doc_collections", {}), ("doc_search", {"query": "fatura"}), ("doc_get", {"slug": "satis-faturasi"}),
    ("doc_entity", {"kind": "form_class", "key": "TfrmFatura"}), ("doc_entities", {}),
    ("doc_entities", {"q": "fatura"}), ("doc_links", {"kind": "form_class", "key": "TfrmBordro"}),
    ("help_search", {"query": "stok"}), ("help_get_topic", {"islem_kodu": "ST20"}),
    ("help_form_info", {"form_class": "TfrmSatisFaturasi"}), ("help_stats", {}), ("doc_stats", {}),
    ("doc_entity", {"kind": "form_class", "key": "tfrmsatisfaturasi"}),
]


@pytest.mark.parametrize("tool, kw", CALLS)
def test_every_tool_output_matches_its_schema(ctx, tool, kw):
    _validate(tool, _raw(tool, ctx, **kw))


def test_every_tool_is_called_somewhere():
    assert {t for t, _ in CALLS} == set(TOOLS)


def test_doc_collections_lists_help_first_then_the_pool(ctx):
    rows = call("doc_collections", ctx)
    assert [r["id"] for r in rows] == ["netsim-help", PUBLIC, RESTRICTED]
    counts = {r["id"]: r["topics"] for r in rows}
    assert counts == {"netsim-help": len(sample_topics()), PUBLIC: 2, RESTRICTED: len(sample_topics())}


def test_doc_search_ranks_by_bm25_ascending_and_respects_limit(ctx):
    hits = call("doc_search", ctx, query="fatura", limit=3)
    assert 1 <= len(hits) <= 3
    assert [h["score"] for h in hits] == sorted(h["score"] for h in hits)
    assert all(h["method"] == "fts" for h in hits)
    assert len({(h["collection"], h["slug"]) for h in hits}) == len(hits)  # best chunk per topic


def test_doc_search_falls_back_to_or_when_and_finds_nothing(ctx):
    assert call("doc_search", ctx, query="fatura zzqqxx")  # no topic has both words
    assert call("doc_search", ctx, query="zzqqxx") == []


def test_doc_search_snippet_marks_the_matched_words(ctx):
    hit = call("doc_search", ctx, query="ışık istanbul", collection=RESTRICTED)[0]
    assert hit["slug"] == "doviz-kurlari"
    assert "[İstanbul]" in hit["snippet"] and "[Işık]" in hit["snippet"]


def test_doc_search_collection_netsim_help_reads_the_help_pool(ctx):
    hits = call("doc_search", ctx, query="fatura", collection="netsim-help")
    assert hits and {h["collection"] for h in hits} == {"netsim-help"}


def test_doc_search_links_name_the_topic_entities(ctx):
    hit = next(h for h in call("doc_search", ctx, query="fatura", collection=RESTRICTED)
               if h["slug"] == "satis-faturasi")
    assert {"kind": "form_class", "key": "TfrmFatura"} in hit["links"]


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_vector_modes_without_a_model_pack_say_so(ctx, mode):
    with pytest.raises(ToolError) as err:
        call("doc_search", ctx, query="fatura", mode=mode)
    assert (err.value.code, err.value.message) == ("embedding_unavailable", "embedding model not found")


def test_doc_get_by_entity_returns_the_most_reliable_topic(ctx):
    topic = call("doc_get", ctx, kind="form_class", key="TFRMFATURA")
    assert topic["slug"] == "satis-faturasi"


def test_doc_get_by_entity_in_a_collection_looks_only_there(ctx):
    """A named collection had been ignored: its entity's best topic came from another one."""
    assert call("doc_get", ctx, kind="form_class", key="TfrmFatura", collection=RESTRICTED)["slug"] == "satis-faturasi"
    with pytest.raises(ToolError) as err:
        call("doc_get", ctx, kind="form_class", key="TfrmFatura", collection=PUBLIC)
    assert err.value.code == "not_found"


def test_doc_get_by_old_name_resolves(ctx):
    assert call("doc_get", ctx, kind="form_class", key="TfrmSatisFaturasi")["slug"] == "satis-faturasi"


def test_doc_get_related_shares_form_or_islem_and_excludes_itself(ctx):
    topic = call("doc_get", ctx, slug="satis-faturasi", collection=RESTRICTED)
    related = {r["slug"] for r in topic["related"]}
    front = sample_topics()
    expected = {s for s, f in front.items() if s != "satis-faturasi"
                and any(l["key"] in ("TfrmFatura", "FT10") for l in f.get("links", []))}
    assert related == expected
    assert len(topic["related"]) <= 10


def test_doc_entity_resolves_alias_and_builds_help_url(ctx):
    e = call("doc_entity", ctx, kind="form_class", key="tfrmsatisfaturasi")
    assert (e["key"], e["resolved_from"]) == ("TfrmFatura", "tfrmsatisfaturasi")
    assert e["help_url"] == "https://help.netsim.example/v1/forms/TfrmFatura.html"  # 5.1.1.1531 -> 1
    assert {"rel": "opens", "kind": "islem_kodu", "key": "FT10"} in e["relations_in"]
    assert [a["alias"] for a in e["aliases"]] == ["TfrmSatisFaturasi", "TfrmInvoice"]


def test_doc_entity_exact_key_has_no_resolved_from(ctx):
    assert "resolved_from" not in call("doc_entity", ctx, kind="islem_kodu", key="st20")


def test_help_url_uses_the_agent_version_third_field(env):
    env.settings.agent_version = "6.2.7.100"
    try:
        e = call("doc_entity", env.ctx(), kind="islem_kodu", key="FT10")
    finally:
        env.settings.agent_version = "5.1.1.1531"
    assert e["help_url"] == "https://help.netsim.example/v7/islem/FT10"


def test_doc_entities_without_arguments_lists_kinds(ctx):
    kinds = call("doc_entities", ctx)
    by_kind = {(k["collection"], k["kind"]): k["entities"] for k in kinds}
    expected = sum(1 for e in sample_config()["entities"] if e["kind"] == "form_class")
    assert by_kind[(RESTRICTED, "form_class")] == expected


def test_doc_entities_q_matches_key_or_title_accent_insensitively(ctx):
    rows = call("doc_entities", ctx, q="SATIS")
    assert {r["key"] for r in rows} >= {"TfrmFatura", "FT10"}  # titles "Satış faturası ..."
    assert len(call("doc_entities", ctx, kind="islem_kodu", limit=2)) == 2


def test_doc_links_most_reliable_first(ctx):
    rows = call("doc_links", ctx, kind="form_class", key="TfrmBordro")
    assert [r["confidence"] for r in rows] == sorted((r["confidence"] for r in rows), reverse=True)
    assert rows[0]["slug"] == "bordro-hesaplama"


def test_doc_links_unknown_entity_is_not_found(ctx):
    with pytest.raises(ToolError) as err:
        call("doc_links", ctx, kind="form_class", key="TfrmYok")
    assert err.value.code == "not_found"


def test_help_search_module_filter(ctx):
    hits = call("help_search", ctx, query="kart", module="STK")
    assert hits and all(h["module"] == "STK" for h in hits)
    unfiltered = call("help_search", ctx, query="kart")
    assert {h["slug"] for h in unfiltered} > {h["slug"] for h in hits}


def test_help_get_topic_by_form_class_old_name(ctx):
    topic = call("help_get_topic", ctx, form_class="TfrmMalzemeKart")
    assert (topic["slug"], topic["form_class"], topic["module"]) == ("stok-karti", "TfrmStokKart", "STK")


def test_help_get_topic_by_islem_falls_back_to_opens_mobile(ctx):
    # ST25 has no linked topic and only opens_mobile -> TfrmMobilSayim
    assert call("help_get_topic", ctx, islem_kodu="ST25")["slug"] == "mobil-sayim"
    # ST20 is linked directly
    assert call("help_get_topic", ctx, islem_kodu="st20")["slug"] == "stok-karti"


def test_help_form_info_reports_legacy_alias_and_codes(ctx):
    info = call("help_form_info", ctx, form_class="TfrmSatisFaturasi")
    assert info["legacy_alias"] == "TfrmSatisFaturasi"
    assert info["form"]["form_class"] == "TfrmFatura"
    assert [c["kod"] for c in info["islem_kodlari"]] == ["FT10"]
    assert info["topics"][0]["slug"] == "satis-faturasi"
    mobile = call("help_form_info", ctx, form_class="TfrmMobilSayim")
    assert {(c["kod"], c["rel"]) for c in mobile["islem_kodlari"]} == {("ST20", "opens_mobile"), ("ST25", "opens_mobile")}


def test_help_stats_counts_every_table(ctx):
    stats = call("help_stats", ctx)
    topics = sample_topics()
    assert stats["counts"]["topic"] == len(topics)
    assert stats["counts"]["acl"] == sum(len(f.get("acl", [])) for f in topics.values())
    assert stats["counts"]["alias"] == sum(len(e.get("aliases", [])) for e in sample_config()["entities"])
    assert stats["meta"]["schema_version"] == "2"
    assert stats["collections"]["netsim-help"]["topics"] == len(topics)


def test_doc_stats_summarises_the_document_pool(ctx):
    stats = call("doc_stats", ctx)
    assert set(stats["collections"]) == {PUBLIC, RESTRICTED}
    assert stats["counts"]["topic"] == len(sample_topics()) + 2


# -- pool location and the seed's error texts --------------------------------------------

def test_help_pool_missing(env, tmp_path):
    from knowspec.impl.config import Settings
    from knowspec.impl.context import CallContext
    ctx = CallContext(settings=Settings(appdir=tmp_path))
    with pytest.raises(ToolError) as err:
        call("help_stats", ctx)
    assert err.value.code == "pool_unavailable"
    assert err.value.message.startswith("help pool not found (")


def test_help_pool_replaced_between_calls_is_seen(tmp_path):
    from knowspec.impl.config import Settings
    from knowspec.impl.context import CallContext
    from docpool_sample import SAMPLE
    ctx = CallContext(settings=Settings(appdir=tmp_path))
    build_pool(SAMPLE, tmp_path / "help.db", "netsim-help", title="v1", erisim="herkes")
    assert call("doc_collections", ctx)[0]["title"] == "v1"
    other = tmp_path / "corpus"
    other.mkdir()
    (other / "yeni.md").write_text("---\nslug: yeni-konu\ntitle: Yepyeni\n---\n# Yepyeni\n\nzebra\n", "utf-8")
    build_pool(other, tmp_path / "next.db", "netsim-help", title="v2", erisim="herkes")
    shutil.move(tmp_path / "next.db", tmp_path / "help.db")  # a package update replaces the file
    assert call("doc_collections", ctx)[0]["title"] == "v2"
    assert [h["slug"] for h in call("help_search", ctx, query="zebra")] == ["yeni-konu"]


@pytest.mark.parametrize("setup, message", [
    ("none", "database is required"),
    ("unknown", "database is not registered"),
    ("no-documents", "has no document pool"),
    ("off", "has no document pool"),
    ("mssql", "only SQLITE, POSTGRESQL and FIREBIRD storage are supported"),
    ("missing-file", "document pool not imported ("),
    ("empty-file", "document pool not imported ("),
])
def test_document_pool_errors(tmp_path, setup, message):
    from knowspec.impl.config import Settings
    from knowspec.impl.context import CallContext
    from knowspec.impl.docpool import catalog
    s = Settings(appdir=tmp_path)
    cat = s.catalog_path
    database = "db1"
    catalog.register_database(cat, "db1", "SQLITE", str(tmp_path / "db1.db"))
    catalog.register_database(cat, "other", "MSSQL", "mssql://x")
    if setup == "none":
        database = None
    elif setup == "unknown":
        database = "nope"
    elif setup == "off":
        catalog.execute_alter(cat, "ALTER DATABASE db1 SET DOCUMENTS OFF")
    elif setup == "mssql":
        catalog.execute_alter(cat, "ALTER DATABASE db1 SET DOCUMENTS DATABASE other")
    elif setup in ("missing-file", "empty-file"):
        catalog.execute_alter(cat, "ALTER DATABASE db1 SET DOCUMENTS INTERNAL")
        if setup == "empty-file":
            import sqlite3
            sqlite3.connect(tmp_path / "db1.db").execute("create table x(a)").connection.close()
    with pytest.raises(ToolError) as err:
        call("doc_stats", CallContext(settings=s), database=database)
    assert err.value.message.startswith(message)
    assert err.value.code in ("pool_unavailable", "invalid_request")
    if setup == "none":  # the remedy, for a server started without --database
        assert "--database NAME" in err.value.diagnostics[0]["message"]


def test_document_pool_through_another_database(env, tmp_path):
    from knowspec.impl.docpool import catalog
    catalog.register_database(env.settings.catalog_path, "reports", "SQLITE", str(tmp_path / "unused.db"))
    catalog.execute_alter(env.settings.catalog_path, "ALTER DATABASE reports SET DOCUMENTS DATABASE sales")
    stats = call("doc_stats", env.ctx(), database="reports")
    assert set(stats["collections"]) == {PUBLIC, RESTRICTED}


def test_text_content_is_the_seed_array(ctx):
    out = _raw("doc_links", ctx, kind="form_class", key="TfrmFatura")
    assert list(out) == ["results"] and isinstance(json.loads(json.dumps(out["results"])), list)


def test_pool_errors_name_the_pool_not_a_file_so_they_survive_redaction(tmp_path):
    from knowspec.impl.errors import ToolError
    from knowspec.impl.server.tool_results import envelope_of
    from knowspec.impl.config import Settings
    from knowspec.impl.context import CallContext
    from knowspec.impl.docpool import pools

    ctx = CallContext(settings=Settings(appdir=tmp_path))
    with pytest.raises(ToolError) as err:
        pools.help_pool(ctx)
    assert envelope_of(err.value)["message"] == "help pool not found (netsim-help)"
