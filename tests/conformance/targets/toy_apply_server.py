"""A toy target for the ``no_mixed_reads_during_apply`` check: list, preview and apply only.

``python toy_apply_server.py [--variant good|torn]``. Apply rewrites every named concept file
one at a time (each file replaced atomically, a short pause between files). ``good`` holds an
exclusive ``flock`` on a lock file beside the bundle for the whole rewrite and listings take it
shared, so a reader in another server process sees all files old or all new; ``torn`` takes no
lock, so a listing during an apply mixes old and new files.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import anyio
import mcp.types as types
import yaml
from mcp.server import Server

VARIANT = sys.argv[sys.argv.index("--variant") + 1] if "--variant" in sys.argv else "good"
OBJECT = {"type": "object"}
TOOLS = ("list_concepts", "preview_concept_patch", "apply_concept_patch")


@contextmanager
def locked(root: Path, mode: int):
    if VARIANT == "torn":
        yield
        return
    fd = os.open(str(root) + ".toy-lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)


def split(text: str) -> tuple[dict, str]:
    end = text.find("\n---\n", 3)
    return yaml.safe_load(text[4:end + 1]) or {}, text[end + 5:]


def list_concepts(args: dict) -> dict:
    root = Path(args["bundle_path"])
    with locked(root, fcntl.LOCK_SH):
        files = {p: p.read_text(encoding="utf-8") for p in sorted(root.rglob("*.md")) if p.name != "index.md"}
    cards = []
    for path, text in files.items():
        front, _ = split(text)
        cards.append({"id": path.relative_to(root).as_posix()[:-3], "status": str(front.get("status", "")),
                      "stale_after": str(front.get("stale_after", ""))})
    return {"concepts": cards}


def preview(args: dict) -> dict:
    return {"status": "planned", "base_revision": "toy", "plan_digest": "toy"}


def apply(args: dict) -> dict:
    root = Path(args["bundle_path"])
    changed = []
    with locked(root, fcntl.LOCK_EX):
        for op in args["operations"]:
            path = root / (op["concept_id"] + ".md")
            front, body = split(path.read_text(encoding="utf-8"))
            front.update(op["lifecycle"])
            tmp = path.with_suffix(".tmp")
            tmp.write_text("---\n" + yaml.safe_dump(front, sort_keys=False) + "---\n" + body, encoding="utf-8")
            os.replace(tmp, path)
            changed.append(path.relative_to(root).as_posix())
            time.sleep(0.002)
    return {"status": "applied", "changed_paths": changed}


HANDLERS = {"list_concepts": list_concepts, "preview_concept_patch": preview, "apply_concept_patch": apply}


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[types.Tool(name=n, description=n, input_schema=OBJECT) for n in TOOLS])


async def call_tool(ctx, params):
    out = await anyio.to_thread.run_sync(HANDLERS[params.name], params.arguments or {})
    return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(out))], structured_content=out)


def contract() -> dict:
    """The toy contract (``generated/contract.json`` format) naming the three tools."""
    tool = {"family": "okf", "input_schema": OBJECT, "output_schema": OBJECT, "errors": []}
    return {"knowspec_contract": 1, "revision": {"toy": True}, "error_codes": {}, "error_schema": OBJECT,
            "tools": [{"name": n, **tool} for n in TOOLS]}


server = Server("toy-apply", version="0.0.1", on_list_tools=list_tools, on_call_tool=call_tool)

if __name__ == "__main__":
    from mcp.server.stdio import stdio_server

    async def main():
        async with stdio_server() as (r, w):
            await server.run(r, w, server.create_initialization_options())

    anyio.run(main)
