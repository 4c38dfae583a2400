"""Orderings read from the contract itself: each tool's ``ordering`` prose, tie-breaks included.

The contract states every ordered array in a small controlled language ("confidence descending,
then collection, slug"; "severity ERROR, WARN, INFO; then file ... byte-wise"; "kind (navigation
before relation)"; "fts: bm25 ascending; vector and hybrid: score descending; ties by ..."). This
module turns that prose into sort keys over the fields the contract's success schema gives the
array's items, so every tool with a declared order is judged, not only those with a hand-written
oracle. A clause that is not a sort over item fields ("store diagnostics first", "in order of
first occurrence in the query") yields no rule. Pure functions: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from knowspec.conformance.contract import ToolContract
from knowspec.conformance.schema_shape import shape

SYNONYMS = {"bm25": "score", "iri": "@id"}
MODIFIERS = {"ascending", "descending", "byte-wise", "bytewise", "each", "then", "by", "canonical", "strictly",
             "unique", "nodes", "normalised", "normalized", "footnote", "label", "the", "of", "ties"}
NOT_A_SORT = ("order of first occurrence", "in the order of", "store diagnostics first")


@dataclass(frozen=True)
class Key:
    """One sort key: an item field (dotted path; ``""`` is the item itself), its direction, and
    an optional rank of named values (``kind (navigation before relation)``)."""

    path: str
    descending: bool = False
    rank: tuple[Any, ...] = ()
    first: Any = None          # "netsim-help first": this value sorts before every other
    null_as_empty: bool = False


@dataclass(frozen=True)
class Rule:
    array: str                 # dotted path of the array in structuredContent
    keys: tuple[Key, ...]
    strict: bool = False       # "strictly ascending", "unique", "deduplicated": no two equal keys
    at_most: int | None = None
    variants: tuple[tuple[str, tuple[Key, ...]], ...] = field(default=())   # (label, keys) by item method
    prose: str = ""


# ---- the item fields the contract gives an array ---------------------------------------------

def _items_schema(schema: Any, path: str) -> Any:
    node = schema
    for part in path.split("."):
        if not isinstance(node, dict):
            return None
        if "items" in node and "properties" not in node:
            node = node["items"]
        node = (node.get("properties") or {}).get(part) if isinstance(node, dict) else None
    return node.get("items") if isinstance(node, dict) else None


def _fields(items: Any, prefix: str = "", depth: int = 0) -> set[str]:
    """Dotted field paths of the items (every alternative's, one level of nesting)."""
    if not isinstance(items, dict):
        return set()
    out: set[str] = set()
    for alt in items.get("anyOf") or items.get("oneOf") or [items]:
        for name, sub in (alt.get("properties") or {}).items() if isinstance(alt, dict) else ():
            out.add(prefix + name)
            if depth < 1:
                out |= _fields(sub, f"{prefix}{name}.", depth + 1)
    return out


# ---- the prose ---------------------------------------------------------------------------------

def _field_of(term: str, fields: set[str]) -> str | None:
    words = [SYNONYMS.get(w.lower(), w.lower()) for w in re.findall(r"[@\w.-]+", term)]
    for a, b in zip(words, words[1:]):
        for joined in (f"{a}.{b}", f"{a}_{b}"):
            if joined in fields:
                return joined
    for word in reversed(words):
        if word in fields and word not in MODIFIERS:
            return word
    return None


def _keys(segment: str, fields: set[str], strings: bool) -> tuple[Key, ...] | None:
    """Sort keys of one ``;``-free clause; None when its first term names no item field."""
    each_desc = "each byte-wise descending" in segment
    rank_match = re.match(r"^\s*([\w@]+) priority (.+)$", segment)
    if rank_match:                                   # "match priority id, title, ..."
        values = tuple(v.strip() for v in rank_match.group(2).split(","))
        return (Key(rank_match.group(1), rank=values),)
    enum_match = re.match(r"^\s*([\w@]+) ((?:[A-Z]+,?\s*)+)$", segment)
    if enum_match and enum_match.group(1) in fields:  # "severity ERROR, WARN, INFO"
        values = tuple(v.strip() for v in enum_match.group(2).split(",") if v.strip())
        return (Key(enum_match.group(1), rank=values),)
    keys: list[Key] = []
    for raw in re.split(r",\s*(?:then\s+)?|\s+then\s+", segment):
        term = raw.strip()
        if not term or set(term.split()) <= MODIFIERS:
            continue
        before = re.search(r"\((\w+) before (\w+)\)", term)
        first = re.match(r"^([\w-]+) first$", term)
        paren = re.search(r"\(([\w@]+)\)", term)
        path = _field_of(paren.group(1), fields) if paren else None
        path = path or _field_of(re.sub(r"\(.*?\)", "", term), fields)
        if first and path is None:                   # "netsim-help first" (a value, not a field)
            keys.append(Key("", first=first.group(1)))
            continue
        value_first = re.match(r"^([\w@]+) (false|true) first$", term)
        if value_first and value_first.group(1) in fields:   # "policy_failure false first"
            keys.append(Key(value_first.group(1), descending=value_first.group(2) == "true"))
            continue
        if path is None:
            if strings and not keys and not fields and "path" in term:
                keys.append(Key("", descending="descending" in term))
                continue
            if not keys:
                return None
            break                                    # a later key we cannot read: judge the prefix
        keys.append(Key(path, descending="descending" in term or each_desc,
                        rank=(before.group(1), before.group(2)) if before else (),
                        null_as_empty="null as empty" in term))
    if keys and keys[0].path == "" and keys[0].first is not None and len(keys) > 1:
        keys[0] = Key(keys[1].path, first=keys[0].first)
    return tuple(keys) or None


def _string_rank(segment: str) -> tuple[Key, ...] | None:
    """Items that are plain strings listed in a fixed order ("navigation, relation, source")."""
    head = segment.split("(")[0]
    values = tuple(v.strip() for v in head.split(",") if v.strip())
    if len(values) > 1 and all(re.fullmatch(r"[a-z_]+", v) for v in values):
        return (Key("", rank=values),)
    return None


def rule_for(array: str, prose: str, success_schema: Any) -> Rule | None:
    """The sort rule the prose states for ``array``, or None when it states no sort on item fields."""
    if any(phrase in prose for phrase in NOT_A_SORT):
        return None
    items = _items_schema(shape(success_schema), array)
    fields = _fields(items)
    strings = isinstance(items, dict) and ("string" in (items.get("type") or []) or "enum" in items)
    strict = any(w in prose for w in ("strictly", "unique", "deduplicated"))
    at_most = re.search(r"at most (\d+)", prose)
    limit = int(at_most.group(1)) if at_most else None
    segments = [s.strip() for s in re.sub(r";?\s*at most \d+", "", prose).split(";") if s.strip()]
    labelled = [re.match(r"^([\w ]+):\s*(.+)$", s) for s in segments]
    if any(labelled):                                 # "fts: ...; vector and hybrid: ...; ties by ..."
        ties = tuple(k for s, m in zip(segments, labelled) if not m
                     for k in (_keys(re.sub(r"^ties by\s+", "", s), fields, strings) or ()))
        variants = []
        for match in labelled:
            if match:
                keys = _keys(match.group(2), fields, strings)
                if keys:
                    variants.append((match.group(1).strip(), keys + ties))
        return Rule(array, (), strict, limit, tuple(variants), prose) if variants else None
    keys: list[Key] = []
    for segment in segments:
        segment = re.sub(r"^then\s+", "", segment)
        found = _keys(segment, fields, strings) if fields or strings else None
        if found is None and strings and not keys:
            found = _string_rank(segment)
        if found is None:
            break
        keys += found
    return Rule(array, tuple(keys), strict, limit, prose=prose) if keys or limit is not None else None


def rules(tool: ToolContract) -> list[Rule]:
    out = []
    for array, prose in sorted(tool.ordering.items()):
        rule = rule_for(array, prose, tool.success_schema)
        if rule is not None:
            out.append(rule)
    return out


# ---- judging a result ------------------------------------------------------------------------

def _get(item: Any, path: str) -> Any:
    for part in path.split(".") if path else ():
        item = item.get(part) if isinstance(item, dict) else None
    return item


def _value(key: Key, item: Any) -> tuple:
    value = _get(item, key.path)
    if key.first is not None:
        return (0,) if value == key.first else (1,)
    if key.rank:
        return (key.rank.index(value),) if value in key.rank else (len(key.rank), str(value))
    if value is None:
        return (1, b"") if key.null_as_empty else (0,)
    if isinstance(value, bool):
        return (1, int(value))
    if isinstance(value, (int, float)):
        return (1, value)
    return (1, str(value).encode("utf-8"))


def _compare(keys: tuple[Key, ...], a: Any, b: Any) -> int:
    for key in keys:
        va, vb = _value(key, a), _value(key, b)
        try:
            if va != vb:
                less = va < vb
                return (1 if less else -1) if key.descending and key.first is None and not key.rank else (
                    -1 if less else 1)
        except TypeError:
            return 0
    return 0


def _arrays(out: Any, path: str) -> list[list[Any]]:
    """Every array at ``path`` (``hits.matched_terms``: one per hit)."""
    parts = path.split(".")
    nodes = [out]
    for i, part in enumerate(parts):
        nxt = []
        for node in nodes:
            value = node.get(part) if isinstance(node, dict) else None
            if i < len(parts) - 1 and isinstance(value, list):
                nxt += value
            elif value is not None:
                nxt.append(value)
        nodes = nxt
    return [n for n in nodes if isinstance(n, list)]


def _variant_keys(rule: Rule, items: list[Any]) -> tuple[Key, ...] | None:
    if not rule.variants:
        return rule.keys
    methods = {_get(i, "method") for i in items if isinstance(i, dict)} - {None}
    if len(methods) == 1:
        method = str(methods.pop())
        for label, keys in rule.variants:
            if re.search(rf"\b{re.escape(method)}\b", label):
                return keys
        return None
    if methods:
        return None
    # no method field: the variant whose every key the items carry, the most specific first
    def carried(keys: tuple[Key, ...]) -> bool:
        return all(all(isinstance(i, dict) and (k.path == "" or _get(i, k.path) is not None or
                                               k.path.split(".")[0] in i) for k in keys) for i in items)
    fitting = [keys for _label, keys in rule.variants if carried(keys)]
    return max(fitting, key=len) if fitting else None


def violations(rules_: list[Rule], out: Any) -> list[str]:
    problems = []
    for rule in rules_:
        for items in _arrays(out, rule.array):
            if rule.at_most is not None and len(items) > rule.at_most:
                problems.append(f"{rule.array} holds {len(items)} items, at most {rule.at_most} ({rule.prose})")
            keys = _variant_keys(rule, items)
            if not keys:
                continue
            for i in range(len(items) - 1):
                order = _compare(keys, items[i], items[i + 1])
                if order > 0 or (rule.strict and order == 0):
                    problems.append(f"{rule.array}[{i}] and {rule.array}[{i + 1}] break the contract's order "
                                    f"\"{rule.prose}\"")
                    break
    return problems
