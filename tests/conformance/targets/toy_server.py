"""A tiny OKF-like MCP server (low-level ``mcp.server.Server``) used to test the suite.

``python toy_server.py [--variant NAME]``: the ``good`` variant keeps the toy contract; every
other variant breaks exactly one rule, so the check that guards that rule must fail on it.
It parses bundles itself (yaml + a line scanner) and never imports the suite's oracles.
"""

from __future__ import annotations

import json
import os
import re
import sys
import unicodedata
from pathlib import Path

import anyio
import jsonschema
import mcp.types as types
import yaml
from mcp.server import Server
from mcp.shared.exceptions import MCPError

sys.path.insert(0, str(Path(__file__).parent))
from toy_schemas import TOOLS, output_schema  # noqa: E402

VARIANT = sys.argv[sys.argv.index("--variant") + 1] if "--variant" in sys.argv else "good"
LIMIT_KEYWORDS = {"maximum", "maxLength", "maxItems", "maxProperties"}
RANK = {"id": 6, "title": 5, "description": 4, "tags": 3, "body": 1}
STATE = {"calls": 0, "current": None}


class Fail(Exception):
    def __init__(self, code: str, message: str, diagnostics=()):
        super().__init__(message)
        self.code, self.message, self.diagnostics = code, message, list(diagnostics)


def envelope(code, message, diagnostics=()):
    env = {"code": code, "message": message, "retryable": code == "operation_cancelled",
           "diagnostics": list(diagnostics)}
    if VARIANT == "bad_envelope":
        del env["diagnostics"]
    if VARIANT == "error_text_prefixed":  # the text is no longer the message
        message = "error: " + message
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)],
                                structured_content=env, is_error=True)


def diag(code, message, field="", file=""):
    return {"code": code, "severity": "ERROR", "file": file, "field": field, "message": message,
            "spec_ref": "", "policy_failure": False}


def _over_max_items(schema, args):
    """Array limits first, in linear time: a long array is refused before the full validation
    (whose uniqueItems is quadratic on mixed types) ever sees it."""
    return [name for name, prop in schema.get("properties", {}).items()
            if isinstance(args, dict) and isinstance(args.get(name), list) and "maxItems" in prop
            and len(args[name]) > prop["maxItems"]]


def validate(name, args):
    if VARIANT == "no_validation":
        return
    too_long = _over_max_items(TOOLS[name]["input"], args) if VARIANT != "quadratic_validation" else []
    if too_long:
        raise Fail("resource_limit", "tool input exceeds the advertised schema limits",
                   [diag("invalid_input", "argument fails the maxItems rule", field) for field in too_long[:8]])
    errors = list(jsonschema.Draft202012Validator(TOOLS[name]["input"]).iter_errors(args))
    if VARIANT == "reject_unicode" and not errors and not str(args.get("query", "")).isascii():
        raise Fail("schema_validation", "query must be ASCII")
    if not errors:
        return
    limit = any(e.validator in LIMIT_KEYWORDS for e in errors)
    if VARIANT == "wrong_limit_code":
        limit = False
    if VARIANT == "jsonrpc_errors":
        raise MCPError(code=types.INVALID_PARAMS, message="bad arguments")
    diags = sorted({(".".join(map(str, e.path)) or "arguments", e.validator) for e in errors})[:8]
    def explain(field, kw):
        echo = f" (got {args.get(field)})" if VARIANT == "echo_value" and isinstance(args.get(field), str) else ""
        return f"argument fails the {kw} rule{echo}"
    raise Fail("resource_limit" if limit else "schema_validation",
               "tool input exceeds the advertised schema limits" if limit
               else "tool input does not match the advertised schema",
               [diag("invalid_input", explain(field, kw), field) for field, kw in diags])


# ---- bundle reading ---------------------------------------------------------------------------
def fold(s):
    return unicodedata.normalize("NFC", s.casefold())


def check_root(path):
    def bad(msg):
        raise Fail("invalid_request", msg + (f": {path}" if VARIANT == "leak_path" else ""))
    if path != path.strip():
        bad("bundle_path must not contain surrounding whitespace")
    if not os.path.isabs(path):
        bad("bundle_path must be absolute")
    if os.path.normpath(path) != path:
        bad("bundle_path must be clean")
    p = Path(path)
    try:
        for part in [p, *p.parents]:
            if part.is_symlink():
                bad("bundle_path must not contain a symlink")
        if not p.is_dir():
            bad("bundle_path must be a directory")
    except OSError:  # a name too long for the file system (the 4096-character boundary case)
        bad("bundle_path must be a directory")
    return p


def load(root):
    concepts = {}
    for file in sorted(root.rglob("*.md")):
        rel = file.relative_to(root).as_posix()
        if file.name in ("index.md", "log.md"):
            continue
        text = file.read_text(encoding="utf-8")
        front, body = {}, text
        if text.startswith("---\n"):
            end = text.find("\n---\n", 3)
            if end < 0 and text.endswith("\n---"):
                end = len(text) - 4
            if end < 0:
                raise Fail("operation_rejected", "tool operation was rejected",
                           [diag("unterminated_frontmatter", "unparseable concept document", file=rel)])
            try:
                front = yaml.safe_load(text[4:end + 1]) or {}
            except yaml.YAMLError:
                raise Fail("operation_rejected", "tool operation was rejected",
                           [diag("invalid_frontmatter", "unparseable concept document", file=rel)]) from None
            body = text[end + 5:]
            body = body[:-1] if body.endswith("\n") else body
        concepts[rel[:-3]] = {"front": front if isinstance(front, dict) else {}, "body": body, "path": rel}
    return concepts


def s(front, key):
    v = front.get(key)
    return v if isinstance(v, str) and v.strip() else ""


def card(cid, c):
    tags = c["front"].get("tags") or []
    return {"id": cid, "path": c["path"], "title": s(c["front"], "title"),
            "description": s(c["front"], "description"), "tags": [t for t in tags if isinstance(t, str)]}


# ---- search -----------------------------------------------------------------------------------
def search(args):
    concepts = load(check_root(args["bundle_path"]))
    q, limit = fold(args["query"]), int(args.get("limit", 5))
    hits = []
    for cid, c in concepts.items():
        fields = [("id", [cid]), ("title", [s(c["front"], "title")]),
                  ("description", [s(c["front"], "description")]),
                  ("tags", card(cid, c)["tags"]), ("body", [c["body"]])]
        for name, values in fields:
            if any(v and q in fold(v) for v in values):
                hits.append({"concept": card(cid, c), "match": name})
                break
    hits.sort(key=lambda h: (-RANK[h["match"]], h["concept"]["id"].encode()))
    if VARIANT == "reorder":
        hits.reverse()
    total = len(hits)
    page = hits[:limit]
    if VARIANT == "drop_hit" and len(page) > 1:
        page = page[:-1]
    truncated = total > len(page)
    if VARIANT == "flip_truncated":
        truncated = not truncated
    out = {"query": args["query"], "total": total, "truncated": truncated, "hits": page}
    if VARIANT == "bad_output":
        del out["truncated"]
    if VARIANT == "nondeterministic":
        STATE["calls"] += 1
        out["query"] += " " * (STATE["calls"] % 2)
    return out


# ---- neighbours -------------------------------------------------------------------------------
LINK = re.compile(r"(?<!\\)\[[^\]]*\]\(([^)\s]*)\)")
STANDARD = {"type", "title", "description", "resource", "tags", "okf_version", "timestamp", "sources",
            "usage_window", "generated", "verified", "status", "stale_after", "runtime", "parameters",
            "computation", "executor", "attester", "relations"}


def links_of(cid, body):
    out, fenced = [], False
    for line in body.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        line = re.sub(r"`[^`]*`", "", line)
        for dest in LINK.findall(line):
            target = resolve(cid, dest.strip())
            if target:
                out.append(target)
    return out


def resolve(cid, dest):
    if not dest or dest.startswith("#") or "://" in dest or dest.lower().startswith(("//", "mailto:", "tel:", "data:")):
        return None
    path = re.split(r"[?#]", dest, maxsplit=1)[0]
    if not path or path.endswith("/"):
        return None
    segs = [] if path.startswith("/") else cid.split("/")[:-1]
    for seg in path.lstrip("/").split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            segs = segs[:-1]
        else:
            segs.append(seg)
    if not segs:
        return None
    if segs[-1].endswith(".md"):
        segs[-1] = segs[-1][:-3]
    return "/".join(segs)


def split_ref(ref):
    i, concept = 0, ""
    while i < len(ref):
        if ref[i] == "\\" and ref[i + 1:i + 2] == "#":
            concept += "#"
            i += 2
        elif ref[i] == "#":
            return concept, ref[i + 1:]
        else:
            concept += ref[i]
            i += 1
    return concept, ""


def fragments(front):
    found = []

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("id"), str):
                found.append(node["id"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    for key, value in front.items():
        if key not in STANDARD:
            walk(value)
    return found


def esc(cid):
    return cid.replace("#", "\\#")


def neighbors(args):
    concepts = load(check_root(args["bundle_path"]))
    cid = args["concept_id"]
    if cid not in concepts:
        raise Fail("concept_not_found", "concept not found",
                   [{**diag("recovery_step", "search for the concept first", "concept_id"), "severity": "INFO"}])
    kinds = [k for k in ("navigation", "relation", "source") if k in (args.get("kinds") or
                                                                   ["navigation", "relation", "source"])]
    direction, limit = args.get("direction", "both"), int(args.get("limit", 5))
    edges = []
    for src, c in concepts.items():
        for tgt in links_of(src, c["body"]):
            if tgt in concepts:
                edges.append((src, tgt, {"from": src, "to": tgt, "kind": "navigation", "relation_type": None}))
        rels = c["front"].get("relations") or {}
        for rtype, items in (rels.items() if isinstance(rels, dict) else []):
            for item in items or []:
                ref = item.get("target") if isinstance(item, dict) else None
                if not isinstance(ref, str):
                    continue
                tgt, frag = split_ref(ref)
                if tgt not in concepts or (frag and fragments(concepts[tgt]["front"]).count(frag) != 1):
                    continue
                edges.append((src, tgt, {"from": esc(src), "to": ref, "kind": "relation", "relation_type": rtype}))
    selected = [e for a, b, e in edges if e["kind"] in kinds and (
        (direction in ("out", "both") and a == cid) or (direction in ("in", "both") and b == cid))]
    order = {"navigation": 0, "relation": 1}
    selected.sort(key=lambda e: (order[e["kind"]], e["from"].encode(), e["to"].encode(),
                                 (e["relation_type"] or "").encode()))
    if VARIANT == "bad_neighbors_order":
        selected.sort(key=lambda e: (e["to"].encode(), e["from"].encode()))
    sources = []
    if "source" in kinds and direction in ("out", "both"):
        for item in concepts[cid]["front"].get("sources") or []:
            if isinstance(item, dict) and isinstance(item.get("resource"), str) and item["resource"].strip():
                sources.append({"id": item.get("id", ""), "resource": item["resource"], "title": item.get("title", "")})
        sources.sort(key=lambda x: (x["id"].encode(), x["resource"].encode(), x["title"].encode()))
    return {"concept": card(cid, concepts[cid]), "direction": direction, "kinds": kinds,
            "total": len(selected), "truncated": len(selected) > limit, "edges": selected[:limit],
            "sources": sources}


HANDLERS = {"search_concepts": search, "get_neighbors": neighbors}


async def list_tools(ctx, params):
    tools = []
    for name, t in TOOLS.items():
        if VARIANT == "missing_tool" and name == "get_neighbors":
            continue
        schema = json.loads(json.dumps(t["input"]))
        if VARIANT == "schema_drift":
            props = schema["properties"]
            if "query" in props:
                props["query"]["maxLength"] += 1
            else:
                props["limit"]["maximum"] += 1
        description = os.environ.get("TOY_ENV_MARK", name)   # shows which environment the target got
        tools.append(types.Tool(name=name, description=description, input_schema=schema, output_schema=output_schema(name),
                                annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True)))
    return types.ListToolsResult(tools=tools)


async def call_tool(ctx, params):
    if params.name not in HANDLERS:
        if VARIANT == "unknown_tool_result":
            return envelope("invalid_request", "unknown tool")
        raise MCPError(code=types.INVALID_PARAMS, message="unknown tool")
    args = params.arguments or {}
    if VARIANT == "silent_calls":   # never answers a call (a hung handler)
        await anyio.sleep_forever()
    if VARIANT == "dies_on_call":   # every call takes the whole server down, with a last word
        print("toy-okf: out of patience, exiting", file=sys.stderr, flush=True)
        os._exit(3)
    if VARIANT == "unwritten_neighbors" and params.name == "get_neighbors":  # honest about a missing tool
        return envelope("not_implemented", "tool get_neighbors is specified but not implemented yet")
    if VARIANT == "crashing_neighbors" and params.name == "get_neighbors":   # a crash on every call
        return envelope("operation_rejected", "tool operation was rejected")
    try:
        validate(params.name, args)
        if VARIANT == "racy":
            STATE["current"] = args
            await anyio.sleep(0.01)
            args = STATE["current"]
        try:
            # in a worker thread, as a real server would: a cancel is seen while the search still runs
            out = await anyio.to_thread.run_sync(HANDLERS[params.name], args, abandon_on_cancel=True)
            if VARIANT == "dies_on_cancel":
                await anyio.sleep(1)
        except anyio.get_cancelled_exc_class():
            if VARIANT == "dies_on_cancel":
                os._exit(3)  # a cancelled call takes the whole server down
            raise
    except Fail as exc:
        return envelope(exc.code, exc.message, exc.diagnostics)
    text = json.dumps(out, ensure_ascii=False, separators=(",", ":"))
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):  # as Go writes them
        text = text.replace(raw, escaped)
    if VARIANT == "plain_text":
        text = json.dumps(out, ensure_ascii=False, separators=(",", ":"))  # the plain encoder: nothing escaped
    if VARIANT == "python_json_text":
        text = json.dumps(out, ensure_ascii=False)  # equal as JSON, but not Go's bytes
    if VARIANT == "text_mismatch":
        text = json.dumps({k: v for k, v in out.items() if k != "total"})
    if VARIANT == "text_only":  # the answer as text alone, no structuredContent (an older server's way)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=out)


server = Server("toy-okf", version="0.0.1", on_list_tools=list_tools, on_call_tool=call_tool)

if __name__ == "__main__" and "--http" in sys.argv:
    import uvicorn

    port = int(sys.argv[sys.argv.index("--http") + 1])
    app = server.streamable_http_app(streamable_http_path="/mcp")
    if VARIANT == "status_500_calls":   # a proxy in front that fails every call with a bare HTTP 500
        inner = app

        async def app(scope, receive, send):
            if scope["type"] == "http" and scope["method"] == "POST":
                body, more = b"", True
                while more:
                    message = await receive()
                    body, more = body + message.get("body", b""), message.get("more_body", False)
                if b'"tools/call"' in body:
                    await send({"type": "http.response.start", "status": 500,
                                "headers": [(b"content-type", b"text/plain")]})
                    await send({"type": "http.response.body", "body": b"upstream failed"})
                    return
                replay, rest = [{"type": "http.request", "body": body, "more_body": False}], receive

                async def receive():   # the body once more, then the client's own messages (disconnect)
                    return replay.pop() if replay else await rest()
            await inner(scope, receive, send)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="error")
elif __name__ == "__main__":
    if VARIANT == "prints_to_stdout":  # a start-up banner on the wire, before the transport claims stdout
        print("toy-okf starting", flush=True)
    if VARIANT in ("drops_bad_lines", "prints_to_stdout"):  # the SDK transport ignores a line it cannot read
        from mcp.server.stdio import stdio_server
    else:  # a transport that answers every line (knowspec's; the toy has no reason to write its own)
        from knowspec.impl.server.stdio_transport import stdio_transport as stdio_server

    async def main():
        async with stdio_server() as (r, w):
            await server.run(r, w, server.create_initialization_options())

    anyio.run(main)
