"""``knowspec conform``: options → RunConfig → runner → reporters. Exit codes 0 / 1 / 2.

The lead's CLI mounts :func:`add_conform_parser` under ``knowspec``; :func:`main` runs it alone.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Callable, Iterator

from knowspec.conformance.config import RunConfig

EXIT_USAGE = 2


def positive(cast: type) -> Callable[[str], float]:
    """An argparse type: a number above zero, or a one-line error naming what was expected."""
    def parse(text: str) -> float:
        try:
            value = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {'whole ' if cast is int else ''}number, got {text!r}") from None
        if not 0 < value < float("inf"):
            raise argparse.ArgumentTypeError(f"expected a number above 0, got {text!r}")
        return value
    return parse


DESCRIPTION = """Check any MCP server, started over stdio or reached over HTTP, against the contract:
every advertised tool is called with generated valid and invalid arguments and judged on its
schemas, limits, orderings and error codes. Exit 0: every check passed; 1: contract failures;
2: the target is unreachable or misconfigured; 130: interrupted (the reports hold the cases done).
See conformance/README.md for the checks and the fixtures a target needs."""


def add_conform_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("conform", help="check an MCP server against the knowspec contract",
                                   description=DESCRIPTION)
    add_arguments(parser)
    parser.set_defaults(func=run_from_args)
    nested = parser.add_subparsers(dest="conform_command", metavar="{mutants,fixture}")
    from knowspec.conformance.mutants.cli import add_mutants_arguments, run_mutants

    mutants = nested.add_parser("mutants", help="run the suite through the mutant proxies; report the kill rate")
    add_mutants_arguments(mutants)
    mutants.set_defaults(func=run_mutants)
    from knowspec.conformance.fixtures.pools import add_fixture_arguments, run_fixture

    fixture = nested.add_parser("fixture", help="write the help and document pool fixture a target is started on")
    add_fixture_arguments(fixture)
    fixture.set_defaults(func=run_fixture)
    return parser


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", default=None,
                   help='stdio:"<command line>" or http(s)://host:port/mcp (required)')
    p.add_argument("--family", choices=("okf", "docpool", "all"), default="all",
                   help="which tools to judge: the OKF concept tools, the help and document pool tools, or both")
    p.add_argument("--era", choices=("legacy", "modern"), default="legacy",
                   help="the client's MCP protocol era: legacy (2025 revisions) or modern (2026-07-28)")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated cases (the same seed, the same calls)")
    p.add_argument("--max-examples", type=positive(int), default=25, help="hypothesis examples per property check")
    p.add_argument("--time-budget", type=positive(float), default=None, help="seconds for the whole run")
    p.add_argument("--call-timeout", type=positive(float), default=30.0, help="seconds per tool call")
    p.add_argument("--contract", default=None, metavar="FILE|git:REV",
                   help="contract.json, or git:REV for the contract a revision of this repository generated "
                        "(default: the installed knowspec.generated)")
    p.add_argument("--baseline", type=Path, default=None, help="accepted failures (JSON: check id + tool)")
    p.add_argument("--write-baseline", type=Path, default=None, help="write this run's failures as a baseline")
    p.add_argument("--junit", type=Path, default=None, metavar="FILE", help="write a JUnit XML report (for CI)")
    p.add_argument("--json", type=Path, default=None, metavar="FILE", help="write a JSON report (for machines)")
    p.add_argument("--html", type=Path, default=None, metavar="FILE", help="write an HTML report (for people)")
    p.add_argument("--text", type=Path, default=None, metavar="FILE",
                   help="write the closing summary as plain text (for people; the console writes to stderr)")
    p.add_argument("--bundle-dir", type=Path, default=None,
                   help="where fixture bundles are written (the target must read it); default a temp dir")
    p.add_argument("--rest-url", default=None, help="REST base URL (doc-pool IMPORTDOC path)")
    p.add_argument("--admin-user", default=None)
    p.add_argument("--admin-password", default=os.environ.get("KNOWSPEC_CONFORM_ADMIN_PASSWORD"),
                   help="default: $KNOWSPEC_CONFORM_ADMIN_PASSWORD (command lines are visible to other users)")
    p.add_argument("--pool-dir", type=Path, default=None,
                   help="where the generated source pool is written for IMPORTDOC (the target must read it); "
                        "default: the bundle dir")
    p.add_argument("--pool-database", default=None,
                   help="registered database the fixture pool is imported into (default: the admin session's)")
    p.add_argument("--pool-fixture", type=Path, default=None,
                   help="a pool fixture written by `knowspec conform fixture` that the target was started on: "
                        "the doc and help tools are judged on it (no REST credentials needed)")
    p.add_argument("--reader-user", default=None, help="a REST user without SYSADMIN (non-admin and ACL checks)")
    p.add_argument("--reader-password", default=os.environ.get("KNOWSPEC_CONFORM_READER_PASSWORD"),
                   help="default: $KNOWSPEC_CONFORM_READER_PASSWORD")
    p.add_argument("--bearer-token", default=os.environ.get("KNOWSPEC_CONFORM_TOKEN"),
                   help="HTTP: Authorization bearer token for /mcp (default: $KNOWSPEC_CONFORM_TOKEN; "
                        "without it the suite logs in as --admin-user when --rest-url is given)")
    p.add_argument("--unknown-tool", choices=("jsonrpc", "result", "either"), default="jsonrpc",
                   help="profile: how the target answers an unknown tool")
    p.add_argument("--check", action="append", default=[], dest="checks", help="run only this check id")
    p.add_argument("--exclude", action="append", default=[], help="skip this check id")
    p.add_argument("--shared-session", action="store_true",
                   help="one MCP session for the whole run (no parallel workers; a crash affects later checks)")
    p.add_argument("--workers", type=int, default=3,
                   help="MCP sessions judged in parallel (default 3; 1: one case at a time)")
    p.add_argument("--strict", action="store_true",
                   help="fail the run when a whole contract area was skipped (no pool fixture, no successful call)")
    p.add_argument("--tool", action="append", default=[], dest="tools", help="check only this tool (repeatable)")
    p.add_argument("--advertised-only", action="store_true",
                   help="judge only the contract tools the target lists in tools/list (a server that implements "
                        "part of the contract); the others are reported as not judged, not as failures")
    p.add_argument("--list-checks", action="store_true", help="print the check ids and rules, then exit")
    p.add_argument("-v", "--verbose", action="store_true", help="print every case, not only failures")


def config_from_args(ns: argparse.Namespace) -> RunConfig:
    return RunConfig(target=ns.target, family=ns.family, era=ns.era, seed=ns.seed,
                     max_examples=ns.max_examples, time_budget=ns.time_budget, call_timeout=ns.call_timeout,
                     contract_path=ns.contract, baseline=ns.baseline, bundle_dir=ns.bundle_dir,
                     rest_url=ns.rest_url, admin_user=ns.admin_user, admin_password=ns.admin_password,
                     pool_dir=ns.pool_dir, pool_database=ns.pool_database, reader_user=ns.reader_user,
                     reader_password=ns.reader_password, bearer_token=ns.bearer_token, pool_fixture=ns.pool_fixture,
                     unknown_tool=ns.unknown_tool, checks=tuple(ns.checks), exclude=tuple(ns.exclude),
                     tools=tuple(ns.tools), shared_session=ns.shared_session, workers=max(1, ns.workers),
                     strict=ns.strict, advertised_only=ns.advertised_only)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (a CI job's timeout, ``kill``) ends the run as Ctrl-C does: the stdio targets it
    started are stopped, the temporary bundles removed, and the reports say what finished."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def hypothesis_cache_outside_cwd() -> Path | None:
    """Point hypothesis's storage (its example cache, a Unicode table, collected constants) at
    ``$XDG_CACHE_HOME/knowspec/hypothesis`` (``~/.cache/...``): by default it writes
    ``.hypothesis/`` into whatever folder a user ran ``knowspec conform`` from. A
    ``HYPOTHESIS_STORAGE_DIRECTORY`` the caller set wins; the folder chosen, or None."""
    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        return None
    from hypothesis.configuration import set_hypothesis_home_dir

    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    place = base / "knowspec" / "hypothesis"
    try:
        place.mkdir(parents=True, exist_ok=True)
    except OSError:   # no writable home: a folder of this run's own
        import tempfile

        place = Path(tempfile.mkdtemp(prefix="knowspec-hypothesis-"))
    set_hypothesis_home_dir(place)
    return place


def run_from_args(ns: argparse.Namespace) -> int:
    from knowspec.conformance.reporters.console import ConsoleReporter
    from knowspec.conformance.reporters.html import HtmlReporter
    from knowspec.conformance.reporters.json_report import JsonReporter
    from knowspec.conformance.reporters.junit import JunitReporter
    from knowspec.conformance.reporters.text import TextReporter
    from knowspec.conformance.runner import EXIT_INTERRUPTED, run_to_end

    if getattr(ns, "list_checks", False):
        from knowspec.conformance.checks import CHECKS

        for spec in CHECKS.values():
            print(f"{spec.id:24} {spec.scope:6} {spec.rule}")
        return 0
    if not ns.target:
        print("knowspec conform: --target is required (stdio:\"<command>\" or an http(s) URL)", file=sys.stderr)
        return EXIT_USAGE
    hypothesis_cache_outside_cwd()
    consumers: list = [ConsoleReporter(verbose=ns.verbose)]
    try:
        consumers += [cls(path) for cls, path in ((JunitReporter, ns.junit), (JsonReporter, ns.json),
                                                  (HtmlReporter, ns.html), (TextReporter, ns.text))
                      if path is not None]
    except OSError as exc:
        print(f"knowspec conform: cannot write a report there: {exc.strerror} ({exc.filename})", file=sys.stderr)
        return EXIT_USAGE
    try:
        with sigterm_as_interrupt():
            finished = run_to_end(config_from_args(ns), consumers)
    except KeyboardInterrupt:   # before the first case or after the reports: nothing left to write
        from knowspec.conformance.spawned import stop_all

        stop_all()
        print("knowspec conform: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    if ns.write_baseline is not None and finished.results:
        from knowspec.conformance.reporters.baseline import write_baseline

        write_baseline(ns.write_baseline, finished)
    return finished.exit_code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="knowspec-conform", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command")
    add_conform_parser(sub)
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] != ["conform"]:
        args = ["conform", *args]
    try:
        ns = parser.parse_args(args)
    except SystemExit as exc:
        return int(exc.code or 0) and EXIT_USAGE
    return ns.func(ns)


if __name__ == "__main__":
    sys.exit(main())
