"""Compare two contract views and name every change; ``spec_rules`` says what each one means.

Pure: views in, ``Change`` records out. Schemas are compared by meaning: local ``$ref``s are
resolved first, and each keyword is judged by what it allows (a raised ``maximum`` widens, an
added required property narrows), so reordering keys or moving a definition changes nothing.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any, Iterator

from knowspec.codegen.contract_view import ContractView
from knowspec.codegen.spec_rules import classify

LOWER_BOUNDS = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
UPPER_BOUNDS = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
CONSTRAINTS = ("pattern", "format", "const", "uniqueItems", "if", "then", "else", "not", "multipleOf")
PROSE = ("description", "title", "examples", "$comment")
BRANCHES = ("anyOf", "oneOf", "allOf")
AUTH_LEVEL = {"none": 0, "session": 1, "sysadmin": 2}


@dataclass(frozen=True)
class Change:
    scope: str      # tool | error | endpoint | ddl
    subject: str    # tool name, error code, "POST /path", table name
    where: str      # the field, e.g. "input.limit.maximum"; "" for the subject itself
    kind: str       # a key of spec_rules.RULES
    old: Any = None
    new: Any = None

    @property
    def cls(self) -> str:
        return classify(self.kind)


def diff(old: ContractView, new: ContractView) -> list[Change]:
    changes = [*_tools(old, new), *_errors(old, new), *_endpoints(old, new), *_ddl(old.ddl, new.ddl)]
    return sorted(changes, key=lambda c: (c.scope, c.subject, c.where, c.kind))


# --- tools -----------------------------------------------------------------------------------


def _tools(old: ContractView, new: ContractView) -> Iterator[Change]:
    for name in sorted(old.tools.keys() - new.tools.keys()):
        yield Change("tool", name, "", "tool.removed")
    for name in sorted(new.tools.keys() - old.tools.keys()):
        yield Change("tool", name, "", "tool.added")
    for name in sorted(old.tools.keys() & new.tools.keys()):
        yield from _tool(name, old.tools[name], new.tools[name])


def _tool(name: str, a: dict[str, Any], b: dict[str, Any]) -> Iterator[Change]:
    for flag in ("read_only", "idempotent"):
        if bool(a.get(flag)) != bool(b.get(flag)):
            yield Change("tool", name, flag, f"tool.{flag}_{'set' if b.get(flag) else 'cleared'}", a.get(flag), b.get(flag))
    for key in sorted(set(a.get("ordering", {})) | set(b.get("ordering", {}))):
        if a.get("ordering", {}).get(key) != b.get("ordering", {}).get(key):
            yield Change("tool", name, f"ordering.{key}", "tool.ordering_changed",
                         a.get("ordering", {}).get(key), b.get("ordering", {}).get(key))
    for key in ("text_fallback", "text_encoder", "wrap"):
        if a.get(key, "") != b.get(key, "") and not (key == "text_encoder" and {a.get(key), b.get(key)} <= {None, "plain"}):
            yield Change("tool", name, key, "tool.text_changed", a.get(key), b.get(key))
    errors_a, errors_b = set(a.get("errors", ())), set(b.get("errors", ()))
    for code in sorted(errors_b - errors_a):
        yield Change("tool", name, "errors", "tool.error_added", None, code)
    for code in sorted(errors_a - errors_b):
        yield Change("tool", name, "errors", "tool.error_removed", code, None)
    for key in ("title", "description"):
        if a.get(key, "") != b.get(key, ""):
            yield Change("tool", name, key, "tool.prose_changed")
    yield from schema_changes("tool", name, "input", a.get("input_schema", {}), b.get("input_schema", {}), "input")
    yield from schema_changes("tool", name, "output", a.get("success_schema") or {}, b.get("success_schema") or {}, "output")


# --- schemas ---------------------------------------------------------------------------------


def schema_changes(scope: str, subject: str, where: str, a: dict[str, Any], b: dict[str, Any],
                   direction: str) -> Iterator[Change]:
    """Changes between two JSON Schemas; ``direction`` is ``input`` (sent to the server) or ``output``."""
    yield from _node(scope, subject, where, _resolve(a, a), _resolve(b, b), direction, 0)


def _resolve(node: Any, root: dict[str, Any], depth: int = 0) -> Any:
    """Inline local ``#/$defs/...`` references (bounded, so a recursive definition stops)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/") and depth < 12:
            target: Any = root
            for part in ref[2:].split("/"):
                target = target.get(part, {}) if isinstance(target, dict) else {}
            merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
            return _resolve(merged, root, depth + 1)
        return {k: _resolve(v, root, depth) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_resolve(v, root, depth) for v in node]
    return node


def _without_prose(node: Any) -> Any:
    """A schema with its descriptions, titles and examples left out: what it allows, only."""
    if isinstance(node, dict):
        return {k: _without_prose(v) for k, v in node.items() if k not in PROSE and k != "default"}
    if isinstance(node, list):
        return [_without_prose(v) for v in node]
    return node


def _types(node: dict[str, Any]) -> set[str]:
    kind = node.get("type")
    if kind is None:
        return set()
    types = {kind} if isinstance(kind, str) else set(kind)
    return types | {"integer"} if "number" in types else types


def _node(scope: str, subject: str, where: str, a: Any, b: Any, direction: str, depth: int) -> Iterator[Change]:
    if not isinstance(a, dict) or not isinstance(b, dict) or depth > 40:
        return
    d = direction

    def change(kind: str, field: str = "", old: Any = None, new: Any = None) -> Change:
        return Change(scope, subject, f"{where}.{field}" if field else where, f"{d}.{kind}", old, new)

    ta, tb = _types(a), _types(b)
    if ta and tb:
        if tb - ta:
            yield change("type_widened", "type", sorted(ta), sorted(tb))
        if ta - tb:
            yield change("type_narrowed", "type", sorted(ta), sorted(tb))
    elif ta and not tb:
        yield change("type_widened", "type", sorted(ta), None)
    elif tb and not ta:
        yield change("type_narrowed", "type", None, sorted(tb))
    if "enum" in a or "enum" in b:
        ea, eb = a.get("enum"), b.get("enum")
        if ea is None:
            yield change("enum_narrowed", "enum", None, eb)
        elif eb is None:
            yield change("enum_widened", "enum", ea, None)
        else:
            if [v for v in eb if v not in ea]:
                yield change("enum_widened", "enum", ea, eb)
            if [v for v in ea if v not in eb]:
                yield change("enum_narrowed", "enum", ea, eb)
    for key in LOWER_BOUNDS + UPPER_BOUNDS:
        va, vb = a.get(key), b.get(key)
        if va == vb:
            continue
        lower = key in LOWER_BOUNDS
        if va is None or vb is None:
            narrowed = va is None  # a bound appears: narrower; one disappears: wider
        else:
            narrowed = vb > va if lower else vb < va
        yield change("bound_narrowed" if narrowed else "bound_widened", key, va, vb)
    for key in CONSTRAINTS:
        if _without_prose(a.get(key)) != _without_prose(b.get(key)):
            yield change("constraint_changed", key, a.get(key), b.get(key))
    if a.get("default") != b.get("default"):
        yield change("default_changed", "default", a.get("default"), b.get("default"))
    if any(a.get(k) != b.get(k) for k in PROSE):
        yield change("prose_changed")
    yield from _object(change, scope, subject, where, a, b, direction, depth)
    for key in ("items", "contains", "propertyNames"):
        yield from _node(scope, subject, f"{where}[]" if key == "items" else f"{where}.{key}",
                         a.get(key), b.get(key), direction, depth + 1)
    for key in BRANCHES + ("prefixItems",):
        la, lb = a.get(key) or [], b.get(key) or []
        if len(la) != len(lb):
            wider = (len(lb) > len(la)) == (key != "allOf")
            yield change("type_widened" if wider else "type_narrowed", key, len(la), len(lb))
        for i, (x, y) in enumerate(zip(la, lb)):
            yield from _node(scope, subject, f"{where}.{key}[{i}]", x, y, direction, depth + 1)


def _object(change, scope, subject, where, a, b, direction, depth) -> Iterator[Change]:
    pa, pb = a.get("properties") or {}, b.get("properties") or {}
    closed_a, closed_b = a.get("additionalProperties") is False, b.get("additionalProperties") is False
    # An output object closed on both sides admits exactly its properties: one more is a value an
    # OLD client refuses, one fewer a value an OLD server still sends (an input is always closed).
    closed = "closed_" if direction == "output" and closed_a and closed_b else ""
    for name in sorted(pb.keys() - pa.keys()):
        yield change(f"{closed}property_added", name)
    for name in sorted(pa.keys() - pb.keys()):
        yield change(f"{closed}property_removed", name)
    ra, rb = set(a.get("required") or ()), set(b.get("required") or ())
    for name in sorted(rb - ra):
        yield change("required_added", name)
    for name in sorted(ra - rb):
        yield change("required_removed", name)
    if closed_a != closed_b:
        yield change("closed" if closed_b else "opened", "additionalProperties")
    for name in sorted(pa.keys() & pb.keys()):
        yield from _node(scope, subject, f"{where}.{name}", pa[name], pb[name], direction, depth + 1)
    extra_a, extra_b = a.get("additionalProperties"), b.get("additionalProperties")
    if isinstance(extra_a, dict) and isinstance(extra_b, dict):
        yield from _node(scope, subject, f"{where}.*", extra_a, extra_b, direction, depth + 1)


# --- error codes -----------------------------------------------------------------------------


def _errors(old: ContractView, new: ContractView) -> Iterator[Change]:
    removed = sorted(old.error_codes.keys() - new.error_codes.keys())
    added = sorted(new.error_codes.keys() - old.error_codes.keys())
    meaning = {(v.get("meaning") or "").strip(): k for k, v in ((k, new.error_codes[k]) for k in added)}
    for code in removed:
        renamed = meaning.pop((old.error_codes[code].get("meaning") or "").strip(), None)
        if renamed:
            added.remove(renamed)
            yield Change("error", code, "", "error.renamed", code, renamed)
        else:
            yield Change("error", code, "", "error.removed")
    for code in added:
        yield Change("error", code, "", "error.added")
    for code in sorted(old.error_codes.keys() & new.error_codes.keys()):
        a, b = old.error_codes[code], new.error_codes[code]
        if bool(a.get("retryable")) != bool(b.get("retryable")):
            yield Change("error", code, "retryable", "error.retryable_changed", a.get("retryable"), b.get("retryable"))
        if a.get("meaning") != b.get("meaning"):
            yield Change("error", code, "meaning", "error.prose_changed")


# --- REST endpoints --------------------------------------------------------------------------


def _endpoints(old: ContractView, new: ContractView) -> Iterator[Change]:
    for key in sorted(old.endpoints.keys() - new.endpoints.keys()):
        yield Change("endpoint", key, "", "endpoint.removed")
    for key in sorted(new.endpoints.keys() - old.endpoints.keys()):
        yield Change("endpoint", key, "", "endpoint.added")
    for key in sorted(old.endpoints.keys() & new.endpoints.keys()):
        a, b = old.endpoints[key], new.endpoints[key]
        la, lb = AUTH_LEVEL.get(a.get("auth", "none"), 0), AUTH_LEVEL.get(b.get("auth", "none"), 0)
        if la != lb:
            yield Change("endpoint", key, "auth", "endpoint.auth_tightened" if lb > la else "endpoint.auth_loosened",
                         a.get("auth"), b.get("auth"))
        for status in sorted(set(b.get("errors", ())) - set(a.get("errors", ()))):
            yield Change("endpoint", key, "errors", "endpoint.status_added", None, status)
        for status in sorted(set(a.get("errors", ())) - set(b.get("errors", ()))):
            yield Change("endpoint", key, "errors", "endpoint.status_removed", status, None)
        if a.get("summary") != b.get("summary"):
            yield Change("endpoint", key, "summary", "endpoint.prose_changed")
        yield from schema_changes("endpoint", key, "request", a.get("request") or {}, b.get("request") or {}, "input")
        for part in ("response", "accepted"):
            yield from schema_changes("endpoint", key, part, a.get(part) or {}, b.get(part) or {}, "output")


# --- pool DDL --------------------------------------------------------------------------------


def ddl_tables(ddl: str) -> dict[str, dict[str, tuple[str, bool]]]:
    """table -> column -> (declared type, required: NOT NULL without a default), read by SQLite itself."""
    if not ddl.strip():
        return {}
    db = sqlite3.connect(":memory:")
    try:
        db.executescript(ddl)
        names = [r[0] for r in db.execute("select name from sqlite_master where type = 'table' and name not like 'sqlite_%'")]
        tables = {}
        for name in names:
            quoted = '"' + name.replace('"', '""') + '"'
            tables[name] = {col: (kind.upper(), bool(notnull) and default is None and not pk)
                            for _, col, kind, notnull, default, pk in db.execute(f"pragma table_info({quoted})")}
        return tables
    finally:
        db.close()


def _ddl(old: str, new: str) -> Iterator[Change]:
    ta, tb = ddl_tables(old), ddl_tables(new)
    for table in sorted(ta.keys() - tb.keys()):
        yield Change("ddl", table, "", "ddl.table_removed")
    for table in sorted(tb.keys() - ta.keys()):
        yield Change("ddl", table, "", "ddl.table_added")
    for table in sorted(ta.keys() & tb.keys()):
        a, b = ta[table], tb[table]
        for col in sorted(a.keys() - b.keys()):
            yield Change("ddl", table, col, "ddl.column_removed")
        for col in sorted(b.keys() - a.keys()):
            yield Change("ddl", table, col, "ddl.column_required" if b[col][1] else "ddl.column_added")
        for col in sorted(a.keys() & b.keys()):
            if a[col][0] != b[col][0]:
                yield Change("ddl", table, col, "ddl.column_type_changed", a[col][0], b[col][0])
            if a[col][1] != b[col][1]:
                yield Change("ddl", table, col, "ddl.column_required" if b[col][1] else "ddl.column_optional")
