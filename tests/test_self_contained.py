"""The repository stands alone: no file reads or links the reference folder kept beside checkouts.

Contract notes live in spec/, fixtures in tests/fixtures/; the upstream fixture set and the large
corpus are reached only through the settings read by ``tests/optional_data.py`` and
``benchmarks/common.py`` (CI fills them from the folder beside its clone).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Built from parts so that this file does not match itself.
_NAME = "sha" + "red"
FORBIDDEN = re.compile(
    rf"(\.\./|/work/){_NAME}\b"  # the folder beside a checkout, relative or absolute
    rf"|[\"']{_NAME}[\"']"  # a path component in code: Path(...) / "<name>"
    rf"|{_NAME}/(okf-contracts|okf-fixtures|corpora|seeds|research)\b"  # its sub-folders
)
SKIPPED_DIRS = {".git", ".venv", "node_modules", "__pycache__", ".pytest_cache", ".hypothesis", "build", "dist"}


def tracked_files() -> list[str]:
    """``git ls-files``; a plain walk when the tree is not a git checkout (e.g. ``git archive``)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
        return [p for p in out.decode().split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        found = []
        for dirpath, dirs, files in os.walk(REPO):
            dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info")]
            found += [os.path.relpath(os.path.join(dirpath, f), REPO) for f in files]
        return found


def offending_lines(rel: str) -> list[str]:
    try:
        text = (REPO / rel).read_text(encoding="utf-8")
    except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
        return []
    return [f"{rel}:{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1) if FORBIDDEN.search(line)]


def test_pattern_catches_the_ways_the_folder_was_named():
    samples = ["../" + _NAME + "/okf-contracts/read.md", "/work/" + _NAME + "/corpora", f'parents[2] / "{_NAME}"',
               f"{_NAME}/okf-fixtures/fixtures"]
    assert all(FORBIDDEN.search(s) for s in samples)
    assert not FORBIDDEN.search("one catalog SELECT shared by both lookups; shared `$defs`")


def test_no_tracked_file_reads_or_links_the_reference_folder():
    hits = [hit for rel in tracked_files() for hit in offending_lines(rel)]
    assert hits == [], "files outside the repository are named:\n" + "\n".join(hits)
