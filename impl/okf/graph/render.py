"""get_semantic_graph: render both JSON-LD documents of a snapshot and enforce their budgets.

Order as upstream (spec/okf/contract/read.md §3.4, gaps.md §3.1-3.2): the legacy renderer runs first and
asserts the bundle version (a malformed or unparseable root declaration fails the call with
``invalid_request`` ``render JSON-LD: …``); each rendering is capped at 16 MiB; the v0.2 graph
must hold at most 100,000 nodes, each ``@id`` at most 8192 runes and ``projectionVersion`` at
most 64 runes. Structured content is the v0.2 document, the text content the legacy one.
"""

from __future__ import annotations

import json
from array import array
from operator import itemgetter
from typing import Any, Iterable

from knowspec.impl import runtime as process
from knowspec.impl.context import CallContext, ItemwiseCheck
from knowspec.impl.errors import ToolError
from knowspec.impl.kept_answers import KeptAnswer
from knowspec.impl.okf.derived import derived_cache
from knowspec.impl.okf.graph.legacy import legacy_utf8
from knowspec.impl.okf.graph.targets import NavigationTargets, shared_targets
from knowspec.impl.okf.graph.nodes import Node, jsonld_context
from knowspec.impl.okf.graph.v02 import project_nodes

MAX_RENDER_BYTES = 16 * 1024 * 1024
MAX_NODES = 100_000
MAX_ID_RUNES = 8192
MAX_PROJECTION_VERSION_RUNES = 64
BYTE_LIMIT_MESSAGE = "semantic graph exceeds the MCP byte limit"


def node_over_budget(node: dict[str, Any]) -> ToolError | None:
    """The budget one node of the v0.2 graph breaks, if any: its ``@id`` or ``projectionVersion``
    too long."""
    node_id = node.get("@id")
    if isinstance(node_id, str) and len(node_id) > MAX_ID_RUNES:
        return ToolError("resource_limit", "semantic graph identifier exceeds the MCP limit")
    version = node.get("projectionVersion")
    if isinstance(version, str) and len(version) > MAX_PROJECTION_VERSION_RUNES:
        return ToolError("resource_limit", "semantic graph projection version exceeds the MCP limit")
    return None


def _legacy_text(snapshot: Any, ctx: CallContext, targets: NavigationTargets) -> str:
    """The legacy JSON-LD text. Made again for each profile's answer rather than kept: it costs
    less than the v0.2 render it comes with, and kept it would be one more MiB beside the answers."""
    encoded = legacy_utf8(snapshot, lambda: ctx.check_cancelled("render JSON-LD"), targets)
    if len(encoded) > MAX_RENDER_BYTES:
        raise ToolError("resource_limit", BYTE_LIMIT_MESSAGE)
    return encoded.decode("utf-8")


def graph_utf8(nodes: Iterable[Node], check: ItemwiseCheck | None = None) -> bytes:
    """The v0.2 document of ``nodes`` (each given once, in any order) as compact JSON (UTF-8,
    non-ASCII kept), within its budgets, and passed by ``check`` (the tool's output check).

    Made one node at a time: each node's JSON-LD is built, checked, encoded and dropped, and the
    node with it, so neither the nodes nor the document as values (databricks-okf: ~19 and
    ~21 MiB of small objects) are ever all alive. Python returns an arena only once nothing in
    it lives, so such a peak would stay resident after the call. The budgets fail in the order
    upstream checks them: the bytes, the node count, then the first node over one in document
    order; the schema after them."""
    def dumps(value: Any) -> bytes:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    # Each node's IRI and JSON go into two growing buffers (one allocation each, not ~500 bytes
    # of small objects a node: databricks-okf's 10,803 nodes kept 5 MiB of them until the end).
    iris, texts = bytearray(), bytearray()
    iri_ends, text_ends = array("q"), array("q")
    over: list[tuple[bytes, ToolError]] = []
    for node in nodes:
        document = node.jsonld()
        if check is not None:
            check.item(document)
        key = node.iri.encode("utf-8", "surrogatepass")
        error = node_over_budget(document)
        if error is not None:
            over.append((key, error))
        iris += key
        iri_ends.append(len(iris))
        texts += dumps(document)
        text_ends.append(len(texts))
    count = len(iri_ends)
    iri = memoryview(iris)
    # document order: by IRI, as UTF-8; no two nodes share one
    order = sorted(range(count), key=lambda i: iri[iri_ends[i - 1] if i else 0:iri_ends[i]].tobytes())
    iri.release()
    del iris
    context = jsonld_context()
    encoded = bytearray(b'{"@context":' + dumps(context) + b',"@graph":[')
    text = memoryview(texts)
    for place, i in enumerate(order):
        if place:
            encoded += b","
        encoded += text[text_ends[i - 1] if i else 0:text_ends[i]]
    encoded += b"]}"
    text.release()
    if len(encoded) > MAX_RENDER_BYTES:
        raise ToolError("resource_limit", BYTE_LIMIT_MESSAGE)
    if count > MAX_NODES:
        raise ToolError("resource_limit", "semantic graph contains too many nodes")
    if over:
        raise min(over, key=itemgetter(0))[1]
    if check is not None:
        check.finish({"@context": context}, count)
    return bytes(encoded)


def _derived(ctx: CallContext):
    return derived_cache(process.of(ctx))


def semantic_graph(snapshot: Any, temporal: Any, ctx: CallContext) -> KeptAnswer:
    """The answer: structured v0.2 JSON-LD plus the legacy JSON-LD text, both within their
    budgets, checked against the tool's output schema as it is made (``ctx.output_items_check``)
    and kept between calls as its compressed JSON: an answer is never decoded into values."""
    resolution = snapshot.version()
    if resolution.error:
        raise ToolError("invalid_request", f"render JSON-LD: {resolution.error}")
    targets = shared_targets(snapshot)  # read at the first render this call runs, if any

    def render() -> KeptAnswer:
        text = _legacy_text(snapshot, ctx, targets)
        check = ctx.output_items_check("@graph") if ctx.output_items_check is not None else None
        structured = graph_utf8(project_nodes(snapshot, temporal.profile, temporal.as_of,
                                              lambda: ctx.check_cancelled("render v0.2 JSON-LD"), targets), check)
        return KeptAnswer.of(text, structured)

    key = (snapshot.root, "v02_jsonld", temporal.profile, temporal.as_of_echo)
    answer = _derived(ctx).get(key, getattr(snapshot, "revision", None), render)
    ctx.check_cancelled("get semantic graph")
    return answer
