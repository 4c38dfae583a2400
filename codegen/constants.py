"""The named enumerations of the tool inputs, for ``generated/constants.py``.

Hand-written code needs some spec values by name (the temporal profiles, the search modes); it
imports them from the generated module instead of restating the strings. Every enumeration an
input schema names (through ``$defs`` or a ``title``) is collected once, with the default the tools give it when
they all agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from knowspec.codegen.model import SpecModel


class EnumConflict(ValueError):
    """Two tools define the same enumeration name with different values."""


@dataclass(frozen=True)
class EnumConstant:
    name: str                          # the $defs name, e.g. TemporalProfile
    values: tuple[str, ...]
    default: str | None                # the default every tool gives it, or None
    members: tuple[tuple[str, str], ...]  # (constant suffix, value), e.g. ("DATE", "date-3fcbb9f")

    @property
    def prefix(self) -> str:
        return re.sub(r"(?<!^)(?=[A-Z])", "_", self.name).upper()


def _named_enum(schema: dict[str, Any], node: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """``$ref: #/$defs/<Name>`` or an inline enumeration with a ``title``."""
    if "enum" in node and isinstance(node.get("title"), str):
        return node["title"], node
    ref = node.get("$ref", "")
    if not ref.startswith("#/$defs/"):
        return None
    name = ref.removeprefix("#/$defs/")
    target = schema.get("$defs", {}).get(name)
    return (name, target) if isinstance(target, dict) else None


def _member_names(values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """A value's first ``-``-separated word names it when that is unique, else the whole value."""
    def word(v: str) -> str:
        return re.sub(r"[^0-9A-Za-z]+", "_", v).strip("_").upper()

    short = [word(v.split("-")[0]) for v in values]
    if len(set(short)) != len(short):
        short = [word(v) for v in values]
    return tuple(zip(short, values))


def input_enums(spec: SpecModel) -> list[EnumConstant]:
    """Every named string enumeration of the input schemas, sorted by name."""
    found: dict[str, tuple[tuple[str, ...], set[Any]]] = {}
    for tool in spec.tools:
        schema = tool.input_schema
        for prop in schema.get("properties", {}).values():
            for node, default in ((prop, prop.get("default")), (prop.get("items") or {}, None)):
                hit = _named_enum(schema, node) if isinstance(node, dict) else None
                if hit is None or not isinstance(hit[1].get("enum"), list):
                    continue
                name, target = hit
                values = tuple(str(v) for v in target["enum"])
                known = found.setdefault(name, (values, set()))
                if known[0] != values:
                    raise EnumConflict(f"{tool.name}: enumeration {name} is {values}, elsewhere {known[0]}")
                known[1].add(default if "default" in prop and node is prop else "<none>")
    out = []
    for name, (values, defaults) in sorted(found.items()):
        given = defaults - {"<none>"}
        default = next(iter(given)) if len(given) == 1 else None
        out.append(EnumConstant(name, values, default, _member_names(values)))
    return out
