"""`knowspec codegen [--check]`: regenerate generated/ from spec/, or fail when it is stale.

In a source checkout both folders default to the repository's. An installed knowspec ships the
spec it was generated from as ``knowspec/spec``; there ``--check`` compares what a spec (that
copy, or ``--spec DIR``) produces with the package's own ``knowspec/generated`` code, and writing
needs an explicit ``--out`` so the installed package is never rewritten.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent  # the checkout, or site-packages/knowspec when installed


def is_checkout(root: Path = REPO) -> bool:
    return (root / "pyproject.toml").is_file()


def add_codegen_parser(subparsers: argparse._SubParsersAction) -> None:
    from knowspec.impl.cli_args import existing_dir, writable_folder

    p = subparsers.add_parser("codegen", help="regenerate generated/ from spec/ (or --check it)")
    p.add_argument("--check", action="store_true", help="exit 1 when generated/ differs from what spec/ produces")
    p.add_argument("--spec", type=existing_dir, default=REPO / "spec",
                   help="spec folder (default: the checkout's spec/, or the copy the installed package ships)")
    p.add_argument("--out", type=writable_folder, default=None,
                   help="generated folder to write or --check (default: the checkout's generated/; "
                        "installed: the package's own generated code, for --check only)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from knowspec.codegen.build import SpecProblems, produce
    from knowspec.codegen.check import LOG_FILES, diff_summary, existing_files, write_tree
    from knowspec.codegen.pydantic_models import ModelGenerationError
    from knowspec.codegen.revisions import UnannouncedBreakingChange, revision_files

    out = args.out or REPO / "generated"
    if args.out is None and not args.check and not is_checkout():
        print("knowspec codegen: not a source checkout; writing would rewrite the installed package: "
              "pass --out DIR (or use --check)", file=sys.stderr)
        return 2
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
    _note_unwritten_tools(args.spec)
    if args.check:
        lines = diff_summary(files, existing_files(out))
        if lines:
            print(f"generated/ is stale ({sum(1 for l in lines if not l.startswith(' '))} files); run `knowspec codegen`:")
            print("\n".join(lines))
            return 1
        print(f"generated/ is up to date ({len(files)} files from the spec, beside {', '.join(sorted(LOG_FILES))}, "
              "the log codegen keeps)")
        return 0
    try:
        files.update(revision_files(args.spec, out))
    except UnannouncedBreakingChange as exc:
        print(str(exc), file=sys.stderr)
        return 1
    changed = write_tree(files, out)
    print(f"wrote {len(changed)} changed files of {len(files)} into {out}" if changed
          else f"generated/ already up to date ({len(files)} files)")
    return 0


def _note_unwritten_tools(spec_dir: Path) -> None:
    """Say which specified tools have no handler yet: the server answers them with not_implemented."""
    from knowspec.impl.handler_presence import is_written
    from knowspec.codegen.load import load_spec

    for family in load_spec(spec_dir).families:
        for tool in family.tools:
            if not is_written(tool.impl):
                print(f"note: {tool.name}: {tool.impl} is not written yet; the server answers the tool with "
                      "not_implemented until it is (spec/README.md#revising-the-contract)", file=sys.stderr)
