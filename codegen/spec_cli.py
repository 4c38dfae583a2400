"""`knowspec spec diff OLD NEW`: what a contract revision means for clients and implementations."""

from __future__ import annotations

import argparse
import sys

EXIT_BAD_INPUT = 2


def add_spec_parser(subparsers: argparse._SubParsersAction) -> None:
    spec = subparsers.add_parser("spec", help="compare contract revisions").add_subparsers(dest="spec_command", required=True)
    p = spec.add_parser("diff", help="classify every change between two contracts (exit 1 when one breaks)",
                        description="Each side is a spec folder or git:REV (a revision of the repository in the "
                                    "current folder). Exit 0 when nothing breaks, 1 when a change breaks clients "
                                    "or implementations, 2 on bad input.")
    p.add_argument("old", help="the earlier contract: a spec folder or git:REV")
    p.add_argument("new", help="the later contract: a spec folder or git:REV")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    fmt.add_argument("--json", dest="format", action="store_const", const="json", help="same as --format json")
    p.set_defaults(func=run_diff)


def run_diff(args: argparse.Namespace) -> int:
    from knowspec.codegen.contract_view import SideError, side
    from knowspec.codegen.spec_diff import diff
    from knowspec.codegen.spec_report import RENDERERS, exit_code

    try:
        with side(args.old) as old, side(args.new) as new:
            changes = diff(old, new)
    except SideError as exc:
        print(f"knowspec spec diff: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    sys.stdout.write(RENDERERS[args.format](changes, args.old, args.new))
    return exit_code(changes)
