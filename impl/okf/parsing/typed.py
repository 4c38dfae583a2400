"""Typed reads of frontmatter values (spec/okf/contract/read.md §1.3): what counts as a valid string, list, bool, int.

A string field is valid only when it is a ``!!str`` scalar (plain ``str`` from our loader), not
blank, and its key is not duplicated. These helpers never guess: anything else is invalid.
"""

from __future__ import annotations

from typing import Any, TypeGuard

from knowspec.impl.okf.parsing.frontmatter import YamlMap, YamlScalar

MISSING = object()


def get(mapping: Any, key: str) -> Any:
    """The value of ``key`` or MISSING; a duplicated key also reads as MISSING-but-present via
    :func:`is_duplicated` (callers that care check it first)."""
    if not isinstance(mapping, dict):
        return MISSING
    return mapping.get(key, MISSING)


def is_duplicated(mapping: Any, key: str) -> bool:
    return isinstance(mapping, YamlMap) and key in mapping.duplicates


def present(mapping: Any, key: str) -> bool:
    return isinstance(mapping, dict) and key in mapping


def is_str(value: Any) -> TypeGuard[str]:
    """A ``!!str`` scalar that is not blank."""
    return type(value) is str and value.strip() != ""


def read_str(mapping: Any, key: str) -> str | None:
    if is_duplicated(mapping, key):
        return None
    value = get(mapping, key)
    return value if is_str(value) else None


def read_tags(mapping: Any) -> list[str]:
    if is_duplicated(mapping, "tags"):
        return []
    value = get(mapping, "tags")
    if not isinstance(value, list):
        return []
    return [item for item in value if is_str(item)]


def is_bool(value: Any) -> TypeGuard[YamlScalar]:
    return isinstance(value, YamlScalar) and value.tag == "bool"


def is_uint(value: Any) -> bool:
    """``!!int`` ≥ 0 that fits uint64."""
    return (
        isinstance(value, YamlScalar)
        and value.tag == "int"
        and isinstance(value.value, int)
        and 0 <= value.value < 2**64
    )


def raw_scalar_text(value: Any) -> str:
    """Raw scalar text for state echoes; ``""`` for mappings and sequences."""
    return str(value) if isinstance(value, str) else ""


def is_date_like(value: Any) -> bool:
    """Date/timestamp fields accept ``!!str`` and ``!!timestamp`` scalars."""
    return type(value) is str or (isinstance(value, YamlScalar) and value.tag == "timestamp")
