"""The fast legacy JSON-LD writer is byte-identical to ``json.dumps(indent=2)``."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

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


def _written(nodes, monkeypatch) -> bytes:
    """``legacy_utf8`` of a bundle whose nodes are ``nodes``."""
    monkeypatch.setattr(graph_legacy, "_nodes", lambda snapshot, context, check, targets: iter(nodes))
    return graph_legacy.legacy_utf8(object(), targets=lambda concept_id: [])


def _legacy_reference(nodes) -> bytes:
    context = dict(sorted(graph_legacy.base_context().items()))  # ASCII keys: byte order
    return _reference({"@context": context, "@graph": nodes}).encode("utf-8")


@given(st.lists(st.dictionaries(st.text(max_size=6), json_values | st.floats(allow_nan=False, allow_infinity=False),
                                max_size=4), max_size=4))
def test_legacy_utf8_writer_is_the_legacy_text_encoded(nodes):
    with pytest.MonkeyPatch.context() as patch:
        assert _written(nodes, patch) == _legacy_reference(nodes)


def test_legacy_utf8_writer_batches_and_falls_back_like_the_text_writer(monkeypatch):
    monkeypatch.setattr(graph_legacy._Utf8Sink, "BATCH", 3)  # many batches, escapes at their edges
    nodes = [{"a": ["<x>", "&", "\U0001F680", "\u2028"] * 5, "b": {"c": "d>e"}},
             {"@id": "bundle:a", "n": 1.5, "t": "<x>"},  # a float: json writes this node, lines indented
             {"@id": "bundle:b", "x": {1: "one"}}]  # a key that is not a string: json writes it as one
    assert _written(nodes, monkeypatch) == _legacy_reference(nodes)


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


@given(_node_specs, st.randoms(use_true_random=False))
def test_graph_utf8_is_the_compact_text_of_the_whole_document_whatever_order_the_nodes_come_in(specs, rng):
    from knowspec.impl.okf.graph.nodes import Graph, jsonld_context
    from knowspec.impl.okf.graph.render import graph_utf8

    graph = Graph()
    for node_iri, node_type, properties in specs:
        node = graph.node(node_iri, node_type)
        for predicate, value in properties:
            node.add(predicate, value)
    in_order = sorted(graph.nodes.values(), key=lambda n: n.iri.encode("utf-8", "surrogatepass"))  # by IRI, UTF-8
    document = {"@context": jsonld_context(), "@graph": [n.jsonld() for n in in_order]}
    expected = json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    nodes = list(graph.nodes.values())
    rng.shuffle(nodes)
    assert graph_utf8(nodes) == expected


def test_a_node_keeps_a_lone_value_bare_and_a_set_from_the_second():
    """Most predicates hold one value: no set for them (databricks-okf: 52,787 predicates, 10,027
    of them with several values)."""
    node = Node("local:bundle:a", "Concept")
    node.add("title", Value("string", "T"))
    node.add("title", Value("string", "T"))
    node.add("tag", Value("string", "b"))
    node.add("tag", Value("string", "a"))
    node.add("tag", Value("string", "b"))
    node.add("empty", Value("string", ""))
    assert node.properties["title"] == Value("string", "T")
    assert node.properties["tag"] == {Value("string", "a"), Value("string", "b")}
    assert "empty" not in node.properties
    assert node.values("tag") == [Value("string", "a"), Value("string", "b")] and node.values("none") == []
    assert node.jsonld() == {"@id": "local:bundle:a", "@type": "proj:Concept", "tag": ["a", "b"], "title": "T"}


_LEGACY_TEXT = st.text(alphabet=st.characters(whitelist_categories=("L", "N", "P", "S", "Zs"))
                       | st.sampled_from("<>&\u2028\u2029\U0001F680é"), max_size=12)


def _legacy_bundle(root, concepts) -> str:
    """A bundle of ``concepts`` (title, tags, linked, relation type or None): links and relations
    point at the next concept, or at a missing one; every second concept has a part with its own
    relation. A relation type written as a plain YAML ``true`` is a key the direct writer does
    not take for a ``str``: ``json`` writes what holds it, the ``@context`` among them."""
    names = [f"c{i}" for i in range(len(concepts))] + ["ghost"]
    for i, (title, tags, linked, relation) in enumerate(concepts):
        target = names[i + 1]
        lines = ["---", "type: Note", f"title: {json.dumps(title)}", f"tags: {json.dumps(tags)}"]
        if relation:
            lines += ["relations:", f"  {relation}:", f"    - target: {target}"]
        if i % 2:
            lines += ["parts:", "  - id: sec", "    relations:", "      mentions:", f"        - target: {target}"]
        body = f"[next]({target}.md)\n" if linked else "\n"
        (root / f"{names[i]}.md").write_text("\n".join(lines + ["---", body]), encoding="utf-8")
    return str(root)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(_LEGACY_TEXT, st.lists(_LEGACY_TEXT, max_size=3), st.booleans(),
                          st.sampled_from([None, "uses", "true", "a<b"])), max_size=6),
       st.sampled_from([3, 8192]))
def test_the_streamed_legacy_text_is_the_whole_document_written(tmp_path_factory, concepts, batch):
    """Written a node at a time (the ``@context``, which the nodes extend, put in front at the
    end), the text is the one the whole document gives, escapes across batch edges included."""
    from knowspec.impl import runtime as process
    from knowspec.impl.context import CallContext
    from knowspec.impl.okf.model import load_snapshot

    root = _legacy_bundle(tmp_path_factory.mktemp("legacy"), concepts)
    with process.activated(), pytest.MonkeyPatch.context() as patch:
        patch.setattr(graph_legacy._Utf8Sink, "BATCH", batch)
        snapshot = load_snapshot(root, CallContext())
        document = graph_legacy.legacy_document(snapshot)
        assert graph_legacy.legacy_utf8(snapshot) == _reference(document).encode("utf-8")
