"""The Attested Computation oracles (okf_computations, okf_assets' contract roles, okf_cards' projection
and card summary) against our server's answers on the computations bundle, and edits of them."""

from __future__ import annotations

import copy

import pytest

from knowspec.conformance.fixtures.strategies import computations_bundle
from knowspec.conformance.oracles.okf_assets import asset_problems
from knowspec.conformance.oracles.okf_cards import computation_summary, expected_computation
from knowspec.conformance.oracles.okf_computations import contract_problems
from knowspec.impl.context import CallContext
from knowspec.impl.okf.tools.read import list_concepts, read_concept

from tool_args import tool_args


@pytest.fixture(scope="module")
def graph(our_graph):
    bundle = computations_bundle()
    return bundle, our_graph(bundle)


def _contract(nodes: list, concept_id: str) -> dict:
    return next(n for n in nodes if n["@type"] == "proj:AttestedComputationContract"
                and n["contractOf"]["@id"] == "local:bundle:" + concept_id.replace("/", "%2F"))


def test_our_graph_meets_both_oracles(graph):
    bundle, nodes = graph
    assert contract_problems(nodes, bundle) == []
    assert asset_problems(nodes, bundle) == []


def test_the_bundle_exercises_every_mode_role_and_kind_it_names(graph):
    """The fixture is what the oracles' docstrings say: file, inline and absent modes; each role
    as an asset, captured and not, shared, and one out of the root; a look-alike type without one."""
    _bundle, nodes = graph
    contracts = [n for n in nodes if n["@type"] == "proj:AttestedComputationContract"]
    assert sorted(n["computationMode"] for n in contracts) == ["absent", "file", "file", "inline"]
    assets = [n for n in nodes if n["@type"] == "proj:ReferencedAsset"]
    roles = {r for n in assets
             for r in (n["resourceRole"] if isinstance(n["resourceRole"], list) else [n["resourceRole"]])}
    assert roles == {"computation", "executor", "attester"}
    assert sum("bundlePath" not in n for n in assets) == 1
    assert {n["exists"]["@value"] for n in assets if "bundlePath" in n} == {True, False}


@pytest.mark.parametrize("edit", ["contract for the look-alike", "mode", "receipt field", "parameter", "runtime",
                                  "contract dropped"])
def test_each_edit_of_a_contract_is_a_problem(graph, edit):
    bundle, nodes = graph
    nodes = copy.deepcopy(nodes)
    total = _contract(nodes, "calc/total")
    if edit == "contract for the look-alike":
        nodes.append({**total, "@id": total["@id"] + "x", "contractOf": {"@id": "local:bundle:notes%2Flookalike"}})
    elif edit == "mode":
        total["computationMode"] = "inline"
    elif edit == "receipt field":
        total["receiptField"] = total["receiptField"][:1]
    elif edit == "parameter":
        param = next(n for n in nodes if n["@type"] == "proj:ComputationParameter")
        param["required"] = {"@value": not param["required"]["@value"], "@type": "xsd:boolean"}
    elif edit == "runtime":
        total["runtime"] = "python2"
    else:
        nodes.remove(total)
    assert contract_problems(nodes, bundle)


@pytest.mark.parametrize("edit", ["executor node dropped", "attester kind", "computation asset unshared"])
def test_each_edit_of_a_contract_resource_is_an_asset_problem(graph, edit):
    bundle, nodes = graph
    nodes = copy.deepcopy(nodes)
    total = _contract(nodes, "calc/total")
    if edit == "executor node dropped":
        del total["executorNode"]
    elif edit == "attester kind":
        total["attesterResourceKind"] = "relative"
    else:
        shared = _contract(nodes, "calc/shared")
        shared["computationNode"] = {"@id": shared["computationNode"]["@id"] + "x"}
    assert asset_problems(nodes, bundle)


def test_read_concept_and_list_cards_meet_the_projection_oracle(tmp_path):
    """projection.computation and the card summary for every concept of the bundle, as our
    server answers them: a contract only for the exact type with a runtime."""
    bundle = computations_bundle()
    root = bundle.write(tmp_path)
    cards = {c["id"]: c for c in list_concepts(tool_args("list_concepts", bundle_path=str(root)),
                                               CallContext()).structured["concepts"]}
    present = []
    for concept in bundle.concepts:
        out = read_concept(tool_args("read_concept", bundle_path=str(root), concept_id=concept.id), CallContext())
        assert out.structured["projection"]["computation"] == expected_computation(concept)
        assert cards[concept.id]["computation"] == computation_summary(concept)
        present += [concept.id] if computation_summary(concept)["present"] else []
    assert present == ["calc/total", "calc/inline", "calc/shared"]
