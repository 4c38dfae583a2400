"""The OKF write contracts restated: what a preview's diff says the files become, and file snapshots.

spec/okf/contract/write.md: a preview writes nothing; an apply re-plans against the live bundle and
publishes exactly the previewed plan (the written bytes are the diff's new side) or, on a stale
revision or a different plan, refuses and writes nothing; an identical apply repeats its result.
"""

from __future__ import annotations

from pathlib import Path


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file of a bundle by relative slash path (hidden journal/receipt dirs left out)."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)}


def diff_sides(diff: str) -> dict[str, tuple[str, str]]:
    """A whole-file unified diff per path: {path: (old text, new text)}.

    Header lines ``--- a/<path>`` / ``+++ b/<path>`` open a file; ``-``, ``+`` and `` `` lines
    carry old, new and shared lines; ``@@`` hunk headers are ignored.
    """
    files: dict[str, tuple[list[str], list[str]]] = {}
    current: tuple[list[str], list[str]] | None = None
    lines = diff.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- a/") and i + 1 < len(lines) and lines[i + 1].startswith("+++ b/"):
            current = files.setdefault(lines[i + 1][len("+++ b/"):], ([], []))
            i += 2
            continue
        if line.startswith("--- /dev/null") and i + 1 < len(lines) and lines[i + 1].startswith("+++ b/"):
            current = files.setdefault(lines[i + 1][len("+++ b/"):], ([], []))
            i += 2
            continue
        if current is not None and not line.startswith("@@"):
            if line.startswith("-"):
                current[0].append(line[1:])
            elif line.startswith("+"):
                current[1].append(line[1:])
            elif line.startswith(" "):
                current[0].append(line[1:])
                current[1].append(line[1:])
        i += 1
    return {path: ("".join(x + "\n" for x in old), "".join(x + "\n" for x in new))
            for path, (old, new) in files.items()}


def written_body(body: str) -> str:
    """What follows the closing fence of a concept write_concept wrote: one blank line, then the
    body ending in a newline (okf-mcp's layout, spec/okf/NOTES.md#written-layout)."""
    return "\n" + body + ("" if body.endswith("\n") else "\n")


def body_of(document: str) -> str:
    """The Markdown after the closing frontmatter fence (the whole text when there is none)."""
    if not document.startswith("---\n"):
        return document
    end = document.find("\n---\n", 3)
    return document[end + len("\n---\n"):] if end >= 0 else document
