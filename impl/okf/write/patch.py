"""The nine lossless patch operations as pure functions from document text to document text.

Each operation states a desired state (spec/okf/contract/write.md §4.2) and changes only what it names:
the smallest YAML entry that has to change is re-rendered, everything else is carried over
byte for byte. A document whose shape makes that impossible to prove (flow collections that
must be edited inside, aliases, duplicates, ambiguous selections) is rejected, never guessed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable

from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from knowspec.impl.okf.write.changeset import Operation
from knowspec.impl.okf.write.computation_body import set_inline_computation
from knowspec.impl.okf.write.document import Document
from knowspec.impl.okf.write.yaml_edit import Editor
from knowspec.impl.okf.write.yaml_text import IntText, YamlRejected, lookup, scalar

SOURCE_FIELDS = ("id", "resource", "title", "author", "usage_count", "last_modified", "usage_window")


class PatchRejected(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


# ----- desired values ------------------------------------------------------------------
def _window(w: dict | None) -> dict | None:
    return None if w is None else {"from": w["from"], "to": w["to"]}


def desired_source(source: dict) -> dict:
    """The known fields of a source payload, in canonical key order (absent when empty)."""
    out: dict[str, Any] = {}
    for key in SOURCE_FIELDS:
        value = source.get(key)
        if value is None or value == "":
            continue
        if key == "usage_count":
            value = IntText(str(value))
        elif key == "usage_window":
            value = _window(value)
        out[key] = value
    return out


def _node_value(node: Node) -> Any:
    """Comparable form of a known field: raw scalar text, or a from/to dict; None if odd."""
    if isinstance(node, ScalarNode):
        return node.value
    if isinstance(node, MappingNode):
        pairs = {k.value: scalar(v) for k, v in node.value}
        if set(pairs) == {"from", "to"} and None not in pairs.values():
            return pairs
    return None


def _known_fields(entry: MappingNode) -> tuple[dict, bool]:
    """(known field values, has unknown keys) of a source entry."""
    known, unknown = {}, False
    for k, v in entry.value:
        if k.value in SOURCE_FIELDS:
            known[k.value] = _node_value(v)
        else:
            unknown = True
    return known, unknown


def _same(current: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        return isinstance(current, dict) and current == dict(wanted)
    return current == str(wanted)


# ----- locating ------------------------------------------------------------------------
def _family(ed: Editor, key: str, kind: type) -> Node | None:
    if ed.root is None:
        return None
    found = lookup(ed.root, key)
    if found is None:
        return None
    node = found[1]
    if not isinstance(node, kind):
        raise PatchRejected(f"{key}_shape_unsupported", f"frontmatter {key!r} does not have the expected shape")
    return node


def _sources(ed: Editor) -> SequenceNode | None:
    seq = _family(ed, "sources", SequenceNode)
    if seq is not None:
        for item in seq.value:
            if not isinstance(item, MappingNode):
                raise PatchRejected("sources_shape_unsupported", "every sources entry must be a mapping")
    return seq  # type: ignore[return-value]


def _end(ed: Editor, key: str) -> int:
    return ed.entry_end(ed.root, ed.nlines, key)  # type: ignore[arg-type]


def _select_source(ed: Editor, op: Operation, *, exact_only: bool) -> int | None:
    """Index of the one entry the op's selector names; None when absent; ambiguity rejects."""
    seq = _sources(ed)
    if seq is None:
        return None
    if op.get("source_id") is not None or (op.get("source") or {}).get("id"):
        wanted_id = op.get("source_id") or op["source"]["id"]
        hits = [i for i, e in enumerate(seq.value) if _known_fields(e)[0].get("id") == wanted_id]
    else:
        wanted = desired_source(op["source"])
        hits = []
        for i, entry in enumerate(seq.value):
            known, unknown = _known_fields(entry)
            if "id" in known:
                continue
            if set(known) == set(wanted) and all(_same(known[k], wanted[k]) for k in wanted):
                if unknown and exact_only:
                    raise PatchRejected("source_equality_unprovable",
                                        "a matching anonymous source has unknown keys; remove it by hand")
                hits.append(i)
    if len(hits) > 1:
        raise PatchRejected("ambiguous_source_selector", "the source selector matches more than one entry")
    return hits[0] if hits else None


def _entry_locator(index: int) -> Callable[[Editor], tuple[MappingNode, int]]:
    def locate(ed: Editor) -> tuple[MappingNode, int]:
        seq = _sources(ed)
        assert seq is not None
        return seq.value[index], ed.item_end(seq, _end(ed, "sources"), index)

    return locate


def _sync_entry(text: str, nl: str, locate: Callable[[Editor], tuple[MappingNode, int]], wanted: dict,
                *, remove_missing: bool) -> str:
    """Make the known fields of one entry equal ``wanted``; unknown keys are untouched."""
    for key in SOURCE_FIELDS:
        ed = Editor(text, nl)
        entry, end = locate(ed)
        current = lookup(entry, key)
        if key in wanted:
            if current is None or not _same(_node_value(current[1]), wanted[key]):
                text = ed.set_key(entry, end, key, wanted[key])
        elif current is not None and remove_missing:
            text = ed.delete_key(entry, end, key)
    return text


# ----- operations ----------------------------------------------------------------------
def _set_top(text: str, nl: str, key: str, value: Any) -> str:
    ed = Editor(text, nl)
    current = lookup(ed.root, key) if ed.root is not None else None
    if current is not None and not isinstance(value, (dict, list)) and scalar(current[1]) == str(value):
        return text
    return ed.set_key(ed.root, ed.nlines, key, value)


def _delete_top(text: str, nl: str, key: str) -> str:
    ed = Editor(text, nl)
    if ed.root is None or lookup(ed.root, key) is None:
        return text
    return ed.delete_key(ed.root, ed.nlines, key)


def set_generated(text: str, nl: str, op: Operation) -> str:
    g = op["generated"]
    value = {"by": g["by"], **({"at": g["at"]} if g.get("at") else {})}
    ed = Editor(text, nl)
    node = _family(ed, "generated", MappingNode)
    if node is not None and {k.value: scalar(v) for k, v in node.value} == value:
        return text
    return ed.set_key(ed.root, ed.nlines, "generated", value)


def _same_instant(a: str | None, b: str) -> bool:
    if a == b:
        return True
    try:
        return a is not None and datetime.fromisoformat(a) == datetime.fromisoformat(b)
    except ValueError:
        return False


def _events(ed: Editor) -> tuple[Node | None, list[MappingNode]]:
    found = lookup(ed.root, "verified") if ed.root is not None else None
    node = found[1] if found else None
    if node is None:
        return None, []
    if isinstance(node, MappingNode):
        return node, [node]
    if isinstance(node, SequenceNode) and all(isinstance(i, MappingNode) for i in node.value):
        return node, list(node.value)
    raise PatchRejected("verified_shape_unsupported", "verified must be a mapping or a sequence of mappings")


def _matching(events: list[MappingNode], v: dict) -> list[int]:
    hits = []
    for i, e in enumerate(events):
        by = lookup(e, "by")
        at = lookup(e, "at")
        if by and scalar(by[1]) == v["by"] and at and _same_instant(scalar(at[1]), v["at"]):
            hits.append(i)
    return hits


def ensure_verification(text: str, nl: str, op: Operation) -> str:
    v = op["verification"]
    event = {"by": v["by"], "at": v["at"]}
    ed = Editor(text, nl)
    node, events = _events(ed)
    if _matching(events, v):
        return text
    if node is None:
        return ed.set_key(ed.root, ed.nlines, "verified", event)
    if isinstance(node, MappingNode):
        return ed.mapping_as_first_item("verified", node, ed.nlines, event)
    if not node.value:
        return ed.set_key(ed.root, ed.nlines, "verified", event)
    return ed.append_item(node, _end(ed, "verified"), event)  # type: ignore[arg-type]


def remove_verification(text: str, nl: str, op: Operation) -> str:
    ed = Editor(text, nl)
    node, events = _events(ed)
    hits = _matching(events, op["verification"])
    if not hits:
        return text
    if len(hits) > 1:
        raise PatchRejected("ambiguous_verification", "the verification event is recorded more than once")
    if isinstance(node, MappingNode) or len(events) == 1:
        return ed.delete_key(ed.root, ed.nlines, "verified")  # type: ignore[arg-type]
    return ed.delete_item(node, _end(ed, "verified"), hits[0])  # type: ignore[arg-type]


def put_source(text: str, nl: str, op: Operation) -> str:
    wanted = desired_source(op["source"])
    ed = Editor(text, nl)
    seq = _sources(ed)
    index = _select_source(ed, op, exact_only=False)
    if index is not None:
        if "id" not in wanted:
            return text  # anonymous source already present
        return _sync_entry(text, nl, _entry_locator(index), wanted, remove_missing=True)
    if seq is None or not seq.value:
        return ed.set_key(ed.root, ed.nlines, "sources", [wanted])
    return ed.append_item(seq, _end(ed, "sources"), wanted)


def remove_source(text: str, nl: str, op: Operation) -> str:
    ed = Editor(text, nl)
    index = _select_source(ed, op, exact_only=True)
    if index is None:
        return text
    seq = _sources(ed)
    assert seq is not None
    if len(seq.value) == 1:  # keep the family present: absence would revive legacy citations
        return ed.set_key(ed.root, ed.nlines, "sources", [])
    return ed.delete_item(seq, _end(ed, "sources"), index)


def set_usage_window(text: str, nl: str, op: Operation) -> str:
    window = _window(op.get("usage_window"))
    if op.get("source_id") is None and op.get("source") is None:
        if window is None:
            return _delete_top(text, nl, "usage_window")
        ed = Editor(text, nl)
        node = lookup(ed.root, "usage_window") if ed.root is not None else None
        if node is not None and _node_value(node[1]) == window:
            return text
        return ed.set_key(ed.root, ed.nlines, "usage_window", window)
    ed = Editor(text, nl)
    index = _select_source(ed, op, exact_only=False)
    if index is None:
        raise PatchRejected("source_not_found", "no source entry matches the usage_window selector")
    locate = _entry_locator(index)
    entry, end = locate(ed)
    current = lookup(entry, "usage_window")
    if window is None:
        return text if current is None else ed.delete_key(entry, end, "usage_window")
    if current is not None and _node_value(current[1]) == window:
        return text
    return ed.set_key(entry, end, "usage_window", window)


def set_lifecycle(text: str, nl: str, op: Operation) -> str:
    lc = op["lifecycle"]
    for key in ("status", "stale_after"):
        value = lc.get(key)
        text = _delete_top(text, nl, key) if value is None else _set_top(text, nl, key, value)
    return text


def put_attested_computation(doc: Document, op: Operation) -> Document:
    c = op["attested_computation"]
    text, nl = doc.frontmatter, doc.newline
    params = [{"name": p["name"], "type": p["type"], "required": bool(p.get("required"))}
              for p in c.get("parameters") or []]
    text = _set_top(text, nl, "type", "Attested Computation")
    text = _set_top(text, nl, "runtime", c["runtime"])
    ed = Editor(text, nl)
    text = ed.set_key(ed.root, ed.nlines, "parameters", params)
    if c["mode"] == "file":
        text = _set_top(text, nl, "computation", c["computation_path"])
        body = doc.body
    else:
        text = _delete_top(text, nl, "computation")
        body = set_inline_computation(doc.body, c.get("inline_language") or "", c["inline_computation"], nl)
    executor = {"resource": c["executor"]["resource"], "receipt": list(c["executor"]["receipt"])}
    for key, value in (("executor", executor), ("attester", {"resource": c["attester"]["resource"]})):
        ed = Editor(text, nl)
        text = ed.set_key(ed.root, ed.nlines, key, value)
    return Document(doc.open_line, text, doc.close_line, body)


FRONTMATTER_OPS: dict[str, Callable[[str, str, Operation], str]] = {
    "set_generated": set_generated,
    "ensure_verification": ensure_verification,
    "remove_verification": remove_verification,
    "put_source": put_source,
    "remove_source": remove_source,
    "set_usage_window": set_usage_window,
    "set_lifecycle": set_lifecycle,
}


def apply_concept_operation(doc: Document, op: Operation) -> Document:
    """One operation on one concept document; raises PatchRejected / YamlRejected."""
    if not doc.has_frontmatter:
        raise PatchRejected("concept_frontmatter_missing", "the concept has no YAML frontmatter to edit")
    if op["kind"] == "put_attested_computation":
        return put_attested_computation(doc, op)
    new = FRONTMATTER_OPS[op["kind"]](doc.frontmatter, doc.newline, op)
    return Document(doc.open_line, new, doc.close_line, doc.body)


def set_bundle_version(doc: Document | None, version: str) -> Document:
    """Set ``okf_version`` in the root index (created when missing)."""
    if doc is None:
        doc = Document("---\n", "", "---\n", "")
    elif not doc.has_frontmatter:
        doc = Document("---" + doc.newline, "", "---" + doc.newline, doc.body)
    return Document(doc.open_line, _set_top(doc.frontmatter, doc.newline, "okf_version", version),
                    doc.close_line, doc.body)


__all__ = ["PatchRejected", "YamlRejected", "apply_concept_operation", "set_bundle_version"]
