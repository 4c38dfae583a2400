"""The spec files codegen reads, with their digests: recorded in ``generated/contract.json`` so
that a checkout can tell, without generating anything, whether ``generated/`` is older than spec/."""

from __future__ import annotations

import hashlib
from pathlib import Path

SOURCE_SUFFIXES = frozenset({".json", ".toml", ".sql"})


def source_digests(spec_dir: Path) -> list[tuple[str, str]]:
    """Every spec file with its sha256, so each generated file names what it came from."""
    out = []
    for path in sorted(p for p in spec_dir.rglob("*") if p.is_file() and p.suffix in SOURCE_SUFFIXES):
        out.append((path.relative_to(spec_dir).as_posix(), hashlib.sha256(path.read_bytes()).hexdigest()))
    return out


def changed_sources(spec_dir: Path, recorded: dict[str, str]) -> list[str]:
    """The spec files added, removed or changed since ``recorded`` (a contract's ``sources``)."""
    current = dict(source_digests(spec_dir))
    return sorted(name for name in set(current) | set(recorded) if current.get(name) != recorded.get(name))
