"""get_semantic_graph: render both JSON-LD documents of a snapshot and enforce their budgets.

Order as upstream (spec/okf/contract/read.md §3.4, gaps.md §3.1-3.2): the legacy renderer runs first and
asserts the bundle version (a malformed or unparseable root declaration fails the call with
``invalid_request`` ``render JSON-LD: …``); each rendering is capped at 16 MiB; the v0.2 graph
must hold at most 100,000 nodes, each ``@id`` at most 8192 runes and ``projectionVersion`` at
most 64 runes. Structured content is the v0.2 document, the text content the legacy one.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from knowspec.impl import runtime as process
from knowspec.impl.context import CallContext, ToolOutput
from knowspec.impl.errors import ToolError
from knowspec.impl.okf.derived import derived_cache
from knowspec.impl.okf.graph.legacy import legacy_utf8
from knowspec.impl.okf.graph.targets import NavigationTargets, shared_targets
from knowspec.impl.okf.graph.nodes import Graph, jsonld_context
from knowspec.impl.okf.graph.v02 import project_graph

MAX_RENDER_BYTES = 16 * 1024 * 1024
MAX_NODES = 100_000
MAX_ID_RUNES = 8192
MAX_PROJECTION_VERSION_RUNES = 64
BYTE_LIMIT_MESSAGE = "semantic graph exceeds the MCP byte limit"


def check_budget(document: dict[str, Any]) -> None:
    """The node-collection checks the handler applies to the rendered v0.2 graph."""
    nodes = document.get("@graph")
    if not isinstance(nodes, list):
        raise ToolError("invalid_projection", "semantic graph renderer returned an invalid node collection")
    if len(nodes) > MAX_NODES:
        raise ToolError("resource_limit", "semantic graph contains too many nodes")
    for node in nodes:
        if not isinstance(node, dict):
            raise ToolError("invalid_projection", "semantic graph renderer returned an invalid node")
        node_id = node.get("@id")
        if isinstance(node_id, str) and len(node_id) > MAX_ID_RUNES:
            raise ToolError("resource_limit", "semantic graph identifier exceeds the MCP limit")
        version = node.get("projectionVersion")
        if isinstance(version, str) and len(version) > MAX_PROJECTION_VERSION_RUNES:
            raise ToolError("resource_limit", "semantic graph projection version exceeds the MCP limit")


def _legacy_text(snapshot: Any, ctx: CallContext, targets: NavigationTargets) -> str:
    """The legacy JSON-LD text, kept compressed between calls (a non-ASCII ``str`` would take
    two or four bytes a character) and decoded for each answer."""
    def render() -> bytes:
        encoded = legacy_utf8(snapshot, lambda: ctx.check_cancelled("render JSON-LD"), targets)
        if len(encoded) > MAX_RENDER_BYTES:
            raise ToolError("resource_limit", BYTE_LIMIT_MESSAGE)
        return zlib.compress(encoded, 1)

    compressed = _derived(ctx).get((snapshot.root, "legacy_jsonld"), getattr(snapshot, "revision", None), render)
    return zlib.decompress(compressed).decode("utf-8")


def compact_utf8(document: dict[str, Any]) -> bytes:
    """``json.dumps(document, ensure_ascii=False, separators=(",", ":"))`` as UTF-8, the items of
    its top-level lists (``@graph``'s nodes) encoded one at a time: the whole text as one ``str``
    would be four bytes a character as soon as one lies outside the BMP (databricks-okf: 25 MB
    for 6.3 MB of UTF-8). A dict is ``{`` key ``:`` value, ``,``-joined ``}``, so this is the
    same text."""
    def dumps(value: Any) -> bytes:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    if not all(type(key) is str for key in document):  # json.dumps writes other keys as strings
        return dumps(document)
    parts = [b"{"]
    for place, (key, value) in enumerate(document.items()):
        parts.append((b"," if place else b"") + dumps(key) + b":")
        if type(value) is list and value:
            parts.append(b"[" + b",".join(map(dumps, value)) + b"]")
        else:
            parts.append(dumps(value))
    parts.append(b"}")
    return b"".join(parts)


def graph_utf8(graph: Graph) -> bytes:
    """``compact_utf8(graph.jsonld())``, made one node at a time: each node's JSON-LD is built,
    encoded and dropped, and the node with it, so the whole document as dicts (databricks-okf:
    tens of MiB of small objects, beside the nodes) is never alive. Python returns an arena
    only once it is empty, so a render's peak of small objects stays resident after it: this
    one runs last in the read tools' order. Empties ``graph``."""
    def dumps(value: Any) -> bytes:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    nodes: list[Any] = graph.ordered()
    graph.nodes.clear()
    parts = [b'{"@context":' + dumps(jsonld_context()) + b',"@graph":[']
    for place, node in enumerate(nodes):
        parts.append((b"," if place else b"") + dumps(node.jsonld()))
        nodes[place] = None
    parts.append(b"]}")
    return b"".join(parts)


def _derived(ctx: CallContext):
    return derived_cache(process.of(ctx))


def semantic_graph(snapshot: Any, temporal: Any, ctx: CallContext) -> ToolOutput:
    """Structured v0.2 JSON-LD plus the legacy JSON-LD text, both within their budgets."""
    resolution = snapshot.version()
    if resolution.error:
        raise ToolError("invalid_request", f"render JSON-LD: {resolution.error}")
    targets = shared_targets(snapshot)  # read at the first render this call runs, if any
    text = _legacy_text(snapshot, ctx, targets)

    def render() -> bytes:
        encoded = graph_utf8(project_graph(snapshot, temporal.profile, temporal.as_of,
                                           lambda: ctx.check_cancelled("render v0.2 JSON-LD"), targets))
        if len(encoded) > MAX_RENDER_BYTES:
            raise ToolError("resource_limit", BYTE_LIMIT_MESSAGE)
        return zlib.compress(encoded, 1)

    # Kept between calls as compressed JSON (a few bytes a node, not a tree of dicts), loaded
    # again for each answer: the same values, in the same key order, and the JSON they were
    # loaded from is the structured content's own (the pipeline need not encode it again).
    key = (snapshot.root, "v02_jsonld", temporal.profile, temporal.as_of_echo)
    encoded = zlib.decompress(_derived(ctx).get(key, getattr(snapshot, "revision", None), render))
    document = json.loads(encoded)
    check_budget(document)
    ctx.check_cancelled("get semantic graph")
    return ToolOutput(document, text, structured_json=encoded)
