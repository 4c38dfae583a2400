"""Slow: every query tool answers on the real databricks-okf bundle (read-only)."""

import json
from types import SimpleNamespace

import pytest

from knowspec.impl.context import CallContext
from knowspec.impl.errors import ToolError
from knowspec.impl.okf.query_tools import get_neighbors, get_semantic_graph, search_concepts, search_sections

from optional_data import DATABRICKS

CORPUS = str(DATABRICKS)

pytestmark = [pytest.mark.slow, pytest.mark.corpus]


def test_search_concepts_answers_on_the_corpus():
    out = search_concepts(SimpleNamespace(bundle_path=CORPUS, query="Unity Catalog", limit=100, as_of="2026-01-01",
                                          temporal_profile=None), CallContext()).structured
    assert out["total"] > 100 and out["truncated"] is True and len(out["hits"]) == 100
    assert out["hits"][0]["match"] in ("id", "title")


def test_get_neighbors_answers_on_the_corpus():
    hits = search_concepts(SimpleNamespace(bundle_path=CORPUS, query="abac", limit=5, as_of=None,
                                           temporal_profile=None), CallContext()).structured["hits"]
    totals = []
    for hit in hits:
        out = get_neighbors(SimpleNamespace(bundle_path=CORPUS, concept_id=hit["concept"]["id"], direction="both",
                                            kinds=None, limit=100, as_of=None, temporal_profile=None), CallContext())
        s = out.structured
        assert len(s["edges"]) <= 100 and s["total"] >= len(s["edges"])
        assert json.loads(out.text) == s
        totals.append(s["total"])
    assert any(totals)


def test_search_sections_refuses_a_corpus_over_the_token_bound():
    # databricks-okf holds several million word tokens; the contract caps the index at 1,000,000
    with pytest.raises(ToolError) as err:
        search_sections(SimpleNamespace(bundle_path=CORPUS, query="unity catalog", limit=20), CallContext())
    assert (err.value.code, err.value.message) == ("resource_limit", "section search exceeds bounds")


def test_get_semantic_graph_answers_on_the_corpus():
    out = get_semantic_graph(SimpleNamespace(bundle_path=CORPUS, as_of=None, temporal_profile=None), CallContext())
    assert len(out.structured["@graph"]) > 5000
    assert len(out.text.encode()) <= 16 * 1024 * 1024
    assert json.loads(out.text)["@graph"][0]["@type"] == "okf:Concept"
