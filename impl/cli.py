"""`knowspec`: one command, thin subcommands that turn options into one core call each."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from pathlib import Path
from typing import Sequence

from knowspec.impl.config import Settings

# (module, function) pairs that add a subcommand; each lives next to the code it drives.
SUBCOMMANDS = (
    ("knowspec.codegen.cli", "add_codegen_parser"),
    ("knowspec.conformance.cli", "add_conform_parser"),
    ("knowspec.impl.demo", "add_demo_parser"),
    ("knowspec.impl.bench", "add_bench_parser"),
)
POOL_COMMANDS = (
    ("knowspec.impl.docpool.builder", "add_pool_build_parser"),
    ("knowspec.impl.docpool.importdoc", "add_pool_import_parser"),
    ("knowspec.impl.docpool.catalog_cli", "add_db_parser"),
)
OTHER_GROUPS = (
    ("model", "build and check vector model packs", (("knowspec.impl.docpool.vectors.cli", "add_model_parser"),)),
    ("user", "manage REST users and roles", (("knowspec.impl.docpool.auth", "add_user_parser"),)),
)


def add_settings_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--appdir", type=Path, help="the server's ${APPDIR} (default: $KNOWSPEC_APPDIR or ./.knowspec)")
    p.add_argument("--help-db", type=Path, help="help pool file (default: APPDIR/help.db)")
    p.add_argument("--catalog", type=Path, help="catalog database (default: APPDIR/catalog.db)")
    p.add_argument("--database", help="default database for doc_* tools that name none")


def settings_from(args: argparse.Namespace) -> Settings:
    settings = Settings()
    if getattr(args, "appdir", None):
        settings.appdir = args.appdir.absolute()
    if getattr(args, "help_db", None):
        settings.help_db = args.help_db.absolute()
    if getattr(args, "catalog", None):
        settings.catalog_db = args.catalog.absolute()
    if getattr(args, "database", None):
        settings.default_database = args.database
    return settings


def _mount(subparsers: argparse._SubParsersAction, module: str, func: str) -> None:
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):
            return  # that part of knowspec is not built yet
        raise
    adder = getattr(mod, func, None)
    if adder is not None:
        adder(subparsers)


def _serve(args: argparse.Namespace) -> int:
    from knowspec.impl.server.access import apply_serve_access_options
    from knowspec.impl.server.pipeline import ToolRuntime

    settings = settings_from(args)
    apply_serve_access_options(args, settings)
    if args.call_timeout:
        settings.call_timeout_seconds = args.call_timeout
    runtime = ToolRuntime(settings)
    if args.http:
        import uvicorn

        from knowspec.impl.server.http_app import build_app

        host, _, port = args.http.rpartition(":")
        host = host.strip("[]") or "127.0.0.1"
        app = build_app(runtime, host=host)
        uvicorn.run(app, host=host, port=int(port), log_level=args.log_level.lower())
        return 0
    import anyio

    from knowspec.impl.server.mcp_server import serve_stdio

    anyio.run(serve_stdio, runtime)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="knowspec", description=__doc__)
    parser.add_argument("--log-level", default="WARNING", help="logging level on stderr")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="serve all tools over MCP (stdio, or streamable HTTP with REST)")
    mode = serve.add_mutually_exclusive_group(required=True)
    mode.add_argument("--stdio", action="store_true", help="MCP over standard input/output")
    mode.add_argument("--http", metavar="HOST:PORT", help="streamable HTTP at /mcp plus REST routes")
    add_settings_options(serve)
    serve.add_argument("--call-timeout", type=float, metavar="SECONDS",
                       help="deadline per tool call; a call past it answers operation_cancelled (default 120)")
    from knowspec.impl.server.access import add_serve_access_options

    add_serve_access_options(serve)
    serve.set_defaults(func=_serve)

    for module, func in SUBCOMMANDS:
        _mount(sub, module, func)
    pool = sub.add_parser("pool", help="build, import and register document pools").add_subparsers(dest="pool_command", required=True)
    for module, func in POOL_COMMANDS:
        _mount(pool, module, func)
    for name, help_text, adders in OTHER_GROUPS:
        group = sub.add_parser(name, help=help_text).add_subparsers(dest=f"{name}_command", required=True)
        for module, func in adders:
            _mount(group, module, func)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # BLAS worker threads spin while idle and starve the event loop on small machines; vector
    # scoring is single-threaded by design. Set before numpy is first imported.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
