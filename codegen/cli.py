"""`knowspec codegen [--check]`: regenerate generated/ from spec/, or fail when it is stale."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def add_codegen_parser(subparsers: argparse._SubParsersAction) -> None:
    from knowspec.impl.cli_args import existing_dir, writable_folder

    p = subparsers.add_parser("codegen", help="regenerate generated/ from spec/ (or --check it)")
    p.add_argument("--check", action="store_true", help="exit 1 when generated/ differs from what spec/ produces")
    p.add_argument("--spec", type=existing_dir, default=REPO / "spec", help="spec folder (default: the repository's)")
    p.add_argument("--out", type=writable_folder, default=REPO / "generated", help="output folder (default: the repository's)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from knowspec.codegen.build import SpecProblems, produce
    from knowspec.codegen.check import diff_summary, existing_files, write_tree
    from knowspec.codegen.pydantic_models import ModelGenerationError

    try:
        files = produce(args.spec)
    except SpecProblems as exc:
        print("spec problems:", file=sys.stderr)
        for problem in exc.problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
    except ModelGenerationError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    if args.check:
        lines = diff_summary(files, existing_files(args.out))
        if lines:
            print(f"generated/ is stale ({sum(1 for l in lines if not l.startswith(' '))} files); run `knowspec codegen`:")
            print("\n".join(lines))
            return 1
        print(f"generated/ is up to date ({len(files)} files)")
        return 0
    changed = write_tree(files, args.out)
    print(f"wrote {len(changed)} changed files of {len(files)} into {args.out}" if changed
          else f"generated/ already up to date ({len(files)} files)")
    return 0
