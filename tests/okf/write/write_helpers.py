"""Helpers for the OKF write-side tests: tiny bundles on disk and tool-call wrappers."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource

from knowspec.impl.context import CallContext
from knowspec.impl.okf.tools import write as write_tools
from tool_args import tool_args, unchecked_args

SCHEMAS = Path(__file__).resolve().parents[3] / "spec" / "okf" / "schemas"


_GOOD: dict[str, dict] = {}


def _load_schema(path: Path) -> dict | None:
    """Parse a schema; while another writer is mid-edit, fall back to the last good copy."""
    for _ in range(20):
        try:
            _GOOD[path.name] = json.loads(path.read_text())
            return _GOOD[path.name]
        except ValueError:
            if path.name in _GOOD:
                return _GOOD[path.name]
            time.sleep(0.25)
    return None


def _registry() -> Registry:
    resources = []
    for path in SCHEMAS.glob("*.schema.json"):
        doc = _load_schema(path)
        if doc is None:
            continue
        if "$id" in doc:
            resources.append((doc["$id"], Resource.from_contents(doc)))
    # common.schema.json refers to the envelope by file path (../../common/error.schema.json),
    # which resolves against its $id to this URI.
    error = json.loads((SCHEMAS.parents[1] / "common" / "error.schema.json").read_text())
    resources.append(("https://okf.dev/common/error.schema.json", Resource.from_contents(error)))
    return Registry().with_resources(resources)


def assert_valid_output(tool: str, payload: dict) -> None:
    schema = _load_schema(SCHEMAS / f"{tool}.output.schema.json")
    jsonschema.Draft202012Validator(schema, registry=_registry(),
                                    format_checker=jsonschema.FormatChecker()).validate(payload)


def make_bundle(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return root


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under root (including .okf) as relative path -> bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def visible_bytes(root: Path) -> dict[str, bytes]:
    return {k: v for k, v in tree_bytes(root).items() if not k.startswith(".okf")}


def commit_leftovers(root: Path) -> set[str]:
    """What an unfinished commit left under ``.okf``: its journal, the journal's temporary file,
    or anything in the staging folder (which stays, empty, between commits)."""
    okf = root / ".okf"
    if not okf.exists():
        return set()
    found = {"journal.json", "journal.json.tmp"} & set(os.listdir(okf))
    staging = okf / "txn"
    if staging.is_symlink() or (staging.exists() and not staging.is_dir()):
        found.add("txn")
    elif staging.is_dir():
        found |= {f"txn/{name}" for name in os.listdir(staging)}
    return found


def patch_args(bundle: Path, ops: list[dict], actor: str = "human:reviewer", *, unchecked: bool = False,
               **extra) -> Any:
    """Preview arguments, or apply arguments when ``extra`` names the expected revision.

    ``unchecked`` skips the model's validation, to reach the decoder's own checks."""
    tool = "apply_concept_patch" if "expected_revision" in extra else "preview_concept_patch"
    build = unchecked_args if unchecked else tool_args
    return build(tool, bundle_path=str(bundle), actor=actor, operations=ops, **extra)


def preview(bundle: Path, ops: list[dict], **kw) -> dict:
    out = write_tools.preview_concept_patch(patch_args(bundle, ops, **kw), CallContext()).structured
    assert_valid_output("preview_concept_patch", out)
    return out


def apply(bundle: Path, ops: list[dict], revision: str, digest: str, ctx: CallContext | None = None, **kw) -> dict:
    args = patch_args(bundle, ops, expected_revision=revision, expected_plan_digest=digest, **kw)
    out = write_tools.apply_concept_patch(args, ctx or CallContext()).structured
    assert_valid_output("apply_concept_patch", out)
    return out


def preview_and_apply(bundle: Path, ops: list[dict]) -> tuple[dict, dict]:
    p = preview(bundle, ops)
    return p, apply(bundle, ops, p["base_revision"], p["plan_digest"])


CONCEPT = (
    "---\n"
    "type: Note  # the kind\n"
    "title: 'Cache policy'\n"
    "x-owner: {team: infra}\n"
    "sources:\n"
    "  - id: rfc\n"
    "    resource: https://example.invalid/rfc\n"
    "    x-note: keep me   # unknown nested key\n"
    "  - resource: https://example.invalid/anon\n"
    "verified:\n"
    "  by: human:ana\n"
    "  at: 2026-07-01T09:00:00Z\n"
    "status: draft\n"
    "---\n"
    "# Cache\n"
    "\n"
    "Body text stays.\n"
)
INDEX = '---\nokf_version: "0.2"\n---\n# Index\n\n- [Cache](arch/cache.md)\n- [Other](other.md)\n'


