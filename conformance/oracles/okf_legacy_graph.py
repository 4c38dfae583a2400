"""get_semantic_graph's text fallback, the legacy JSON-LD, restated where the contract fixes it.

spec/okf/contract/read.md §1.11: ``@context`` with ``okf`` = the v0.1 ontology, ``bundle`` =
``local:bundle:``, the plain keys mapped to ``okf:*`` and ``target`` an ``@id``; one
``okf:Concept`` node per concept, ``@id`` ``bundle:<id>``, in file path order, with the plain
frontmatter values; ``references`` of ``{"@type": "okf:Reference", "target", "exists"}``; one
property per relation type holding ``{"@id", "exists"}``; every object's keys sorted byte-wise
but a reference's; pretty-printed with 2-space indentation. Judged on the suite's fixtures (no
fragments, timestamps or reserved relation types): which links a broken one stands for
(``exists: false``) is left to the v0.2 graph's oracle.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from knowspec.conformance.fixtures.model import Bundle
from knowspec.conformance.oracles.go_encoding import go_marshal_indent

OKF = "https://okf.io/ontology/v0.1#"
PLAIN_KEYS = ("type", "title", "description", "resource", "tags", "timestamp", "references", "exists")
REFERENCE_KEYS = ["@type", "target", "exists"]


def base_context() -> dict[str, Any]:
    context: dict[str, Any] = {"okf": OKF, "bundle": "local:bundle:", **{k: f"okf:{k}" for k in PLAIN_KEYS}}
    context["target"] = {"@id": "okf:target", "@type": "@id"}
    return context


def _objects(value: Any) -> Iterator[dict]:
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from _objects(v)
    elif isinstance(value, list):
        for v in value:
            yield from _objects(v)


def legacy_problems(text: str, bundle: Bundle, encoder: str) -> list[str]:
    """What in ``text`` breaks the legacy JSON-LD of ``bundle`` (empty when nothing)."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        return [f"not JSON ({exc})"]
    if not isinstance(doc, dict) or not isinstance(doc.get("@graph"), list):
        return ["not an object with an @graph array"]
    problems = []
    if encoder == "go" and text != go_marshal_indent(doc) + "\n":
        problems.append("not Go's 2-space indented JSON of itself with a trailing newline")
    for obj in _objects(doc):
        keys = list(obj)
        if keys != REFERENCE_KEYS and keys != sorted(keys, key=lambda k: k.encode("utf-8", "surrogatepass")):
            problems.append(f"keys {keys[:6]} not sorted byte-wise")
            break
    context = doc.get("@context")
    relation_types = {r.rel_type for c in bundle.concepts for r in c.relations}
    if not isinstance(context, dict) or any(context.get(k) != v for k, v in base_context().items()):
        problems.append("@context lacks the v0.1 ontology, bundle: and the plain keys")
    elif any(context.get(t) != {"@id": f"okf:{t}", "@type": "@id"} for t in relation_types):
        problems.append(f"@context does not map the relation types {sorted(relation_types)}")
    nodes = [n for n in doc["@graph"] if isinstance(n, dict) and n.get("@type") == "okf:Concept"]
    ordered = sorted(bundle.concepts, key=lambda c: c.path.encode("utf-8", "surrogatepass"))
    if [n.get("@id") for n in nodes] != [f"bundle:{c.id}" for c in ordered]:
        return problems + [f"concept nodes {[n.get('@id') for n in nodes][:8]}, expected one per concept in file "
                           f"path order {[f'bundle:{c.id}' for c in ordered][:8]}"]
    for node, concept in zip(nodes, ordered):
        problems += _node_problems(node, concept, bundle)
    return problems


def _node_problems(node: dict, concept: Any, bundle: Bundle) -> list[str]:
    where = f"node bundle:{concept.id}"
    out = []
    for key in ("type", "title", "description", "resource"):
        want = getattr(concept, key) or None
        if node.get(key) != want:
            out.append(f"{where}: {key} {node.get(key)!r}, the frontmatter's {want!r}")
    if node.get("tags") != (list(concept.tags) or None):
        out.append(f"{where}: tags {node.get('tags')!r}, the frontmatter's {list(concept.tags)!r}")
    refs = node.get("references") or []
    resolved = [r.get("target") for r in refs if isinstance(r, dict) and r.get("exists") is True]
    want_refs = [f"bundle:{link.target}" for link in concept.links if link.is_edge(bundle.ids)]
    if resolved != want_refs:
        out.append(f"{where}: references to existing concepts {resolved}, the body's links in order {want_refs}")
    if any(not isinstance(r, dict) or r.get("@type") != "okf:Reference" for r in refs):
        out.append(f"{where}: a reference that is not an okf:Reference")
    for rel_type in {r.rel_type for r in concept.relations}:
        got = sorted(json.dumps(v, sort_keys=True) for v in node.get(rel_type) or [])
        want = sorted(json.dumps({"@id": f"bundle:{r.target}", "exists": r.target in bundle.ids}, sort_keys=True)
                      for r in concept.relations if r.rel_type == rel_type and not r.fragment)
        if got != want:
            out.append(f"{where}: {rel_type} {got}, expected {want}")
    return out
