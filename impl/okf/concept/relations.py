"""The toolkit ``relations`` extension (spec/okf/contract/read.md §1.7): typed edges between concepts and fragments.

A ``relations:`` mapping ``{<type>: [{target: "<ref>"}, …]}`` may sit at the top level or in
nested non-standard mappings; a nested one's source fragment is the nearest enclosing mapping
with a valid ``id`` (else ``anchor``). Standard-family subtrees are never searched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from knowspec.impl.okf.concept.ids import format_ref, parse_ref
from knowspec.impl.okf.parsing.typed import is_duplicated, is_str

STANDARD_KEYS = frozenset(
    "type title description resource tags okf_version timestamp sources usage_window generated "
    "verified status stale_after runtime parameters computation executor attester".split()
)
RESERVED_TYPES = frozenset(
    "attester bundle computation description executor exists generated is_part_of okf "
    "okf_version parameters references resource runtime sources stale_after status tags target "
    "timestamp title type usage_window verified".split()
)
_TYPE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Relation:
    """A syntactically valid relation: ``from_ref``/``to_ref`` escaped refs (``hash\\#name``,
    ``a#section``), ``relation_type``, the target concept ``target_id`` and fragment."""

    from_ref: str
    to_ref: str
    relation_type: str
    target_id: str
    target_fragment: str | None


def valid_relation_type(name: Any) -> bool:
    return isinstance(name, str) and bool(_TYPE.match(name)) and name not in RESERVED_TYPES


def _fragment_of(mapping: dict) -> str | None:
    for key in ("id", "anchor"):
        if is_duplicated(mapping, key):
            continue
        value = mapping.get(key)
        if is_str(value):
            return value
    return None


def _relations_in(block: Any, source_ref: str) -> list[Relation]:
    out: list[Relation] = []
    if not isinstance(block, dict):
        return out
    dups: frozenset[str] = getattr(block, "duplicates", frozenset())
    for rtype, items in block.items():
        if not valid_relation_type(rtype) or rtype in dups or not isinstance(items, list):
            continue
        for item in items:
            if not isinstance(item, dict) or set(item.keys()) != {"target"}:
                continue
            if is_duplicated(item, "target"):
                continue
            target = item["target"]
            if not is_str(target):
                continue
            parsed = parse_ref(target)
            if parsed is None:
                continue
            tid, frag = parsed
            out.append(Relation(source_ref, format_ref(tid, frag), rtype, tid, frag))
    return out


def collect_relations(concept_id: str, frontmatter: dict) -> list[Relation]:
    """All valid relations of a concept, top level first, then nested in key order."""
    out: list[Relation] = []
    if not isinstance(frontmatter, dict):
        return out
    if not is_duplicated(frontmatter, "relations"):
        out.extend(_relations_in(frontmatter.get("relations"), format_ref(concept_id, None)))
    for key, value in frontmatter.items():
        if key in STANDARD_KEYS or key == "relations":
            continue
        _walk_nested(concept_id, value, None, out, 0)
    return out


def _walk_nested(concept_id: str, value: Any, fragment: str | None, out: list, depth: int) -> None:
    if depth > 64:
        return
    if isinstance(value, list):
        for item in value:
            _walk_nested(concept_id, item, fragment, out, depth + 1)
        return
    if not isinstance(value, dict):
        return
    own = _fragment_of(value)
    frag = own if own is not None else fragment
    if "relations" in value and not is_duplicated(value, "relations"):
        out.extend(_relations_in(value["relations"], format_ref(concept_id, frag)))
    for key, child in value.items():
        if key != "relations":
            _walk_nested(concept_id, child, frag, out, depth + 1)


def declared_fragments(frontmatter: dict) -> dict[str, int]:
    """Count of mappings declaring each fragment (``id`` or else ``anchor``) outside standard keys."""
    counts: dict[str, int] = {}
    if not isinstance(frontmatter, dict):
        return counts
    stack: list[tuple[Any, int]] = [
        (v, 0) for k, v in frontmatter.items() if k not in STANDARD_KEYS and k != "relations"
    ]
    while stack:
        value, depth = stack.pop()
        if depth > 64:
            continue
        if isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
        elif isinstance(value, dict):
            frag = _fragment_of(value)
            if frag is not None:
                counts[frag] = counts.get(frag, 0) + 1
            stack.extend((v, depth + 1) for k, v in value.items() if k != "relations")
    return counts
