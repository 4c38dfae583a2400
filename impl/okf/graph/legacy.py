"""The legacy JSON-LD document: the byte-stable text fallback of get_semantic_graph.

Shape (spec/okf/contract/read.md §1.11, gaps.md §4):

- ``{"@context": …, "@graph": [...]}``; every object's keys sorted byte-wise, except a
  ``references`` entry, always ``@type``, ``target``, ``exists``;
- one ``okf:Concept`` node per concept in captured *file path* order, ``@id`` ``bundle:<raw id>``
  (no escaping), the plain frontmatter values, ``references`` (one per resolved link in source
  order, broken targets with ``exists: false``, duplicates kept) and one property per relation
  type holding ``{"@id": "bundle:<ref>", "exists": bool}`` (relation refs keep ``\\#``);
- relations declared inside a fragment mapping hang on a separate ``okf:SubResource`` node
  ``bundle:<escaped id>#<fragment>`` with ``is_part_of`` the concept, right after the concept;
- 2-space indentation, ``": "``, trailing newline; ``<``, ``>``, ``&``, U+2028 and U+2029
  escaped as ``\\u003c`` etc.; other non-ASCII raw.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring as _quote
from typing import Any, Callable, Iterator

from knowspec.impl.okf.concept.ids import escape_ref_id
from knowspec.impl.okf.graph.targets import NavigationTargets
from knowspec.impl.okf.parsing.typed import is_date_like, is_duplicated
from knowspec.impl.rules import go_json

OKF_NS = "https://okf.io/ontology/v0.1#"
_PLAIN_KEYS = ("type", "title", "description", "resource", "tags", "timestamp", "references", "exists")


def _byte_sorted(mapping: dict[str, Any]) -> dict[str, Any]:
    return {k: mapping[k] for k in sorted(mapping, key=lambda k: k.encode("utf-8", "surrogatepass"))}


def base_context() -> dict[str, Any]:
    context: dict[str, Any] = {"okf": OKF_NS, "bundle": "local:bundle:"}
    for key in _PLAIN_KEYS:
        context[key] = f"okf:{key}"
    context["target"] = {"@id": "okf:target", "@type": "@id"}
    return context


def _plain_values(concept: Any) -> dict[str, Any]:
    """The plain frontmatter fields of a legacy node (valid typed values only)."""
    values: dict[str, Any] = {}
    for key in ("type", "title", "description", "resource"):
        value = getattr(concept, key, None)
        if value:
            values[key] = value
    if concept.tags:
        values["tags"] = list(concept.tags)
    if not concept.frontmatter_may_hold(b"timestamp"):
        return values  # most concepts: the mapping is not loaded again for one absent key
    fm = concept.frontmatter
    stamp = fm.get("timestamp") if isinstance(fm, dict) else None
    if stamp is not None and not is_duplicated(fm, "timestamp") and is_date_like(stamp) and str(stamp).strip():
        values["timestamp"] = str(stamp)
    return values


def _nodes(snapshot: Any, context: dict[str, Any], check_cancelled: Callable[[], None],
           targets: NavigationTargets) -> Iterator[dict[str, Any]]:
    """The ``@graph`` nodes in document order, each made when asked for; adds the relation
    types they use to ``context`` on the way."""
    concepts = sorted(snapshot.concepts.values(), key=lambda c: c.path.encode("utf-8", "surrogatepass"))
    for concept in concepts:
        check_cancelled()
        node: dict[str, Any] = {"@id": f"bundle:{concept.id}", "@type": "okf:Concept"}
        with concept.bytes_in_hand():  # the text check and the frontmatter read the file once
            node.update(_plain_values(concept))
        refs = [
            {"@type": "okf:Reference", "target": f"bundle:{target}", "exists": exists}
            for target, exists in targets(concept.id)
        ]
        if refs:
            node["references"] = refs
        own_ref = escape_ref_id(concept.id)
        subresources: dict[str, dict[str, Any]] = {}
        for rel in snapshot.relations(concept.id):
            r = rel.relation
            context.setdefault(r.relation_type, {"@id": f"okf:{r.relation_type}", "@type": "@id"})
            holder: dict[str, Any] | None
            if r.from_ref == own_ref:
                holder = node
            else:
                holder = subresources.get(r.from_ref)
                if holder is None:
                    holder = {
                        "@id": f"bundle:{r.from_ref}",
                        "@type": "okf:SubResource",
                        "is_part_of": {"@id": f"bundle:{concept.id}"},
                    }
                    subresources[r.from_ref] = holder
                    context["is_part_of"] = {"@id": "okf:is_part_of", "@type": "@id"}
            holder.setdefault(r.relation_type, []).append({"@id": f"bundle:{r.to_ref}", "exists": rel.target_exists})
        yield _byte_sorted(node)
        for sub in subresources.values():
            yield _byte_sorted(sub)


def legacy_document(snapshot: Any, check_cancelled: Callable[[], None] = lambda: None,
                    targets: NavigationTargets | None = None) -> dict[str, Any]:
    """The legacy JSON-LD as ordered Python data (serialise with :func:`render_legacy`; the tool
    writes the same text a node at a time, :func:`legacy_utf8`); ``targets``: navigation targets
    per concept (default ``snapshot.navigation_targets``)."""
    context = base_context()
    nodes = list(_nodes(snapshot, context, check_cancelled, targets or snapshot.navigation_targets))
    return {"@context": _byte_sorted(context), "@graph": nodes}


def legacy_utf8(snapshot: Any, check_cancelled: Callable[[], None] = lambda: None,
                targets: NavigationTargets | None = None) -> bytes:
    """``render_legacy(legacy_document(...))`` as UTF-8, written a node at a time: each node is made,
    written and dropped, so the whole document as dicts (databricks-okf: 14 MiB of small
    objects) is never alive. Python returns an arena only once nothing in it lives, so such a
    peak stays resident after the call. The ``@context`` comes first in the text but grows
    with the nodes: it is written last and put in front."""
    context = base_context()
    graph = _Utf8Sink()
    inner = "\n    "  # a node's indentation: an item of "@graph", itself a key of the document
    place = "[" + inner
    for node in _nodes(snapshot, context, check_cancelled, targets or snapshot.navigation_targets):
        graph.append(place)
        for piece in _pretty_pieces(node, inner):
            graph.append(piece)
        place = "," + inner
    graph.append("[]" if place.startswith("[") else "\n  ]")
    graph.append("\n}\n")
    graph.flush()
    head = _Utf8Sink()
    head.append('{\n  "@context": ')
    for piece in _pretty_pieces(_byte_sorted(context), "\n  "):
        head.append(piece)
    head.append(',\n  "@graph": ')
    head.flush()
    return b"".join(head.chunks + graph.chunks)


def _pretty_pieces(value: Any, newline: str) -> list[str]:
    """:func:`_pretty` of ``value`` at ``newline``'s indentation. One it does not write (a float;
    a key that is not a plain ``str``, as a YAML ``true`` naming a relation type is) ``json``
    writes, its lines indented the same: what the whole document's fallback gives for it."""
    pieces: list[str] = []
    try:
        _pretty(value, pieces, newline)
    except _Unsupported:
        return [json.dumps(value, ensure_ascii=False, indent=2, separators=(",", ": ")).replace("\n", newline)]
    return pieces


def render_legacy(document: dict[str, Any]) -> str:
    """Pretty JSON with the legacy writer's escaping and a trailing newline."""
    try:
        out: list[str] = []
        _pretty(document, out, "\n")
        text = "".join(out)
    except _Unsupported:
        text = json.dumps(document, ensure_ascii=False, indent=2, separators=(",", ": "))
    return go_json.escape_html(text) + "\n"


class _Utf8Sink:
    """What :func:`_pretty` appends to: pieces, escaped and encoded every ``BATCH`` of them.

    On a whole bundle the text is millions of short pieces and, as one ``str``, four bytes a
    character as soon as one character lies outside the BMP (databricks-okf: 9.4 M characters,
    37.5 MB, with as many again in pieces); only the UTF-8 bytes are ever whole here. The HTML
    escapes replace single characters, so escaping each batch escapes the whole."""

    BATCH = 8192

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.chunks: list[bytes] = []

    def append(self, piece: str) -> None:
        self.pieces.append(piece)
        if len(self.pieces) >= self.BATCH:
            self.flush()

    def flush(self) -> None:
        self.chunks.append(go_json.escape_html("".join(self.pieces)).encode("utf-8"))
        self.pieces = []


class _Unsupported(Exception):
    """A value the direct writer does not render (floats, non-string keys): use ``json``."""


def _pretty(value: Any, out: "list[str] | _Utf8Sink", newline: str) -> None:
    """Byte-identical to ``json.dumps(value, ensure_ascii=False, indent=2, separators=(",", ": "))``.

    ``json`` drops to its pure-Python generator encoder whenever ``indent`` is set; writing the
    few JSON types of this document directly (strings through the C string encoder) is several
    times faster on a whole bundle. ``newline`` is a newline plus the current indentation.
    """
    kind = type(value)
    if kind is str:
        out.append(_quote(value))
    elif kind is dict:
        if not value:
            out.append("{}")
            return
        inner = newline + "  "
        sep = "{" + inner
        for key, item in value.items():
            if type(key) is not str:
                raise _Unsupported
            out.append(sep)
            out.append(_quote(key))
            out.append(": ")
            _pretty(item, out, inner)
            sep = "," + inner
        out.append(newline + "}")
    elif kind is list:
        if not value:
            out.append("[]")
            return
        inner = newline + "  "
        sep = "[" + inner
        for item in value:
            out.append(sep)
            _pretty(item, out, inner)
            sep = "," + inner
        out.append(newline + "]")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif value is None:
        out.append("null")
    elif kind is int:
        out.append(int.__repr__(value))
    else:
        raise _Unsupported
