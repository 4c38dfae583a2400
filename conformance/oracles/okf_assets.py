"""The v0.2 graph's resource kinds and ReferencedAsset nodes, restated from the bundle the suite wrote.

spec/okf/contract/read.md ("Resource values") classifies a concept's and a source's ``resource``
by the first of eight rules, and makes each local value (``bundle-relative``, ``relative``) a
``ReferencedAsset``: one node per bundle path, ``urn:skosovsky:okf:graph:v0.2:asset:<b64(path)>``,
that every naming adds its value, kind, role and concept to, with ``exists`` saying whether the
bundle holds a file there; a value that climbs out of the root gets a node of its own without a
``bundlePath`` (its IRI is not judged). An exact ``Attested Computation`` concept's contract names
values too: its ``computation`` file (``computationResource``, ``…ResourceKind``, ``…Node`` on the
contract node), its executor's and its attester's ``resource`` (``executor…``, ``attester…``), in
the roles ``computation``, ``executor`` and ``attester``. Pure: nodes and the bundle in, problems
out.
"""

from __future__ import annotations

import base64
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from knowspec.conformance.fixtures.model import Bundle, Concept
from knowspec.conformance.oracles.okf_cards import ATTESTED, DEFAULT_PROFILE, citations_fallback
from knowspec.conformance.oracles.okf_computations import CONTRACT
from knowspec.conformance.oracles.okf_graph_children import ABSENT, concept_id_of, iri_of, owned_nodes
from knowspec.conformance.oracles.okf_reads import valid_source

ASSET_IRI = "urn:skosovsky:okf:graph:v0.2:asset:"
TRIMMED = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
          "\u2028\u2029\u202f\u205f\u3000"   # Unicode White_Space
SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")   # stops at the first colon: a scheme before it
SOURCE_URL_PREFIXES = ("mailto:", "tel:", "data:", "urn:")
CONTRACT_ROLES = ("computation", "executor", "attester")  # each ``<role>Resource`` on a contract node
UNRESOLVED = "unresolved"   # an owner's resourceNode, as compared, naming an asset node without a bundle path


@dataclass(frozen=True)
class Expected:
    kind: str | None   # None: a blank value has no kind
    path: str | None = None
    exists: bool = False

    @property
    def asset(self) -> bool:
        return self.kind in ("bundle-relative", "relative")


def classify(raw: str, concept_path: str, files: frozenset[str], source: bool) -> Expected:
    """read.md's eight rules, in their order."""
    value = raw.strip(TRIMMED)
    if not value:
        return Expected(None)
    head = re.split(r"[?#]", value, maxsplit=1)[0]
    if not head:
        return Expected("ambiguous")
    local = _bundle_path(head, concept_path, files)
    if local.exists:
        return local
    if "\\" in head or re.match(r"[A-Za-z]:(?:$|[/\\])", head):
        return Expected("ambiguous")
    url_like = head.startswith("//") or SCHEME.match(head) is not None
    if url_like and re.search(r"%(?![0-9A-Fa-f]{2})", value):
        return Expected("ambiguous")
    if re.search(r"[\x00-\x1f\x7f]", value):
        return Expected("ambiguous") if url_like else _not_captured(head, local, source)
    if value.startswith("//") or SCHEME.match(value):
        if not source or value.startswith("//") or "://" in value or any(
                value[:len(p)].isascii() and value[:len(p)].lower() == p for p in SOURCE_URL_PREFIXES):
            return Expected("url")
    return _not_captured(head, local, source)


def _bundle_path(head: str, concept_path: str, files: frozenset[str]) -> Expected:
    kind = "bundle-relative" if head.startswith("/") else "relative"
    start = [] if kind == "bundle-relative" else concept_path.split("/")[:-1]
    segments: list[str] = []
    for part in [*start, *head.lstrip("/").split("/")]:
        if part == "..":
            if not segments or segments[-1] == "..":
                segments.append("..")
            else:
                segments.pop()
        elif part not in ("", "."):
            segments.append(part)
    if not segments or segments[0] == "..":
        return Expected(kind)
    path = "/".join(segments)
    return Expected(kind, path, path in files)


def _not_captured(head: str, local: Expected, source: bool) -> Expected:
    if not source or head.startswith(("/", "./", "../")):
        return local
    if re.search(r"[ \t\r\n]", head) and not re.search(r"[/.]", head):
        return Expected("scope")
    return Expected("ambiguous")


def bundle_files(bundle: Bundle) -> frozenset[str]:
    """Every file the bundle's ``write`` puts down: the root index, the concepts, the extras."""
    return frozenset({"index.md", *(c.path for c in bundle.concepts), *bundle.extra_files})


def namings(concept: Concept, profile: str) -> list[tuple[str, str]]:
    """``(value, role)`` of every path-valued field the graph projects for ``concept``."""
    out = [(concept.resource, "concept")] if concept.resource else []
    out += contract_namings(concept)
    if citations_fallback(concept):
        return out + [(url, "source") for _title, url in concept.citations]
    return out + [(s.resource, "source") for s in concept.sources if valid_source(s, profile)]


def contract_namings(concept: Concept) -> list[tuple[str, str]]:
    """The contract's ``(value, role)``: the file of a ``file`` mode contract, the executor's
    and the attester's resource (the fixtures write well-formed contracts only)."""
    c = concept.computation
    if concept.type != ATTESTED or c is None:
        return []
    values = (c.file or None, c.executor, c.attester)  # in CONTRACT_ROLES' order
    return [(value, role) for value, role in zip(values, CONTRACT_ROLES) if value is not None]


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii").rstrip("=")


def _values(node: dict, key: str) -> frozenset:
    value = node.get(key, ABSENT)
    items = value if isinstance(value, list) else [] if value is ABSENT else [value]
    return frozenset(iri_of(v) if isinstance(v, dict) and "@id" in v else
                     v.get("@value") if isinstance(v, dict) else v for v in items)


def asset_problems(nodes: list, bundle: Bundle, profile: str = DEFAULT_PROFILE) -> list[str]:
    """Each concept's and source's ``resourceKind`` and ``resourceNode``, and every asset node."""
    files = bundle_files(bundle)
    graph = {iri_of(n): n for n in nodes if isinstance(n, dict)}
    assets = {i: n for i, n in graph.items() if n.get("@type") == "proj:ReferencedAsset"}
    concept_nodes = {concept_id_of(i): n for i, n in graph.items() if n.get("@type") == "proj:Concept"}
    sources = owned_nodes(nodes)["proj:ProvenanceSource"]
    contracts = {concept_id_of(iri_of(n.get("contractOf"))): n for n in graph.values() if n.get("@type") == CONTRACT}
    problems: list[str] = []
    want_assets: dict[str, dict[str, set]] = {}     # by IRI: the values every naming of its path adds
    unresolved: set[tuple[str, str, str]] = set()   # (concept, role, value) of each value out of the root
    for concept in bundle.concepts:
        got_rows: Counter = Counter()
        want_rows: Counter = Counter()
        owners = [("concept", concept_nodes.get(concept.id, {}))] if concept.resource else []
        owners += [("source", n) for n in sources.get(concept.id, [])]
        for role, node in owners:
            row = (role, node.get("resource", ABSENT), node.get("resourceKind", ABSENT), _asset_of(node, assets))
            got_rows[row] += 1
        contract = contracts.get(concept.id, {})
        for role in CONTRACT_ROLES:
            if f"{role}Resource" in contract:
                got_rows[(role, contract[f"{role}Resource"], contract.get(f"{role}ResourceKind", ABSENT),
                          _asset_of(contract, assets, f"{role}Node"))] += 1
        for value, role in namings(concept, profile):
            want = classify(value, concept.path, files, source=role == "source")
            target = None
            if want.asset and want.path is None:
                unresolved.add((concept.id, role, value))
                target = UNRESOLVED
            elif want.asset and want.path is not None:
                target = ASSET_IRI + _b64(want.path)
                entry = want_assets.setdefault(target, {"resource": set(), "resourceKind": set(), "resourceRole": set(),
                                                        "referencedBy": set(), "bundlePath": set(), "exists": set()})
                for key, item in (("resource", value), ("resourceKind", want.kind), ("resourceRole", role),
                                  ("referencedBy", concept.id), ("bundlePath", want.path), ("exists", want.exists)):
                    entry[key].add(item)
            want_rows[(role, value, want.kind or ABSENT, target)] += 1
        if got_rows != want_rows:
            problems.append(f"{concept.id}: (role, resource, resourceKind, resourceNode) "
                            f"{sorted(map(str, got_rows - want_rows))} written, "
                            f"{sorted(map(str, want_rows - got_rows))} expected")
    for iri, want in want_assets.items():
        node = assets.get(iri)
        if node is None:
            problems.append(f"no ReferencedAsset {iri}")
            continue
        got = {key: set(_values(node, key)) for key in want}
        got["referencedBy"] = {concept_id_of(i) for i in got["referencedBy"]}
        differ = sorted(k for k in got if got[k] != want[k])
        if differ:
            problems.append(f"ReferencedAsset {iri}: {[(k, sorted(map(str, got[k]))) for k in differ]} written, "
                            f"{[(k, sorted(map(str, want[k]))) for k in differ]} expected")
    extra = [i for i, n in assets.items() if i not in want_assets and "bundlePath" in n]
    if extra or sum(1 for n in assets.values() if "bundlePath" not in n) != len(unresolved):
        problems.append(f"ReferencedAsset nodes no value names: {sorted(extra)[:4]}, or not one per value that "
                        f"leaves the root ({len(unresolved)} expected)")
    return problems


def _asset_of(node: dict, assets: dict[str, dict], key: str = "resourceNode") -> Any:
    """The owner's ``resourceNode`` (or a contract's ``key``) as compared: the asset IRI,
    UNRESOLVED for an asset node without a bundle path, None for none."""
    target = node.get(key, ABSENT)
    if target is ABSENT:
        return None
    iri = iri_of(target)
    found = assets.get(iri)
    return UNRESOLVED if found is not None and "bundlePath" not in found else iri
