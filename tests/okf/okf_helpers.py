"""Shared helpers for the OKF read-side tests: calling handlers directly, writing bundles."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from knowspec.impl.context import CallContext
from knowspec.impl.okf.tools import read as read_tools
from tool_args import tool_args

OWN_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "okf"  # bundles the project writes


def ctx() -> CallContext:
    return CallContext()


def list_args(bundle: Path | str, **kw) -> Any:
    return tool_args("list_concepts", bundle_path=str(bundle), **kw)


def read_args(bundle: Path | str, concept_id: str, **kw) -> Any:
    return tool_args("read_concept", bundle_path=str(bundle), concept_id=concept_id, **kw)


def validate_args(bundle: Path | str, **kw) -> Any:
    return tool_args("validate_bundle", bundle_path=str(bundle), **kw)


def list_concepts(bundle, **kw):
    return read_tools.list_concepts(list_args(bundle, **kw), ctx())


def read_concept(bundle, concept_id, **kw):
    return read_tools.read_concept(read_args(bundle, concept_id, **kw), ctx())


def validate(bundle, **kw):
    return read_tools.validate_bundle(validate_args(bundle, **kw), ctx())


def write_bundle(root: Path, files: dict[str, str | bytes]) -> Path:
    """Write ``files`` (relative path → text or bytes) under ``root`` and return the real path."""
    root.mkdir(parents=True, exist_ok=True)
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_bytes(content.encode("utf-8"))
    return Path(os.path.realpath(root))


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    for dirpath, dirnames, filenames in os.walk(dst):
        os.chmod(dirpath, 0o755)
        for name in filenames:
            p = os.path.join(dirpath, name)
            if not os.path.islink(p):
                os.chmod(p, 0o644)
    return Path(os.path.realpath(dst))
