"""RDF-style node collection and JSON-LD compaction for the v0.2 graph projection.

The projection contract (``skosovsky/okf-v0.2``) is a set of nodes keyed by ``@id``: nodes with
the same ``@id`` coalesce, property values form a set, empty properties are omitted, a single
value compacts to a scalar and several to an array, nodes are ordered by IRI and values by
(kind, value). Literal kinds: plain strings, ``xsd:boolean`` (JSON boolean in ``@value``),
``xsd:integer`` / ``xsd:date`` / ``xsd:dateTime`` (lexical string in ``@value``), IRIs
``{"@id": …}``.

Identities: concept IRIs are ``local:bundle:`` + Go ``url.PathEscape`` of the concept ID;
synthetic IRIs are ``urn:skosovsky:okf:graph:v0.2:<kind>:`` + unpadded base64url components.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple
from urllib.parse import quote

NAMESPACE = "https://github.com/skosovsky/okf/ns/projection/v0.2#"
XSD = "http://www.w3.org/2001/XMLSchema#"
URN = "urn:skosovsky:okf:graph:v0.2:"
PROJECTION_IRI = URN + "projection"
CONTEXT_ALIASES = (
    "profile",
    "projectionVersion",
    "declaredOKFVersion",
    "effectiveOKFVersion",
    "versionSource",
    "compatibilityMode",
)

# Go url.PathEscape keeps these besides ASCII letters and digits.
PATH_SEGMENT_SAFE = "-_.~$&+:=@"


# ``quote`` keeps one memo per ``safe`` set, filled a byte at a time as bytes are first seen:
# filled during a render, its entries sit among the render's transient objects and keep their
# freed arenas resident. Filled here, once, with every byte.
quote(bytes(range(256)), safe=PATH_SEGMENT_SAFE)


@lru_cache(maxsize=65536)
def concept_iri(concept_id: str) -> str:
    """Pure and repeated once per edge end: cached (``quote`` is slow)."""
    return "local:bundle:" + quote(concept_id, safe=PATH_SEGMENT_SAFE)


def b64(component: str) -> str:
    return base64.urlsafe_b64encode(component.encode("utf-8", "surrogatepass")).decode("ascii").rstrip("=")


def synthetic_iri(kind: str, *components: str) -> str:
    return URN + kind + ":" + ":".join(b64(c) for c in components)


def ordinal(index: int) -> str:
    return f"{index:06d}"


# --- values --------------------------------------------------------------------------------


class Value(NamedTuple):
    """One property value: ``kind`` is iri | string | boolean | integer | date | dateTime.

    A named tuple (hashed and compared in C): graphs put ~100,000 values into property sets."""

    kind: str
    lexical: Any

    def sort_key(self) -> tuple:
        return (self.kind, json.dumps(self.lexical, ensure_ascii=False))

    def jsonld(self) -> Any:
        if self.kind == "iri":
            return {"@id": self.lexical}
        if self.kind == "string":
            return self.lexical
        return {"@value": self.lexical, "@type": f"xsd:{self.kind}"}


def iri(value: str) -> Value:
    return Value("iri", value)


def text(value: str) -> Value:
    return Value("string", value)


def boolean(value: bool) -> Value:
    return Value("boolean", bool(value))


def integer(value: int | str) -> Value:
    return Value("integer", str(value))


def temporal_literal(value: str, instant_profile: bool) -> Value:
    return Value("dateTime" if instant_profile else "date", value)


def date_time(value: str) -> Value:
    return Value("dateTime", value)


# --- graph ---------------------------------------------------------------------------------


@dataclass
class Node:
    iri: str
    type: str
    # predicate -> its value, or the set of its values once it has two: most predicates hold
    # one, and a set is 216 bytes or more (databricks-okf: 52,787 predicates, 10,027 of them with
    # several values; the nodes took 23 MiB with a set each, 14 MiB so)
    properties: dict[str, Value | set[Value]] = field(default_factory=dict)

    def add(self, predicate: str, value: Value | None) -> None:
        if value is None or (value.kind == "string" and value.lexical == ""):
            return
        held = self.properties.get(predicate)
        if held is None:
            self.properties[predicate] = value
        elif isinstance(held, set):
            held.add(value)
        elif held != value:
            self.properties[predicate] = {held, value}

    def values(self, predicate: str) -> list[Value]:
        """The predicate's values in document order (by kind, then JSON of the value)."""
        held = self.properties.get(predicate)
        if held is None:
            return []
        return sorted(held, key=Value.sort_key) if isinstance(held, set) else [held]

    def jsonld(self) -> dict[str, Any]:
        out: dict[str, Any] = {"@id": self.iri, "@type": f"proj:{self.type}"}
        for predicate in sorted(self.properties):
            ordered = self.values(predicate)
            out[predicate] = ordered[0].jsonld() if len(ordered) == 1 else [v.jsonld() for v in ordered]
        return out


@dataclass
class Graph:
    nodes: dict[str, Node] = field(default_factory=dict)

    def node(self, node_iri: str, node_type: str) -> Node:
        """The node with this ``@id`` (created on first use; same-identity nodes coalesce)."""
        found = self.nodes.get(node_iri)
        if found is None:
            found = Node(node_iri, node_type)
            self.nodes[node_iri] = found
        return found


def jsonld_context() -> dict[str, Any]:
    """The document's ``@context``."""
    context: dict[str, Any] = {"@vocab": NAMESPACE, "proj": NAMESPACE, "xsd": XSD}
    for alias in CONTEXT_ALIASES:
        context[alias] = f"proj:{alias}"
    return context
