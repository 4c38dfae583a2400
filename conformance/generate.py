"""Tool arguments from advertised input schemas: valid, invalid and boundary cases.

Random cases come from schemathesis' own JSON-Schema generator (positive and negative modes,
wrapped in a throwaway OpenAPI document, one operation per tool); hypothesis-jsonschema is
not used (broken on current hypothesis, and blind to 2020-12 keywords). Every value is then
classified by ``jsonschema.Draft202012Validator`` with format assertion, because a generator's
mode is a hint and the validator is the judge.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterator

import jsonschema
import jsonschema._keywords
import jsonschema.validators
from hypothesis import strategies as st

from knowspec.conformance.contract import LIMIT_KEYWORDS, ToolContract


_VALIDATORS: dict[int, tuple[dict[str, Any], jsonschema.Draft202012Validator]] = {}


def validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    """One validator per schema object, reused: building one (and resolving its ``$ref``s anew)
    costs more than most validations. Keyed by identity; the schema is kept alive with it."""
    cached = _VALIDATORS.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    made = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    _VALIDATORS[id(schema)] = (schema, made)
    return made


def _leaf_errors(error: jsonschema.ValidationError) -> Iterator[jsonschema.ValidationError]:
    if error.context:
        for sub in error.context:
            yield from _leaf_errors(sub)
    else:
        yield error


def expected_error_code(schema: dict[str, Any], value: Any) -> str | None:
    """``None`` when valid; ``resource_limit`` when a limit keyword fails, else ``schema_validation``.

    A value failing both kinds of keyword may legitimately get either code, so callers accept
    both when :func:`failing_keywords` contains a limit and a non-limit keyword.
    """
    keywords = failing_keywords(schema, value)
    if not keywords:
        return None
    return "resource_limit" if keywords & LIMIT_KEYWORDS else "schema_validation"


def _distinct_items(check: Any, items: Any, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
    """``items``, judging each distinct element once: equal elements fail the same keywords, and a
    boundary case repeats one element 10 000 times (each a ``$ref`` walk in jsonschema)."""
    if not check.is_type(instance, "array") or items is False:
        yield from jsonschema._keywords.items(check, items, instance, schema)
        return
    seen: set[str] = set()
    same: set[int] = set()    # the very same object repeated: no need to serialise it again
    for index in range(len(schema.get("prefixItems", [])), len(instance)):
        item = instance[index]
        if id(item) in same:
            continue
        try:
            key = json.dumps(item, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError):
            key = None
        if key is not None:
            if key in seen:
                continue
            seen.add(key)
            same.add(id(item))
        yield from check.descend(instance=item, schema=items, path=index)


_KeywordValidator = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"items": _distinct_items})
_KEYWORD_VALIDATORS: dict[int, tuple[dict[str, Any], Any]] = {}


def failing_keywords(schema: dict[str, Any], value: Any) -> set[str]:
    """The schema keywords ``value`` fails (error paths are not kept, so equal array items count once)."""
    cached = _KEYWORD_VALIDATORS.get(id(schema))
    if cached is None or cached[0] is not schema:
        cached = (schema, _KeywordValidator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER))
        _KEYWORD_VALIDATORS[id(schema)] = cached
    errors = list(cached[1].iter_errors(value))
    return {str(leaf.validator) for e in errors for leaf in _leaf_errors(e)}


def acceptable_error_codes(schema: dict[str, Any], value: Any) -> set[str]:
    """Codes a server may answer for an invalid value (empty set: the value is valid)."""
    keywords = failing_keywords(schema, value)
    if not keywords:
        return set()
    codes = set()
    if keywords & LIMIT_KEYWORDS:
        codes.add("resource_limit")
    if keywords - LIMIT_KEYWORDS:
        codes.add("schema_validation")
    return codes


def _rehome_refs(node: Any) -> Any:
    """Point ``#/$defs/X`` at ``#/components/schemas/X`` and drop ``$id``/``$schema``.

    Embedded in an OpenAPI document, a schema's local refs would resolve against the document
    root (and an ``$id`` would move the base URI off to the web), so both are rewritten.
    """
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key in ("$id", "$schema", "$defs"):
                continue
            if key == "$ref" and isinstance(value, str) and value.startswith("#/$defs/"):
                out[key] = "#/components/schemas/" + value[len("#/$defs/"):]
            else:
                out[key] = _rehome_refs(value)
        return out
    if isinstance(node, list):
        return [_rehome_refs(v) for v in node]
    return node


@lru_cache(maxsize=None)
def _openapi(schema_json: str) -> Any:
    import schemathesis

    schema = json.loads(schema_json)
    defs = {name: _rehome_refs(d) for name, d in schema.get("$defs", {}).items()}
    doc = {"openapi": "3.1.0", "info": {"title": "mcp-tool", "version": "0"},
           "components": {"schemas": defs}, "paths": {
               "/call": {"post": {"operationId": "call", "requestBody": {"required": True, "content": {
                   "application/json": {"schema": _rehome_refs(schema)}}},
                   "responses": {"200": {"description": "ok"}}}}}}
    return schemathesis.openapi.from_dict(doc)["/call"]["POST"]


def _json_object(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def arguments(tool: ToolContract, mode: str = "positive") -> st.SearchStrategy[dict[str, Any]]:
    """JSON objects generated from the tool's input schema (``positive`` or ``negative``).

    Non-object or non-JSON payloads are filtered out: MCP carries ``arguments`` as an object,
    so those are protocol errors rather than tool-contract cases.
    """
    import schemathesis

    generation = (schemathesis.GenerationMode.POSITIVE if mode == "positive"
                  else schemathesis.GenerationMode.NEGATIVE)
    op = _openapi(json.dumps(tool.input_schema, sort_keys=True))
    return op.as_strategy(generation_mode=generation).map(lambda case: case.body).filter(_json_object)


@dataclass(frozen=True)
class BoundaryCase:
    """An explicit edge case derived from the contract's limits."""

    label: str
    arguments: dict[str, Any]


def base_arguments(tool: ToolContract, fill: dict[str, Any]) -> dict[str, Any]:
    """The smallest valid-looking arguments: required properties from ``fill`` or a simple value."""
    args: dict[str, Any] = {}
    for name in tool.required_inputs:
        if name in fill:
            args[name] = fill[name]
        else:
            args[name] = _simple_value(tool.input_properties.get(name, {}))
    return args


def boundary_base(tool: ToolContract, fill: dict[str, Any], bounded: str) -> dict[str, Any]:
    """:func:`base_arguments` plus the properties one ``anyOf`` alternative requires (the one naming
    ``bounded``, else the first), so that a case of doc_get's ``collection`` is judged on its own
    bound, not refused for a missing ``slug``."""
    args = base_arguments(tool, fill)
    alternatives = [a.get("required", []) for a in tool.input_schema.get("anyOf", []) if isinstance(a, dict)]
    if alternatives:
        for name in next((a for a in alternatives if bounded in a), alternatives[0]):
            if name not in args:
                prop = resolved(tool.input_schema, tool.input_properties.get(name, {}))
                args[name] = fill.get(name, _simple_value(prop))
    return args


def resolved(document: dict[str, Any], prop: dict[str, Any]) -> dict[str, Any]:
    """``prop`` with its local ``$ref`` (``#/$defs/X``, as codegen inlines the shared definitions of
    spec/docpool/schemas/docpool.schema.json) merged in, the property's own keywords winning; a
    ``$ref`` outside the document is left as it is (the suite never fetches schemas)."""
    ref = prop.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return prop
    target: Any = document
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(target, dict) or part not in target:
            return prop
        target = target[part]
    if not isinstance(target, dict):
        return prop
    own = {k: v for k, v in prop.items() if k != "$ref"}
    return {**resolved(document, target), **own}


BOUNDED_KEYWORDS = ("minimum", "maximum", "maxLength", "maxItems", "pattern")


def input_limits(tool: ToolContract) -> dict[str, dict[str, Any]]:
    """Every top-level input property's bounds, from the schema itself (``$ref``s followed) and the
    contract's ``limits``: the latter lists only what tools.toml restates, so a ``Slug``'s maxLength
    reached through ``$ref`` (or an inline ``maxLength`` left out of ``[tool.limits]``) had no case."""
    out: dict[str, dict[str, Any]] = {}
    for name, prop in tool.input_properties.items():
        if not isinstance(prop, dict):
            continue
        schema = resolved(tool.input_schema, prop)
        found = {k: schema[k] for k in BOUNDED_KEYWORDS if k in schema}
        found.update({k: v for k, v in tool.limits.get(name, {}).items() if k in BOUNDED_KEYWORDS})
        if found:
            out[name] = found
    for name, limit in tool.limits.items():
        if name not in out and any(k in limit for k in BOUNDED_KEYWORDS):
            out[name] = {k: v for k, v in limit.items() if k in BOUNDED_KEYWORDS}
    return out


def _simple_value(prop: dict[str, Any]) -> Any:
    if "default" in prop:
        return prop["default"]
    if "enum" in prop:
        return prop["enum"][0]
    kind = prop.get("type")
    if kind == "integer":
        return max(prop.get("minimum", 1), 1)
    if kind == "number":
        return prop.get("minimum", 1)
    if kind == "boolean":
        return False
    if kind == "array":
        items = prop.get("items", {})
        return [_simple_value(items)] * prop.get("minItems", 0)
    if kind == "object":
        return {}
    return "x" * max(prop.get("minLength", 1), 1)


def boundary_cases(tool: ToolContract, fill: dict[str, Any]) -> list[BoundaryCase]:
    """0, 1, max and max+1 for numeric limits; lengths at and over maxLength; items at and over maxItems;
    a value breaking a pattern (at a length the schema allows)."""
    cases = []
    props = tool.input_properties
    for name, limit in sorted(input_limits(tool).items()):
        base = boundary_base(tool, fill, name)
        prop = resolved(tool.input_schema, props.get(name, {}))
        if "maximum" in limit or "minimum" in limit:
            lo, hi = limit.get("minimum"), limit.get("maximum")
            values = {0, 1}
            if lo is not None:
                values |= {lo, lo - 1}
            if hi is not None:
                values |= {hi, hi + 1}
            for v in sorted(values):
                cases.append(BoundaryCase(f"{name}={v}", {**base, name: v}))
        if "maxLength" in limit:
            n = limit["maxLength"]
            for size in (n, n + 1):
                value = _string_of(prop, size, fill.get(name))
                cases.append(BoundaryCase(f"len({name})={size}", {**base, name: value}))
        if "pattern" in limit:
            broken = _pattern_breaker(prop)
            if broken is not None:
                cases.append(BoundaryCase(f"{name}!~pattern", {**base, name: broken}))
        if "maxItems" in limit:
            n = limit["maxItems"]
            item = _simple_value(prop.get("items", {}))
            for size in (n, n + 1):
                cases.append(BoundaryCase(f"len({name})={size}", {**base, name: [item] * size}))
    return cases


def _pattern_breaker(prop: dict[str, Any]) -> str | None:
    """A string of an allowed length that fails the property's ``pattern`` (none when every candidate matches)."""
    pattern = prop.get("pattern")
    if not isinstance(pattern, str):
        return None
    size = max(prop.get("minLength", 1), 1)
    try:
        compiled = re.compile(pattern)
    except re.error:
        return None
    for stem in ("-", "N", " ", "_", "ü", "x"):
        value = (stem + "n" * size)[:size] if size > 1 else stem
        if compiled.search(value) is None and len(value) <= prop.get("maxLength", size):
            return value
    return None


def _string_of(prop: dict[str, Any], size: int, like: Any = None) -> str:
    """A string of ``size`` characters that keeps a ``\\S``-style pattern satisfied. When the
    meaningful value is an absolute path (a bundle path), the string is one too: a relative path
    is invalid input by the contract (read.md: bundle_path is absolute), whatever its length."""
    if isinstance(like, str) and like.startswith("/"):
        stem = like.rstrip("/") + "/"
        return (stem + "n" * size)[:size] if size > len(stem) else "/" + "n" * (size - 1)
    return ("needle" * (size // 6 + 1))[:size]
