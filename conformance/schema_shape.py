"""Schemas compared by meaning: what a client relies on, not how a server words or lays it out.

A conformant server may describe its tools in its own words, order keys and tools its own way,
inline ``$ref``s or not, and advertise the success schema alone instead of the contract's
``anyOf[success, envelope]`` wrapper. :func:`shape` keeps only what constrains values (types,
required, enums, ranges and limits, patterns, formats, ``additionalProperties``, nesting) in one
canonical form; :func:`prose` collects the annotations (description, title, examples, default,
``$comment``) that differ harmlessly. Pure functions: no I/O.
"""

from __future__ import annotations

import json
from typing import Any

ANNOTATIONS = frozenset({"description", "title", "examples", "default", "$comment", "deprecated",
                         "readOnly", "writeOnly"})
IDENTIFIERS = frozenset({"$schema", "$id", "$anchor", "$defs", "definitions"})
UNORDERED_LISTS = frozenset({"required", "enum", "type"})
ALTERNATIVES = ("anyOf", "oneOf")
MAX_REF_DEPTH = 32
# Nodes one schema's canonical form may hold: past it, references stay as they are written. A
# definition used twice at every level doubles with each level inlined; a hostile or careless
# server's schema must not take a conformance run's memory and time.
MAX_SHAPE_NODES = 200_000


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _number(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _resolve(ref: str, root: dict[str, Any]) -> Any:
    """A local ``#/...`` pointer into ``root``; ``None`` when it does not resolve."""
    if not ref.startswith("#"):
        return None
    node: Any = root
    for part in (p for p in ref[1:].split("/") if p):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


class _Walk:
    """One canonicalisation: the schema's root and the nodes made so far."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.nodes = 0


def _canon(node: Any, walk: _Walk, inlining: tuple[str, ...]) -> Any:
    """``node`` canonical; ``inlining``: the references being inlined above it. A reference to
    one of them (a recursive schema) stays a ``$ref``, as does any past the depth or node limits."""
    walk.nodes += 1
    if isinstance(node, list):
        return [_canon(v, walk, inlining) for v in node]
    if not isinstance(node, dict):
        return _number(node)
    ref = node.get("$ref")
    if (isinstance(ref, str) and ref not in inlining and len(inlining) < MAX_REF_DEPTH
            and walk.nodes < MAX_SHAPE_NODES):
        target = _resolve(ref, walk.root)
        if isinstance(target, dict):
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            inlined = _canon(target, walk, (*inlining, ref))
            rest = _canon(siblings, walk, inlining)
            if not isinstance(inlined, dict) or not isinstance(rest, dict):
                return inlined
            if any(_key(inlined[k]) != _key(rest[k]) for k in set(inlined) & set(rest)):
                return {"allOf": sorted([inlined, rest], key=_key)}
            return {**inlined, **rest}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ANNOTATIONS or key in IDENTIFIERS:
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _canon(sub, walk, inlining) for name, sub in sorted(value.items())}
            continue
        value = _canon(value, walk, inlining)
        if key == "const":
            key, value = "enum", [value]
        if key in UNORDERED_LISTS:
            items = value if isinstance(value, list) else [value]
            value = sorted({_key(v): v for v in items}.values(), key=_key)
        elif key in ALTERNATIVES and isinstance(value, list):
            value = sorted(value, key=_key)
        elif key == "allOf" and isinstance(value, list):
            value = sorted(value, key=_key)
        out[key] = value
    if out.get("additionalProperties") in (True, {}):
        del out["additionalProperties"]
    if out.get("items") in (True, {}):
        del out["items"]
    return _merge_type_alternatives(out)


def _merge_type_alternatives(node: dict[str, Any]) -> dict[str, Any]:
    """``anyOf: [{type: string}, {type: null}]`` means ``type: [null, string]``; one alternative
    alone means itself (merged into its parent when their keys do not overlap), and so does an
    ``allOf`` of one schema (pydantic 1 writes a ``$ref`` with a default as ``allOf: [{$ref}]``)."""
    whole = node.get("allOf")
    if (isinstance(whole, list) and len(whole) == 1 and isinstance(whole[0], dict)
            and not set(whole[0]) & (set(node) - {"allOf"})):
        node = {**{k: v for k, v in node.items() if k != "allOf"}, **whole[0]}
    for key in ALTERNATIVES:
        alts = node.get(key)
        if not isinstance(alts, list) or not alts:
            continue
        if all(isinstance(a, dict) and set(a) == {"type"} for a in alts) and "type" not in node:
            types = sorted({t for a in alts for t in a["type"]})
            node = {k: v for k, v in node.items() if k != key}
            node["type"] = types
        elif len(alts) == 1 and isinstance(alts[0], dict) and not set(alts[0]) & (set(node) - {key}):
            node = {**{k: v for k, v in node.items() if k != key}, **alts[0]}
    return node


def shape(schema: Any) -> Any:
    """The schema's meaning in canonical form: annotations, identifiers and layout removed,
    local ``$ref``s inlined, unordered lists sorted, ``1.0`` read as ``1``."""
    if not isinstance(schema, dict):
        return schema
    return _canon(schema, _Walk(schema), ())


def alternatives(schema: Any) -> list[Any]:
    """An output schema's alternatives in canonical form: the members of a root ``anyOf`` (each
    with the root's other keywords, e.g. ``type: object``), else the schema itself."""
    canon = shape(schema)
    if isinstance(canon, dict) and isinstance(canon.get("anyOf"), list):
        rest = {k: v for k, v in canon.items() if k != "anyOf"}
        return [_with(rest, alt) for alt in canon["anyOf"]]
    return [canon]


def _with(rest: dict[str, Any], alt: Any) -> Any:
    if not isinstance(alt, dict):
        return alt
    merged = dict(alt)
    for key, value in rest.items():
        if key not in merged:
            merged[key] = value
    return merged


def prose(schema: Any, path: str = "") -> dict[str, Any]:
    """Every annotation in ``schema`` by its JSON pointer (``$defs`` walked where they are)."""
    out: dict[str, Any] = {}
    if isinstance(schema, dict):
        for key, value in schema.items():
            where = f"{path}/{key}"
            if key in ANNOTATIONS:
                out[where] = value
            else:
                out.update(prose(value, where))
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            out.update(prose(value, f"{path}/{i}"))
    return out


def differences(expected: Any, actual: Any, path: str = "", limit: int = 12) -> list[str]:
    """JSON-pointer differences between two canonical forms (the first ``limit``)."""
    out: list[str] = []
    _diff(expected, actual, path, out, limit)
    return out


def _diff(expected: Any, actual: Any, path: str, out: list[str], limit: int) -> None:
    if len(out) >= limit:
        return
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(set(expected) | set(actual)):
            where = f"{path}/{key}"
            if key not in actual:
                out.append(f"{where}: missing (expected {_key(expected[key])[:80]})")
            elif key not in expected:
                out.append(f"{where}: unexpected {_key(actual[key])[:80]}")
            else:
                _diff(expected[key], actual[key], where, out, limit)
            if len(out) >= limit:
                return
        return
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        for i, (e, a) in enumerate(zip(expected, actual)):
            _diff(e, a, f"{path}/{i}", out, limit)
        return
    if _key(expected) != _key(actual):
        out.append(f"{path or '/'}: expected {_key(expected)[:80]}, got {_key(actual)[:80]}")


def prose_differences(expected: Any, actual: Any) -> list[str]:
    """Annotation pointers whose wording differs (or exists on one side only)."""
    mine, theirs = prose(expected), prose(actual)
    return [p for p in sorted(set(mine) | set(theirs)) if _key(mine.get(p)) != _key(theirs.get(p))]
