"""The v0.2 graph's Attested Computation contracts, restated from the bundle the suite wrote.

spec/okf/contract/read.md §1.11: a concept whose ``type`` is exactly ``Attested Computation`` gets
one ``AttestedComputationContract`` node (``contractOf`` the concept, an IRI of the concept's
children, ``runtime`` its runtime (a blank one written or left out), ``computationMode`` ``file``
for a ``computation`` path with no fence under ``# Computation``, ``inline`` for one closed fence
there and no path, ``absent`` for neither; a ``receiptField`` per valid executor's receipt entry) and one
``ComputationParameter`` (``parameterOf`` the contract, ``name``, ``parameterType``, ``required``)
per complete valid parameter; any other ``type``, whatever its keys, gets none. The contract's
resources (``computationResource``, ``executorResource``, ``attesterResource`` with their kinds and
nodes) are judged with the other resource values in ``okf_assets``. The fixtures write well-formed
contracts only: the malformed and ambiguous modes are not exercised. Pure: nodes and the bundle
in, problems out.
"""

from __future__ import annotations

import json
from collections import Counter

from knowspec.conformance.fixtures.model import Bundle, Concept
from knowspec.conformance.oracles.okf_cards import ATTESTED
from knowspec.conformance.oracles.okf_graph_children import child_ordinal, concept_id_of, iri_of

CONTRACT = "proj:AttestedComputationContract"
PARAMETER = "proj:ComputationParameter"


def _texts(node: dict, key: str) -> Counter:
    """The literal values of ``key`` (a plain value or ``{"@value": …}``), counted, a blank one
    left out (it may be written or not); anything else as its JSON text, so a comparison shows it."""
    value = node.get(key)
    items = value if isinstance(value, list) else [] if value is None else [value]
    plain = (v.get("@value", v) if isinstance(v, dict) else v for v in items)
    return Counter(v if isinstance(v, (str, int, float, bool)) or v is None else json.dumps(v, sort_keys=True)
                   for v in plain if v != "")


def expected_contract(concept: Concept) -> dict[str, Counter]:
    """The contract node's literal fields for an exact ``Attested Computation`` concept."""
    c = concept.computation
    mode = "absent" if c is None else "file" if c.file else "inline"
    receipt = c.receipt if c is not None and c.executor is not None else ()
    runtime = [c.runtime] if c is not None and c.runtime else []  # a blank runtime: "" or left out
    return {"runtime": Counter(runtime), "computationMode": Counter([mode]), "receiptField": Counter(receipt)}


def contract_problems(nodes: list, bundle: Bundle) -> list[str]:
    """Each concept's contract node (one for the exact type, none otherwise) and its parameters."""
    contracts: dict[str, list[dict]] = {}
    parameters: dict[str, list[dict]] = {}
    for node in nodes:
        if isinstance(node, dict) and node.get("@type") == CONTRACT:
            contracts.setdefault(concept_id_of(iri_of(node.get("contractOf"))), []).append(node)
        elif isinstance(node, dict) and node.get("@type") == PARAMETER:
            parameters.setdefault(iri_of(node.get("parameterOf")), []).append(node)
    problems: list[str] = []
    for concept in bundle.concepts:
        got = contracts.pop(concept.id, [])
        if concept.type != ATTESTED:
            if got:
                problems.append(f"{concept.id}: type {concept.type!r} is not exactly {ATTESTED!r}, yet it has "
                                f"an AttestedComputationContract node")
            continue
        if len(got) != 1:
            problems.append(f"{concept.id}: {len(got)} AttestedComputationContract nodes, one expected")
            continue
        node = got[0]
        if child_ordinal(iri_of(node), concept.id) is None:
            problems.append(f"{concept.id}: the contract's @id {iri_of(node)!r} is not a child IRI of the concept")
        for key, want in expected_contract(concept).items():
            if _texts(node, key) != want:
                problems.append(f"{concept.id}: contract {key} {sorted(map(str, _texts(node, key).elements()))} "
                                f"written, {sorted(want.elements())} expected")
        got_params = Counter((_one(p, "name"), _one(p, "parameterType"), _one(p, "required"))
                             for p in parameters.pop(iri_of(node), []))
        want_params = Counter(concept.computation.parameters if concept.computation is not None else ())
        if got_params != want_params:
            problems.append(f"{concept.id}: ComputationParameter (name, parameterType, required) "
                            f"{sorted(map(str, got_params.elements()))} written, "
                            f"{sorted(map(str, want_params.elements()))} expected")
    if contracts:
        problems.append(f"AttestedComputationContract nodes of no concept of the bundle: {sorted(contracts)[:4]}")
    if parameters:
        problems.append(f"ComputationParameter nodes of no contract: {sorted(parameters)[:4]}")
    return problems


def _one(node: dict, key: str) -> object:
    values = list(_texts(node, key).elements())
    return values[0] if len(values) == 1 else tuple(values)
