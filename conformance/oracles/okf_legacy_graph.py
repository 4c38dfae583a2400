"""get_semantic_graph's text fallback, the legacy JSON-LD, restated where the contract fixes it.

spec/okf/contract/read.md §1.11: ``@context`` with ``okf`` = the v0.1 ontology, ``bundle`` =
``local:bundle:``, the plain keys mapped to ``okf:*``, ``target`` an ``@id``, each relation type
an ``@id`` and, once a subresource holds relations, ``is_part_of``; one ``okf:Concept`` node per
concept, ``@id`` ``bundle:<raw id>``, in file path order, each followed by its ``okf:SubResource``
nodes (``bundle:<escaped id>#<fragment>``, ``is_part_of`` its concept) in first-seen order; the
plain frontmatter values; ``references``: one ``{"@type": "okf:Reference", "target", "exists"}``
per link that resolves to a concept ID, in source order, repeats and broken targets kept; one
property per relation type holding ``{"@id": "bundle:<ref>", "exists"}``; every object's keys
sorted byte-wise but a reference's; pretty-printed with 2-space indentation. A blank plain value
may be written or left out. Not judged:
``okf:_relations`` (a valid relation type never collides with a reserved key) and a timestamp
written as a YAML timestamp rather than a string (the fixtures quote theirs).
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from knowspec.conformance.fixtures.model import Bundle, Concept, Relation, Section, escape_ref, relation_ref
from knowspec.conformance.oracles.go_encoding import go_marshal_indent

OKF = "https://okf.io/ontology/v0.1#"
PLAIN_KEYS = ("type", "title", "description", "resource", "tags", "timestamp", "references", "exists")
REFERENCE_KEYS = ["@type", "target", "exists"]
PART_OF = {"@id": "okf:is_part_of", "@type": "@id"}  # in @context once a subresource holds relations


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
    relation_types |= {r.rel_type for c in bundle.concepts for s in c.sections for r in s.relations}
    holds_parts = any(s.relations for c in bundle.concepts for s in c.sections)
    if not isinstance(context, dict) or any(context.get(k) != v for k, v in base_context().items()):
        problems.append("@context lacks the v0.1 ontology, bundle: and the plain keys")
    elif any(context.get(t) != {"@id": f"okf:{t}", "@type": "@id"} for t in relation_types):
        problems.append(f"@context does not map the relation types {sorted(relation_types)}")
    elif ("is_part_of" in context) != holds_parts or (holds_parts and context["is_part_of"] != PART_OF):
        problems.append(f"@context {'lacks' if holds_parts else 'has'} is_part_of, "
                        f"{'with' if holds_parts else 'without'} subresources holding relations")
    graph = [n for n in doc["@graph"] if isinstance(n, dict)]
    ordered = sorted(bundle.concepts, key=lambda c: c.path.encode("utf-8", "surrogatepass"))
    want_ids = [iri for c in ordered for iri in [f"bundle:{c.id}"] + [part_iri(c, s) for s in parts(c)]]
    if [n.get("@id") for n in graph] != want_ids:
        return problems + [f"@graph nodes {[n.get('@id') for n in graph][:8]}, expected each concept in file "
                           f"path order followed by its subresources {want_ids[:8]}"]
    by_id = {n["@id"]: n for n in graph}
    for concept in ordered:
        problems += _node_problems(by_id[f"bundle:{concept.id}"], concept, bundle)
        for section in parts(concept):
            problems += _part_problems(by_id[part_iri(concept, section)], concept, section, bundle)
    return problems


def parts(concept: Concept) -> list[Section]:
    """The concept's subresources that hold relations, first-seen order (a repeated id once)."""
    seen: dict[str, Section] = {}
    for section in concept.sections:
        if section.relations:
            seen.setdefault(section.id, section)
    return list(seen.values())


def part_iri(concept: Concept, section: Section) -> str:
    return f"bundle:{escape_ref(concept.id)}#{section.id}"


def _relation_problems(node: dict, relations: tuple[Relation, ...], bundle: Bundle, where: str) -> list[str]:
    out = []
    for rel_type in sorted({r.rel_type for r in relations}):
        got = sorted(json.dumps(v, sort_keys=True) for v in node.get(rel_type) or [])
        want = sorted(json.dumps({"@id": f"bundle:{relation_ref(r)}", "exists": bundle.relation_resolves(r)},
                                 sort_keys=True) for r in relations if r.rel_type == rel_type)
        if got != want:
            out.append(f"{where}: {rel_type} {got}, expected {want}")
    return out


def _part_problems(node: dict, concept: Concept, section: Section, bundle: Bundle) -> list[str]:
    where = f"node {part_iri(concept, section)}"
    out = []
    if node.get("@type") != "okf:SubResource":
        out.append(f"{where}: @type {node.get('@type')!r}, expected okf:SubResource")
    if node.get("is_part_of") != {"@id": f"bundle:{concept.id}"}:
        out.append(f"{where}: is_part_of {node.get('is_part_of')!r}, expected bundle:{concept.id}")
    relations = tuple(r for s in concept.sections if s.id == section.id for r in s.relations)
    return out + _relation_problems(node, relations, bundle, where)


def _node_problems(node: dict, concept: Concept, bundle: Bundle) -> list[str]:
    where = f"node bundle:{concept.id}"
    out = []
    if node.get("@type") != "okf:Concept":
        out.append(f"{where}: @type {node.get('@type')!r}, expected okf:Concept")
    for key in ("type", "title", "description", "resource", "timestamp"):
        want = getattr(concept, key) or None
        blank = want is not None and not want.strip()  # written as is or left out: the contract says "plain values"
        if node.get(key) != want and not (blank and key not in node):
            out.append(f"{where}: {key} {node.get(key)!r}, the frontmatter's {want!r}")
    if node.get("tags") != (list(concept.tags) or None):
        out.append(f"{where}: tags {node.get('tags')!r}, the frontmatter's {list(concept.tags)!r}")
    want_refs = [{"@type": "okf:Reference", "target": f"bundle:{link.target}", "exists": link.target in bundle.ids}
                 for link in concept.links if link.resolves()]
    if (node.get("references") or []) != want_refs:
        got = [(r.get("target"), r.get("exists")) if isinstance(r, dict) else r for r in node.get("references") or []]
        out.append(f"{where}: references {got}, expected one per resolved link in source order, repeats and "
                   f"broken targets kept: {[(r['target'], r['exists']) for r in want_refs]}")
    return out + _relation_problems(node, concept.relations, bundle, where)
