"""The fast legacy JSON-LD writer is byte-identical to ``json.dumps(indent=2)``."""

from __future__ import annotations

import json

from hypothesis import given, strategies as st

from knowspec.impl.okf.graph import legacy as graph_legacy
from knowspec.impl.okf.graph.nodes import Node, Value, concept_iri

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet=st.characters(blacklist_categories=("Cs",))),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=25,
)


def _reference(document) -> str:
    text = json.dumps(document, ensure_ascii=False, indent=2, separators=(",", ": "))
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(raw, escaped)
    return text + "\n"


@given(st.dictionaries(st.text(max_size=6), json_values, max_size=5))
def test_legacy_writer_matches_json_dumps(document):
    assert graph_legacy.render_legacy(document) == _reference(document)


def test_floats_and_non_string_keys_fall_back_to_json():
    for document in ({"a": 1.5, "b": [0.1]}, {"x": {1: "one"}}):
        assert graph_legacy.render_legacy(document) == _reference(document)


def test_single_value_property_compacts_to_a_scalar_and_many_sort():
    node = Node("local:bundle:a", "Concept")
    node.add("title", Value("string", "T"))
    node.add("tag", Value("string", "b"))
    node.add("tag", Value("string", "a"))
    out = node.jsonld()
    assert out["title"] == "T" and out["tag"] == ["a", "b"]


def test_concept_iri_escapes_like_path_escape_and_is_stable():
    assert concept_iri("a b/ç") == "local:bundle:a%20b%2F%C3%A7"
    assert concept_iri("a b/ç") == concept_iri("a b/ç")


@given(st.dictionaries(st.text(max_size=6), json_values, max_size=5))
def test_legacy_utf8_writer_is_the_legacy_text_encoded(document):
    assert graph_legacy.render_legacy_utf8(document) == _reference(document).encode("utf-8")


def test_legacy_utf8_writer_batches_and_falls_back_like_the_text_writer(monkeypatch):
    monkeypatch.setattr(graph_legacy._Utf8Sink, "BATCH", 3)  # many batches, escapes at their edges
    document = {"a": ["<x>", "&", "\U0001F680", "\u2028"] * 5, "b": {"c": "d>e"}}
    assert graph_legacy.render_legacy_utf8(document) == _reference(document).encode("utf-8")
    for fallback in ({"a": 1.5}, {"x": {1: "one"}}):
        assert graph_legacy.render_legacy_utf8(fallback) == _reference(fallback).encode("utf-8")


@given(st.dictionaries(st.text(max_size=6) | st.integers(), json_values, max_size=5)
       | st.fixed_dictionaries({"@context": json_values, "@graph": st.lists(json_values, max_size=6)}))
def test_compact_utf8_is_json_dumps_encoded(document):
    from knowspec.impl.okf.graph.render import compact_utf8

    assert compact_utf8(document) == json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


_values = st.one_of(
    st.builds(Value, st.sampled_from(["iri", "string", "integer", "date", "dateTime"]),
              st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=5)),
    st.builds(Value, st.just("boolean"), st.booleans()),
)
_node_specs = st.lists(
    st.tuples(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=4), st.sampled_from(["Concept", "Tag"]),
              st.lists(st.tuples(st.sampled_from(["title", "tag", "references"]), _values), max_size=4)),
    max_size=6,
)


@given(_node_specs)
def test_graph_utf8_is_the_compact_text_of_the_whole_document(specs):
    from knowspec.impl.okf.graph.nodes import Graph
    from knowspec.impl.okf.graph.render import compact_utf8, graph_utf8

    graph = Graph()
    for node_iri, node_type, properties in specs:
        node = graph.node(node_iri, node_type)
        for predicate, value in properties:
            node.add(predicate, value)
    expected = compact_utf8(graph.jsonld())
    assert graph_utf8(graph) == expected
    assert graph.nodes == {}  # each node was let go once written
