"""Slow: every query tool answers on the real databricks-okf bundle (read-only)."""

import json

import pytest

from knowspec.impl.context import CallContext
from knowspec.impl.errors import ToolError
from knowspec.impl.okf.tools.query import get_neighbors, get_semantic_graph, search_concepts, search_sections

from optional_data import DATABRICKS
from tool_args import tool_args

CORPUS = str(DATABRICKS)

pytestmark = [pytest.mark.slow, pytest.mark.corpus]


def test_search_concepts_answers_on_the_corpus():
    out = search_concepts(tool_args("search_concepts", bundle_path=CORPUS, query="Unity Catalog", limit=100,
                                    as_of="2026-01-01"), CallContext()).structured
    assert out["total"] > 100 and out["truncated"] is True and len(out["hits"]) == 100
    assert out["hits"][0]["match"] in ("id", "title")


def test_get_neighbors_answers_on_the_corpus():
    hits = search_concepts(tool_args("search_concepts", bundle_path=CORPUS, query="abac", limit=5),
                           CallContext()).structured["hits"]
    totals = []
    for hit in hits:
        out = get_neighbors(tool_args("get_neighbors", bundle_path=CORPUS, concept_id=hit["concept"]["id"], limit=100),
                            CallContext())
        s = out.structured
        assert len(s["edges"]) <= 100 and s["total"] >= len(s["edges"])
        assert json.loads(out.text) == s
        totals.append(s["total"])
    assert any(totals)


def test_search_sections_refuses_a_corpus_over_the_token_bound():
    # databricks-okf holds several million word tokens; the contract caps the index at 1,000,000
    with pytest.raises(ToolError) as err:
        search_sections(tool_args("search_sections", bundle_path=CORPUS, query="unity catalog"), CallContext())
    assert (err.value.code, err.value.message) == ("resource_limit", "section search exceeds bounds")


def test_get_semantic_graph_answers_on_the_corpus():
    out = get_semantic_graph(tool_args("get_semantic_graph", bundle_path=CORPUS), CallContext())
    assert len(out.structured["@graph"]) > 5000
    assert len(out.text.encode()) <= 16 * 1024 * 1024
    assert json.loads(out.text)["@graph"][0]["@type"] == "okf:Concept"
