"""Write ``generated/`` or compare it with what the spec produces (the CI staleness gate)."""

from __future__ import annotations

import difflib
import shutil
from pathlib import Path


def existing_files(out_dir: Path) -> dict[str, str]:
    if not out_dir.exists():
        return {}
    return {
        p.relative_to(out_dir).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(out_dir.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


# Kept by codegen across regenerations (codegen/revisions.py), so not derivable from spec/ alone.
LOG_FILES = frozenset({"CHANGES.md"})


def diff_summary(expected: dict[str, str], actual: dict[str, str], max_lines: int = 60) -> list[str]:
    """Readable summary of how ``actual`` (on disk) differs from ``expected`` (from spec)."""
    lines = []
    for rel in sorted((set(expected) | set(actual)) - LOG_FILES):
        if rel not in actual:
            lines.append(f"missing: generated/{rel}")
        elif rel not in expected:
            lines.append(f"unexpected: generated/{rel} (not produced by the spec)")
        elif expected[rel] != actual[rel]:
            lines.append(f"stale: generated/{rel}")
            diff = difflib.unified_diff(
                actual[rel].splitlines(), expected[rel].splitlines(),
                f"generated/{rel} (on disk)", f"generated/{rel} (from spec)", lineterm="", n=1,
            )
            lines.extend("    " + d for d in list(diff)[:max_lines])
    return lines


def write_tree(files: dict[str, str], out_dir: Path) -> list[str]:
    """Replace ``out_dir`` with exactly ``files``; return the paths that changed."""
    before = existing_files(out_dir)
    changed = [rel for rel in sorted(set(files) | set(before)) if files.get(rel) != before.get(rel)]
    if not changed:
        return []
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    for rel, text in files.items():
        path = tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    old = out_dir.with_name(out_dir.name + ".old")
    if old.exists():
        shutil.rmtree(old)
    if out_dir.exists():
        out_dir.rename(old)
    tmp.rename(out_dir)
    if old.exists():
        shutil.rmtree(old)
    return changed
