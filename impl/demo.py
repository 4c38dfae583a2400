"""`knowspec demo`: the main job on the embedded default, end to end.

Builds the sample help pool (``examples/help`` → ``APPDIR/help.db``), registers a SQLite database
``demo`` with a document pool and imports a collection into it (IMPORTDOC), then starts
``knowspec serve --stdio`` as a real subprocess, connects the ``mcp`` SDK client, lists the tools
and calls a few of each family on the sample OKF bundle and the pools. With ``--http`` it serves
over HTTP after the set-up instead.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
DEMO_DB = "demo"


def add_demo_parser(subparsers: argparse._SubParsersAction) -> None:
    from knowspec.impl.cli import add_settings_options
    from knowspec.impl.cli_args import host_port

    p = subparsers.add_parser("demo", help="build the sample pools, serve over stdio and call tools with a real MCP client")
    p.add_argument("--http", metavar="HOST:PORT", type=host_port,
                   help="after set-up, serve over HTTP instead of running the client")
    p.add_argument("--rebuild", action="store_true", help="rebuild the sample pools even if they exist")
    add_settings_options(p)
    p.set_defaults(func=run, call_timeout=None)  # `--http` serves through `_serve`, which reads it


def prepare(settings, rebuild: bool = False) -> list[str]:
    """Build the help pool and the demo document pool if missing; return what was done."""
    from knowspec.impl.docpool import catalog, importdoc
    from knowspec.impl.docpool.builder import build_pool

    done = []
    settings.appdir.mkdir(parents=True, exist_ok=True)
    help_db = settings.help_db_path
    if rebuild or not help_db.exists():
        counts = build_pool(EXAMPLES / "help", help_db, "netsim-help", title="Netsim Yardım")
        done.append(f"built help pool netsim-help: {counts['topic']} topics, {counts['chunk']} chunks")
    if rebuild or catalog.get_database(settings.catalog, DEMO_DB) is None:
        catalog.register_database(settings.catalog, DEMO_DB, "SQLITE", str(settings.appdir / "demo-docs.db"))
        catalog.execute_alter(settings.catalog, f"ALTER DATABASE {DEMO_DB} SET DOCUMENTS INTERNAL")
        source = settings.appdir / "demo-source.db"
        build_pool(EXAMPLES / "help", source, "demo-docs", title="Demo documents")
        result = importdoc.import_collection(settings, DEMO_DB, "demo-docs", str(source))
        done.append(f"IMPORTDOC into database {DEMO_DB}: {json.dumps({k: result[k] for k in ('result', 'collection', 'topics', 'chunks')})}")
    settings.default_database = settings.default_database or DEMO_DB
    return done


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("list_concepts", {"bundle_path": str(EXAMPLES / "okf-sample")}),
    ("search_concepts", {"bundle_path": str(EXAMPLES / "okf-sample"), "query": "revenue", "limit": 3}),
    ("validate_bundle", {"bundle_path": str(EXAMPLES / "okf-sample")}),
    ("help_search", {"query": "fatura iptal", "limit": 3}),
    ("doc_collections", {}),
    ("doc_search", {"query": "stok kartı", "limit": 3}),
    ("doc_entity", {"kind": "form_class", "key": "tfrmfatura"}),
    ("search_concepts", {"bundle_path": str(EXAMPLES / "okf-sample"), "query": "x", "limit": 101}),
]


def summarise(result) -> str:
    data = result.structured_content or {}
    if result.is_error:
        return f"isError {data.get('code')}: {data.get('message')}"
    parts = []
    for key, value in data.items():
        if isinstance(value, list):
            parts.append(f"{key}[{len(value)}]")
        elif isinstance(value, (str, int, float, bool)) and len(str(value)) < 40:
            parts.append(f"{key}={value}")
    return "ok " + ", ".join(parts[:6])


async def client_run(settings) -> int:
    import mcp.types as types
    from mcp import ClientSession, StdioServerParameters, stdio_client

    args = ["-m", "knowspec.impl.cli", "serve", "--stdio", "--appdir", str(settings.appdir),
            "--help-db", str(settings.help_db_path), "--catalog", str(settings.catalog),
            "--database", settings.default_database or DEMO_DB]
    params = StdioServerParameters(command=sys.executable, args=args, env={**os.environ})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        tools = (await session.list_tools()).tools
        print(f"connected to {init.server_info.name} {init.server_info.version} over stdio: {len(tools)} tools")
        print("<sample bundle> below: the sample OKF bundle shipped as knowspec's examples/okf-sample")
        for name, arguments in CALLS:
            request = types.CallToolRequest(params=types.CallToolRequestParams(name=name, arguments=arguments))
            result = await session.send_request(request, types.CallToolResult)
            shown = {k: ("<sample bundle>" if k == "bundle_path" else v) for k, v in arguments.items()}
            print(f"  {name}({json.dumps(shown, ensure_ascii=False)}) -> {summarise(result)}")
    return 0


def run(args: argparse.Namespace) -> int:
    import anyio

    from knowspec.impl.cli import settings_from

    settings = settings_from(args)
    for line in prepare(settings, rebuild=args.rebuild):
        print(line)
    if args.http:
        from knowspec.impl.cli import _serve

        args.stdio = False
        args.database = settings.default_database
        # A local demo: anonymous callers may read the sample bundle and the pools (never write).
        args.allow_anonymous, args.bundle_root = True, [EXAMPLES / "okf-sample"]
        print("anonymous callers may read; sign in (POST /ClientREST/Login) as a WRITER to write")
        return _serve(args)
    return anyio.run(client_run, settings)
