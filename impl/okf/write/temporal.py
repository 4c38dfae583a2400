"""Temporal upgrade planning (spec/okf/contract/write.md §6): legacy calendar dates -> explicit instants.

Pure rules: find the six temporal field forms in every concept's frontmatter, classify each
value (legacy ``YYYY-MM-DD``, already an offset instant, or malformed), match the caller's
explicit mappings, and rewrite only the scalar token of each mapped value, keeping its
quoting, tag, spacing and comments. Nothing is inferred: an unmapped legacy date leaves the
upgrade ``incomplete``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Mapping

from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from knowspec.impl.okf.write.document import DocumentError, split_document
from knowspec.impl.okf.write.yaml_text import YamlRejected, compose, lookup

FIELD_PATH = re.compile(r"^(stale_after|usage_window\.(from|to)|sources\[[0-9]+\]\.(last_modified|usage_window\.(from|to)))$")
LEGACY_DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
INSTANT = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$")
_TAGS = ("tag:yaml.org,2002:str", "tag:yaml.org,2002:timestamp")


class TemporalError(Exception):
    """The bundle or the mappings cannot be upgraded as asked (``operation_rejected``)."""


@dataclass(frozen=True)
class Field:
    concept: str
    path: str
    value: str
    start: int  # char offsets of the scalar token inside the document text
    end: int


def _scalar_field(concept: str, path: str, node: Node, offset: int) -> Field:
    if not isinstance(node, ScalarNode) or node.tag not in _TAGS or getattr(node, "anchor", None):
        raise TemporalError(f"{concept}: {path} is not a date or instant scalar")
    return Field(concept, path, node.value, offset + node.start_mark.index, offset + node.end_mark.index)


def _window_fields(concept: str, prefix: str, node: Node, offset: int) -> list[Field]:
    if not isinstance(node, MappingNode):
        raise TemporalError(f"{concept}: {prefix} is not a mapping")
    out = []
    for end in ("from", "to"):
        found = lookup(node, end)
        if found is not None:
            out.append(_scalar_field(concept, f"{prefix}.{end}", found[1], offset))
    return out


def scan_concept(concept: str, raw: bytes) -> list[Field]:
    """Every temporal field of one concept, in document order of the six forms.

    A concept without any temporal family is not composed, so a shape the editor refuses
    elsewhere in the bundle does not block the upgrade."""
    from knowspec.impl.okf.model import document_for

    parsed = document_for(concept + ".md", raw)
    if parsed.parse_error is None and not {"stale_after", "usage_window", "sources"} & set(parsed.frontmatter):
        return []
    try:
        doc = split_document(raw)
        root = compose(doc.frontmatter) if doc.has_frontmatter else None
    except (DocumentError, YamlRejected) as exc:
        raise TemporalError(f"{concept}: frontmatter cannot be scanned ({exc})") from None
    if root is None:
        return []
    offset = len(doc.open_line)
    fields: list[Field] = []
    found = lookup(root, "stale_after")
    if found is not None:
        fields.append(_scalar_field(concept, "stale_after", found[1], offset))
    found = lookup(root, "usage_window")
    if found is not None:
        fields += _window_fields(concept, "usage_window", found[1], offset)
    found = lookup(root, "sources")
    if found is not None:
        if not isinstance(found[1], SequenceNode):
            raise TemporalError(f"{concept}: sources is not a sequence")
        for i, entry in enumerate(found[1].value):
            if not isinstance(entry, MappingNode):
                raise TemporalError(f"{concept}: sources[{i}] is not a mapping")
            lm = lookup(entry, "last_modified")
            if lm is not None:
                fields.append(_scalar_field(concept, f"sources[{i}].last_modified", lm[1], offset))
            uw = lookup(entry, "usage_window")
            if uw is not None:
                fields += _window_fields(concept, f"sources[{i}].usage_window", uw[1], offset)
    for f in fields:
        if not (LEGACY_DATE.match(f.value) or INSTANT.match(f.value)):
            raise TemporalError(f"{concept}: {f.path} is neither a legacy date nor an offset instant")
    return fields


@dataclass(frozen=True)
class TemporalPlan:
    status: str                       # ready | incomplete | noop
    unresolved: list[dict]
    operations: tuple[dict, ...]      # one upgrade_temporal_concept per concept, concepts sorted
    writes: dict[str, bytes]


def _concepts(files: Mapping[str, bytes]) -> dict[str, str]:
    out = {}
    for path in files:
        base = path.rsplit("/", 1)[-1]
        if path.endswith(".md") and base not in ("index.md", "log.md"):
            out[path[:-3]] = path
    return out


def operations_from_mappings(mappings: list[dict]) -> tuple[dict, ...]:
    """The change-set operations of a mapping list: grouped by concept, concepts sorted."""
    grouped: dict[str, list[dict]] = {}
    for m in mappings:
        grouped.setdefault(m["concept"], []).append({"path": m["path"], "from": m["from"], "to": m["to"]})
    return tuple({"kind": "upgrade_temporal_concept", "concept_id": c,
                  "rewrites": sorted(grouped[c], key=lambda r: r["path"].encode("utf-8"))}
                 for c in sorted(grouped, key=lambda c: c.encode("utf-8")))


def plan_temporal(files: Mapping[str, bytes], mappings: list[dict], check: Callable[[], None]) -> TemporalPlan:
    """The upgrade's operations and writes, or what stays unresolved; ``check`` (the call's
    cancellation) runs between concepts."""
    seen = set()
    for m in mappings:
        if not FIELD_PATH.match(m["path"]):
            raise TemporalError(f"mapping path {m['path']!r} is not a temporal field path")
        if (m["concept"], m["path"]) in seen:
            raise TemporalError(f"duplicate mapping for {m['concept']} {m['path']}")
        seen.add((m["concept"], m["path"]))
    concepts = _concepts(files)
    legacy: dict[tuple[str, str], Field] = {}
    for concept in sorted(concepts, key=lambda c: c.encode("utf-8")):
        check()
        for f in scan_concept(concept, files[concepts[concept]]):
            if LEGACY_DATE.match(f.value):
                legacy[(concept, f.path)] = f
    for m in mappings:
        mapped = legacy.get((m["concept"], m["path"]))
        if mapped is None:
            raise TemporalError(f"mapping {m['concept']} {m['path']} matches no legacy date")
        if mapped.value != m["from"]:
            raise TemporalError(f"mapping {m['concept']} {m['path']} expects {m['from']} but the file holds {mapped.value}")
    unresolved = [{"concept": c, "path": p, "from": f.value} for (c, p), f in legacy.items() if (c, p) not in seen]
    if unresolved:
        return TemporalPlan("incomplete", unresolved, (), {})
    if not legacy:
        return TemporalPlan("noop", [], (), {})
    ops = operations_from_mappings(mappings)
    return TemporalPlan("ready", [], ops, rewrite(files, ops, check))


def rewrite(files: Mapping[str, bytes], ops: tuple[dict, ...], check: Callable[[], None]) -> dict[str, bytes]:
    """Replace only the date inside each mapped scalar token (quotes, tags, comments kept);
    ``check`` (the call's cancellation) runs between concepts."""
    concepts = _concepts(files)
    writes = {}
    for op in ops:
        check()
        path = concepts[op["concept_id"]]
        text = files[path].decode("utf-8")
        fields = {f.path: f for f in scan_concept(op["concept_id"], files[path])}
        if any(r["path"] not in fields for r in op["rewrites"]):
            raise TemporalError(f"{op['concept_id']}: a mapped field no longer exists")
        for r in sorted(op["rewrites"], key=lambda r: fields[r["path"]].start, reverse=True):
            f = fields[r["path"]]
            token = text[f.start:f.end]
            if f.value != r["from"] or token.count(r["from"]) != 1:
                raise TemporalError(f"{op['concept_id']}: {r['path']} changed or has an unsupported shape")
            text = text[:f.start] + token.replace(r["from"], r["to"]) + text[f.end:]
        writes[path] = text.encode("utf-8")
    return writes
