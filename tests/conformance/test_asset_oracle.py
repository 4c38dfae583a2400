"""The ReferencedAsset oracle (conformance/oracles/okf_assets.py) against our server's graph and edits of it."""

from __future__ import annotations

import copy

import pytest

from knowspec.conformance.fixtures.strategies import assets_bundle
from knowspec.conformance.oracles.okf_assets import asset_problems, classify
from knowspec.impl.okf.graph.resource_values import resolve_resource


@pytest.fixture(scope="module")
def graph(our_graph):
    bundle = assets_bundle()
    return bundle, our_graph(bundle)


def test_our_graph_meets_the_asset_oracle(graph):
    bundle, nodes = graph
    assert asset_problems(nodes, bundle) == []


@pytest.mark.parametrize("edit", ["drop an asset", "flip exists", "bare path as ambiguous", "second naming lost"])
def test_each_edit_of_an_asset_or_a_kind_is_a_problem(graph, edit):
    bundle, nodes = graph
    nodes = copy.deepcopy(nodes)
    assets = [n for n in nodes if n["@type"] == "proj:ReferencedAsset"]
    if edit == "drop an asset":
        nodes.remove(assets[0])
    elif edit == "flip exists":
        assets[0]["exists"]["@value"] = not assets[0]["exists"]["@value"]
    elif edit == "bare path as ambiguous":
        orders = next(n for n in nodes if n["@id"] == "local:bundle:sales%2Forders")
        orders["resourceKind"] = "ambiguous"
    else:
        shared = next(n for n in assets if isinstance(n.get("referencedBy"), list))
        shared["referencedBy"] = shared["referencedBy"][0]
    assert asset_problems(nodes, bundle)


VALUES = ["data/table.csv", "/assets/logo.png", "//cdn/lib.js", "./page.md#part", "../../up.txt", "C:/x",
          "mailto:a@b.c", "project:dataset", "all queries in project X", "https://x.test/%zz", "a\x01b", "#f", " ",
          "sales/readme.txt", "URN:x", "tel:123", "//host/x", "a%zz/b"]


@pytest.mark.parametrize("source", [False, True])
@pytest.mark.parametrize("value", VALUES)
def test_the_oracle_and_the_server_read_the_rules_alike(value, source):
    """Two restatements of read.md's resource rules, one per side of the wire, kept in step."""
    files = frozenset({"index.md", "sales/data/table.csv", "assets/logo.png", "cdn/lib.js", "sales/readme.txt"})
    ours = resolve_resource(value, "sales/orders.md", files, source=source)
    theirs = classify(value, "sales/orders.md", files, source)
    got = (ours.kind, ours.path, ours.exists) if ours else (None, None, False)
    assert got == (theirs.kind, theirs.path, theirs.exists)
