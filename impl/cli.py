"""`knowspec`: serve the OKF concept and document pool tools over MCP, check any MCP server
against the contract, and manage pools, users and the generated code."""

from __future__ import annotations

import argparse
import difflib
import importlib
import logging
import os
import signal
import socket
import sys
import traceback
from pathlib import Path
from typing import Sequence

from knowspec.impl.cli_args import (UsageError, candidate_count, host_port, log_level, positive_float, raised_limit,
                                    worker_count)
from knowspec.impl.config import Settings
from knowspec.impl.docpool.catalog_store import is_catalog_url

DEBUG_HINT = "run again with --debug for the traceback"

# (module, function) pairs that add a subcommand; each lives next to the code it drives.
SUBCOMMANDS = (
    ("knowspec.codegen.cli", "add_codegen_parser"),
    ("knowspec.codegen.spec_cli", "add_spec_parser"),
    ("knowspec.conformance.cli", "add_conform_parser"),
    ("knowspec.impl.demo", "add_demo_parser"),
    ("knowspec.impl.bench", "add_bench_parser"),
)
POOL_COMMANDS = (
    ("knowspec.impl.docpool.builder", "add_pool_build_parser"),
    ("knowspec.impl.docpool.importdoc", "add_pool_import_parser"),
    ("knowspec.impl.docpool.importdoc", "add_pool_reindex_parser"),
    ("knowspec.impl.docpool.importdoc", "add_pool_remove_parser"),
    ("knowspec.impl.docpool.catalog_cli", "add_db_parser"),
)
OTHER_GROUPS = (
    ("model", "build and check vector model packs", (("knowspec.impl.docpool.vectors.cli", "add_model_parser"),)),
    ("user", "manage REST users and roles", (("knowspec.impl.docpool.auth", "add_user_parser"),)),
)


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2) and a did-you-mean for a mistyped choice.

    Subparsers inherit the class, so every ``knowspec`` command answers the same way.
    """

    def _check_value(self, action: argparse.Action, value) -> None:
        if action.choices is None or value in action.choices:
            return
        names = [str(c) for c in action.choices]
        close = difflib.get_close_matches(str(value), names, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        if isinstance(action, argparse._SubParsersAction):
            raise argparse.ArgumentError(None, f"unknown command {value!r}{hint} (choose from {', '.join(names)})")
        raise argparse.ArgumentError(action, f"invalid choice {value!r}{hint} (choose from {', '.join(names)})")

    def parse_known_args(self, args=None, namespace=None):
        self._seen = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}{self._option_hint()} (see {self.prog} --help)\n")

    def _option_hint(self) -> str:
        """For a mistyped ``--colection``: the closest option this command (or one below it) knows."""
        known = _option_strings(self)
        for word in getattr(self, "_seen", []):
            name = word.split("=", 1)[0]
            if name.startswith("--") and name not in known:
                close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
                if close:
                    return f"; did you mean {close[0]!r}?"
        return ""


def _option_strings(parser: argparse.ArgumentParser) -> set[str]:
    names = {o for o in parser._option_string_actions if o.startswith("--")}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in set(action.choices.values()):
                names |= _option_strings(sub)
    return names


def add_settings_options(p: argparse.ArgumentParser, *, catalog_only: bool = False) -> None:
    """The state options; ``catalog_only`` for the commands that read the catalog and nothing else
    (users, the database registry): they offer no --help-db or --database they would ignore."""
    p.add_argument("--appdir", type=Path, help="the server's ${APPDIR} (default: $KNOWSPEC_APPDIR or ./.knowspec)")
    if not catalog_only:
        p.add_argument("--help-db", type=Path, help="help pool file (default: APPDIR/help.db)")
    p.add_argument("--catalog", help="catalog database: a SQLite file (default: APPDIR/catalog.db) or a "
                                      "postgresql:// URL that several servers may share")
    if not catalog_only:
        p.add_argument("--database", help="default database for doc_* tools that name none")


def settings_from(args: argparse.Namespace) -> Settings:
    settings = Settings()
    if getattr(args, "appdir", None):
        settings.appdir = args.appdir.absolute()
    if getattr(args, "help_db", None):
        settings.help_db = args.help_db.absolute()
    if getattr(args, "catalog", None):
        if is_catalog_url(args.catalog):
            settings.catalog_url = args.catalog
        else:
            settings.catalog_db = Path(args.catalog).absolute()
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


def prepare_serve(args: argparse.Namespace):
    """The call runtime ``serve`` runs (one per server process: each worker of ``--workers N`` makes its own)."""
    from knowspec.impl import runtime as process
    from knowspec.impl.server.access import apply_serve_access_options
    from knowspec.impl.server.native_memory import limit_arenas
    from knowspec.impl.server.pipeline import ToolRuntime

    limit_arenas()  # before any worker thread exists: bounded RSS (impl/server/native_memory.py)
    settings = settings_from(args)
    apply_serve_access_options(args, settings)
    if args.call_timeout:
        settings.call_timeout_seconds = args.call_timeout
    settings.server_name = getattr(args, "server_name", settings.server_name)  # `demo --http` has no such options
    settings.server_version = getattr(args, "server_version", None) or ""
    # The server's one runtime (every cache, the KNOWSPEC_* settings read now); activated, so code
    # that runs without a call context (pool openers, storages) reaches the same one.
    state = process.Runtime(_runtime_settings(args))
    process.activate(state)
    from knowspec.impl.docpool import warmup

    found = warmup.pool_locations(settings.catalog)
    warming = warmup.start(found)  # each pool's driver, connection and full-text index
    tools = ToolRuntime(settings, process_runtime=state)
    if found:  # an OKF-only server never loads the document tools
        tools.resolve_handlers("docpool")  # now, while the pools warm: not in the first search
    warming.join(warmup.READY_WAIT_SECONDS)  # then it goes on in the background
    return tools


def _state_notes(settings: Settings) -> list[str]:
    """Lines for the operator (stderr) when the state folder lacks what the help and doc tools
    read: their answers (``help pool not found``, ``database is required``) name no remedy."""
    from knowspec.impl.docpool import catalog

    notes = []
    if not settings.help_db_path.is_file():
        notes.append(f"knowspec serve: no help pool at {settings.help_db_path}: help_* tools answer 'help pool not "
                     "found' (`knowspec pool build SOURCE_DIR help.db --collection NAME` or `knowspec demo` makes one)")
    registered: list[str] | None
    try:
        registered = sorted(entry.name for entry in catalog.list_databases(settings.catalog))
    except Exception:  # noqa: BLE001 - an unreachable catalog is reported by the tools that need it
        registered = None
    if registered == []:
        notes.append("knowspec serve: no document database is registered in the catalog: doc_* tools have none to "
                     "read (`knowspec pool register`, then `knowspec pool import`)")
    elif registered and not settings.default_database:
        shown = ", ".join(registered[:10]) + (f" and {len(registered) - 10} more" if len(registered) > 10 else "")
        notes.append(f"knowspec serve: no --database given: doc_* tools answer 'database is required' unless a call "
                     f"names one (registered: {shown})")
    return notes


def stale_generated_note(root: Path | None = None) -> str | None:
    """In a source checkout, a line when spec/ changed since generated/ was made: the server
    serves the generated contract, so an edited tools.toml or schema is not served until
    ``knowspec codegen`` runs. An installed package has no spec/ of its own to drift from."""
    import json

    from knowspec.codegen.cli import REPO, is_checkout
    from knowspec.codegen.sources import changed_sources

    root = REPO if root is None else root
    if not is_checkout(root):
        return None
    try:
        recorded = json.loads((root / "generated" / "contract.json").read_text(encoding="utf-8"))["sources"]
    except (OSError, ValueError, KeyError, TypeError):
        return "knowspec serve: generated/contract.json is missing or unreadable: run `knowspec codegen`"
    changed = changed_sources(root / "spec", recorded)
    if not changed:
        return None
    more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
    return (f"knowspec serve: spec/ changed since generated/ was made (spec/{changed[0]}{more}): this server "
            "serves the contract generated before; run `knowspec codegen`")


def _import_folder(settings: Settings) -> None:
    """The folder IMPORTDOC reads its sources from (REST), made when missing: an operator's
    first IMPORTDOC had found nothing to read in a folder nobody had made."""
    try:
        settings.import_path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        print(f"knowspec serve: cannot make the IMPORTDOC folder {settings.import_path}: {exc.strerror or exc}",
              file=sys.stderr)


def _serve(args: argparse.Namespace) -> int:
    _runtime_settings(args)  # bad or unavailable settings stop here, before any worker starts

    def notes() -> None:  # once the server can start: a refusal stays one line
        settings = settings_from(args)
        for note in [*_state_notes(settings), stale_generated_note()]:
            if note:
                print(note, file=sys.stderr)
        if args.http:
            _import_folder(settings)

    workers = getattr(args, "workers", 1)
    if args.http and workers > 1:
        from knowspec.impl.server.workers import serve_workers

        host, port = args.http
        try:
            sock = _listening_socket(host, port)
        except OSError as exc:
            print(f"knowspec serve: cannot listen on {_authority(host, port)}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        notes()
        with sock:
            return serve_workers(args, sock, workers)
    runtime = prepare_serve(args)
    if args.http:
        import uvicorn

        from knowspec.impl.server.connection_limits import limits_for
        from knowspec.impl.server.http_app import build_app
        from knowspec.impl.server.http_protocol import capped

        host, port = args.http
        app = build_app(runtime, host=host)
        protocol = capped(limits_for(runtime.settings))
        try:
            sock = _listening_socket(host, port)
        except OSError as exc:
            print(f"knowspec serve: cannot listen on {_authority(host, port)}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        notes()
        server = _uvicorn_server_class()(uvicorn.Config(app, host=host, port=port, log_level=args.log_level.lower(),
                                                        http=protocol, proxy_headers=False))
        with sock:
            server.run(sockets=[sock])
        return 0 if server.started else 1
    import anyio

    from knowspec.impl.server.mcp_server import serve_stdio

    notes()
    anyio.run(serve_stdio, runtime)
    return 0


def _runtime_settings(args: argparse.Namespace):
    """The KNOWSPEC_* settings read now, with the bundle limits the operator raised."""
    import dataclasses

    from knowspec.impl import runtime as process

    settings = dataclasses.replace(process.RuntimeSettings.from_environment(),
                                   max_bundle_files=getattr(args, "max_bundle_files", None),
                                   max_bundle_bytes=getattr(args, "max_bundle_bytes", None))
    index, candidates = getattr(args, "vector_index", "exact"), getattr(args, "vector_candidates", None)
    if candidates is not None and index != "approximate":
        raise UsageError("--vector-candidates needs --vector-index approximate")
    if index == "approximate":
        from knowspec.impl.docpool.vectors.approximate import usearch_index_module

        usearch_index_module()  # a missing 'ann' extra is one line now, not at the first vector query
        settings = dataclasses.replace(settings, vector_index=index,
                                       vector_candidates=candidates or settings.vector_candidates)
    return settings


def _authority(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _announce(host: str, port: int, stream=None) -> None:
    """Where a listening ``serve --http`` answers, printed once the socket is bound."""
    wildcard = host in ("0.0.0.0", "::")
    base = f"http://{_authority({'0.0.0.0': '127.0.0.1', '::': '::1'}.get(host, host), port)}"
    lines = (f"knowspec: listening on {base}" + (" (and every other address of this machine)" if wildcard else ""),
             f"  MCP (streamable HTTP): {base}/mcp",
             f"  REST:                  {base}/ClientREST/ (POST Login first; admin: {base}/AdminREST/EXECCOMMAND)",
             f"  OpenAPI:               {base}/openapi.json",
             f"  health:                {base}/healthz",
             "  stop with Ctrl+C")
    print("\n".join(lines), file=stream or sys.stderr, flush=True)


def _listening_socket(host: str, port: int) -> socket.socket:
    """Bind before uvicorn starts, so a taken port is one clear line instead of a log record."""
    from knowspec.impl.server.workers import bound_socket

    return bound_socket(host, port)


def _uvicorn_server_class():
    import uvicorn

    class AnnouncingServer(uvicorn.Server):
        """uvicorn's server that prints the URLs after it has bound its socket (not before)."""

        async def startup(self, sockets=None) -> None:
            import asyncio

            from knowspec.impl.server.connection_limits import quiet_accept_failures

            quiet_accept_failures(asyncio.get_running_loop())
            await super().startup(sockets=sockets)
            if self.started:
                bound = self.servers[0].sockets[0].getsockname()
                _announce(self.config.host, bound[1])

    return AnnouncingServer


def _version() -> str:
    """The installed distribution's version (package metadata), as pip shows it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("knowspec")
    except PackageNotFoundError:  # imported from a source tree that was never installed
        return "unknown (not installed)"


def build_parser(only_serve: bool = False) -> argparse.ArgumentParser:
    """The ``knowspec`` parser. ``only_serve``: the command line names ``serve``, so the other
    commands are not mounted: mounting one imports its module, and the document pool commands'
    modules (numpy, the storages) would stay resident in a server that may never need them."""
    parser = Parser(prog="knowspec", description=__doc__)
    parser.add_argument("--version", action="version", version=f"knowspec {_version()}")
    parser.add_argument("--log-level", default="WARNING", type=log_level,
                        help="logging level on stderr: DEBUG, INFO, WARNING (default), ERROR or CRITICAL")
    parser.add_argument("--debug", action="store_true", help="show the full traceback when a command fails")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="serve all tools over MCP (stdio, or streamable HTTP with REST)")
    mode = serve.add_mutually_exclusive_group(required=True)
    mode.add_argument("--stdio", action="store_true", help="MCP over standard input/output")
    mode.add_argument("--http", metavar="HOST:PORT", type=host_port,
                      help="streamable HTTP at /mcp plus REST routes (e.g. 127.0.0.1:8765; port 0 picks a free one)")
    add_settings_options(serve)
    serve.add_argument("--call-timeout", type=positive_float, metavar="SECONDS",
                       help="deadline per tool call; a call past it answers operation_cancelled (default 120)")
    serve.add_argument("--workers", type=worker_count, default=1, metavar="N",
                       help="with --http: N server processes sharing the port, one core each (default 1); "
                            "sessions and users are kept in the catalog, so every worker honours them")
    serve.add_argument("--server-name", default="knowspec",
                       help="serverInfo.name in the initialize answer (okf-mcp's own is okf-mcp)")
    serve.add_argument("--server-version", metavar="VERSION",
                       help="serverInfo.version (default: the installed knowspec version; okf-mcp's is 0.2.0)")
    from knowspec.impl.okf.bundle.limits import DEFAULT_MAX_BYTES, DEFAULT_MAX_FILES

    serve.add_argument("--max-bundle-files", type=raised_limit(DEFAULT_MAX_FILES, "files"), metavar="N",
                       help="raise the OKF bundle limit of 10,000 files (and concepts) to N")
    serve.add_argument("--max-bundle-bytes", type=raised_limit(DEFAULT_MAX_BYTES, "bytes"), metavar="N",
                       help="raise the OKF bundle limit of 64 MiB (67108864 bytes) of captured files to N bytes")
    serve.add_argument("--vector-index", choices=("exact", "approximate"), default="exact",
                       help="vector ranking: exact (default) or approximate, an HNSW graph for pools of ~1M+ chunks "
                            "whose candidates are re-scored exactly (needs the 'ann' extra)")
    serve.add_argument("--vector-candidates", type=candidate_count, metavar="N",
                       help="with --vector-index approximate: rows the graph proposes per matrix and query, "
                            "re-scored exactly (default 500; more: higher recall, slower)")
    from knowspec.impl.server.access import add_serve_access_options

    add_serve_access_options(serve)
    serve.set_defaults(func=_serve)
    if only_serve:
        _accept_debug_everywhere(parser)
        return parser

    for module, func in SUBCOMMANDS:
        _mount(sub, module, func)
    pool = sub.add_parser("pool", help="build, import and register document pools").add_subparsers(dest="pool_command", required=True)
    for module, func in POOL_COMMANDS:
        _mount(pool, module, func)
    for name, help_text, adders in OTHER_GROUPS:
        group = sub.add_parser(name, help=help_text).add_subparsers(dest=f"{name}_command", required=True)
        for module, func in adders:
            _mount(group, module, func)
    _accept_debug_everywhere(parser)
    return parser


def _names_serve(argv: Sequence[str]) -> bool:
    """Whether the first word of ``argv`` that is no top-level option is ``serve``."""
    words = iter(argv)
    for word in words:
        if word == "--log-level":
            next(words, None)
        elif not word.startswith("-"):
            return word == "serve"
    return False


def _accept_debug_everywhere(parser: argparse.ArgumentParser) -> None:
    """``--debug`` works after the subcommand too (``knowspec pool build ... --debug``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in set(action.choices.values()):
                if "--debug" not in sub._option_string_actions:
                    sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
                _accept_debug_everywhere(sub)


def _command_name(args: argparse.Namespace) -> str:
    words = ["knowspec", args.command]
    nested = getattr(args, f"{args.command}_command", None)
    return " ".join(words + ([nested] if nested else []))


def _one_line(exc: BaseException) -> str:
    from knowspec.impl.errors import ToolError

    if isinstance(exc, ToolError):
        text = f"{exc.code}: {exc.message}"
    else:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:297] + "..."


def main(argv: Sequence[str] | None = None) -> int:
    # BLAS worker threads spin while idle and starve the event loop on small machines; vector
    # scoring splits its work over its own threads instead (KNOWSPEC_VECTOR_THREADS,
    # docpool/vectors/parallelism.py). Set before numpy is first imported.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(only_serve=_names_serve(words))
    args = parser.parse_args(words)
    logging.basicConfig(level=args.log_level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    command = _command_name(args)
    try:
        return int(args.func(args) or 0)
    except UsageError as exc:
        print(f"{command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`knowspec ... | head`): stop quietly, as `git log` does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's flush must not fail again
        return 128 + signal.SIGPIPE
    except ImportError as exc:  # an optional library this command needs is not installed
        from knowspec.impl.extras import missing_extra_message

        text = missing_extra_message(exc)
        if text is None:
            if args.debug:
                traceback.print_exc()
            else:
                print(f"{command}: failed: {_one_line(exc)} ({DEBUG_HINT})", file=sys.stderr)
            return 1
        print(f"knowspec: {text}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - the last word on anything a command did not expect
        if args.debug:
            traceback.print_exc()
        else:
            print(f"{command}: failed: {_one_line(exc)} ({DEBUG_HINT})", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
