"""Agents read the tool list: every description is plain English and every input is explained.

Checked on what clients see (the generated registry and schemas): each input property has a
description; a Turkish term from the seed, an internal table name or an opaque profile id
appears only together with what it means; read tools say so in their annotations.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

import pytest

from knowspec.generated.registry import TOOLS

# term -> a pattern the same description must contain when the term appears (None: never allowed)
EXPLAINED: dict[str, str | None] = {
    "erisim": r"\baccess\b",
    "herkes": r"\beveryone\b",
    "kisitli": r"\brestricted\b",
    "islem_kodu": r"transaction code",
    "islem_kodlari": r"transaction codes",
    "kod": r"\bcode\b",
    "form_class": r"\bform\b",
    "opens_mobile": r"mobile",
    "yardim": r"\bhelp\b",
    "-DATABASE": None,
    "doc$": None,
    "db$": None,
    "auth$": None,
    "the seed": None,
    "seed's": None,
    "date-3fcbb9f": r"calendar date|YYYY-MM-DD",
    "instant-0b87c52": r"date-time|offset",
    "skosovsky/okf-v0.2": r"JSON-LD",
}
# A value copied back unchanged from a preview's answer: its inner fields are the preview's to describe.
ECHOED = re.compile(r"copy it unchanged|the preview returned")
READ_TOOL = re.compile(r"^(list|search|read|get|validate|preview|doc|help)_")


def descriptions(node: Any, path: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "description" and isinstance(value, str):
                yield path or "/", value
            else:
                yield from descriptions(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from descriptions(value, f"{path}/{i}")


def _deref(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return root.get("$defs", {}).get(ref.split("/")[-1], {})
    return {}


def undescribed_properties(node: Any, root: dict[str, Any], path: str = "", seen: frozenset = frozenset(),
                           declared: frozenset = frozenset()) -> list[str]:
    """Paths of input properties with no description on the property or the definition it names.

    A property restated inside an allOf/anyOf/oneOf branch to constrain it (its name declared
    by the schema around the branch) is the same property and is not counted again.
    """
    if not isinstance(node, dict):
        return []
    out: list[str] = []
    ref = node.get("$ref")
    target = _deref(node, root)
    if target and ref not in seen:
        out += undescribed_properties(target, root, path, seen | {ref})
    own = node.get("properties") or {}
    for name, prop in own.items():
        if not isinstance(prop, dict) or name in declared:
            continue
        text = prop.get("description") or _deref(prop, root).get("description")
        if not text:
            out.append(f"{path}/{name}")
        if not (text and ECHOED.search(text)):
            out += undescribed_properties(prop, root, f"{path}/{name}", seen)
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            out += undescribed_properties(node[key], root, f"{path}/{key}", seen)
    around = declared | set(own)
    for key in ("anyOf", "oneOf", "allOf"):
        for i, sub in enumerate(node.get(key) or []):
            out += undescribed_properties(sub, root, f"{path}/{key}/{i}", seen, frozenset(around))
    return out


def unexplained_terms(text: str) -> list[str]:
    found = []
    for term, explanation in EXPLAINED.items():
        after = r"(?![\w$])" if term[-1].isalnum() or term[-1] == "_" else ""
        if re.search(rf"(?<![\w$-]){re.escape(term)}{after}", text):
            if explanation is None or not re.search(explanation, text, re.I):
                found.append(term)
    return found


NAMES = [t.name for t in TOOLS]


def test_every_tool_is_checked():
    assert len(TOOLS) == 25


@pytest.mark.parametrize("name", NAMES)
def test_every_input_property_is_described(name):
    tool = next(t for t in TOOLS if t.name == name)
    assert undescribed_properties(tool.input_schema, tool.input_schema) == []


@pytest.mark.parametrize("name", NAMES)
def test_descriptions_explain_seed_terms_and_name_no_internals(name):
    tool = next(t for t in TOOLS if t.name == name)
    texts = [("tool", tool.description)]
    texts += [(f"input{p}", d) for p, d in descriptions(tool.input_schema)]
    texts += [(f"output{p}", d) for p, d in descriptions(tool.output_schema)]
    problems = [f"{where}: {terms} in {text!r}" for where, text in texts if (terms := unexplained_terms(text))]
    assert problems == []


@pytest.mark.parametrize("name", NAMES)
def test_annotations_match_what_the_tool_does(name):
    tool = next(t for t in TOOLS if t.name == name)
    hints = tool.annotations
    if READ_TOOL.match(name):
        assert hints["readOnlyHint"] and hints["idempotentHint"] and not hints["destructiveHint"]
    else:
        assert not hints["readOnlyHint"] and hints["destructiveHint"]
    assert hints["openWorldHint"] is False


@pytest.mark.parametrize(("text", "terms"), [
    ("kind, erisim ('herkes' = everyone)", ["erisim"]),
    ("kind, erisim (access: 'herkes' = everyone)", []),
    ("the general search recipe (doc$meta)", ["doc$"]),
    ("by islem_kodu", ["islem_kodu"]),
    ("by islem_kodu (transaction code)", []),
    ("the server's -DATABASE", ["-DATABASE"]),
    ("the server's --database", []),
])
def test_the_rule_itself(text, terms):
    assert unexplained_terms(text) == terms
