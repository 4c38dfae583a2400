"""Revision-path grammar and the concept-id rules writers enforce.

The read side owns how a bundle is *read*; these are the rules a writer needs before it may
create or name a file: canonical revision paths (spec/okf/contract/write.md §2.1) and canonical
concept ids (spec/okf/contract/write.md §3.1).
"""

from __future__ import annotations

import re

RESERVED_TXN_PREFIXES = (".okf-index-txn-", ".okf-document-txn-", ".okf-publication-private-v2-")
MAX_PATH_BYTES = 4096
# A file or directory name (one path segment) of the common Linux file systems, in bytes: a longer
# concept id could be planned and journaled but never published, leaving the bundle locked.
MAX_NAME_BYTES = 255
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def is_reserved_component(name: str) -> bool:
    low = name.lower()
    return any(low.startswith(p) for p in RESERVED_TXN_PREFIXES)


def is_revision_path(path: str) -> bool:
    """Canonical bundle-relative slash path that may appear in a revision."""
    if not path or len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        return False
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    if "\\" in path or _CONTROL.search(path) or path.startswith("/"):
        return False
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return False
    if parts[0] == ".okf":
        return False
    return not any(is_reserved_component(p) for p in parts)


def names_a_store(path: str) -> bool:
    """Whether a component of ``path`` is ``.okf`` (any case): a writer's store lives in such a
    folder, so no write may create one, at the root or below (a nested bundle's store included)."""
    return any(part.lower() == ".okf" for part in path.split("/"))


def is_writable_path(path: str) -> bool:
    """A revision path a writer may create, replace or delete (no store folder anywhere in it)."""
    return is_revision_path(path) and not names_a_store(path)


def concept_id_problem(concept_id: str) -> str | None:
    """Why ``concept_id`` is not a canonical writable concept id, or None when it is."""
    if not concept_id:
        return "concept_id must not be empty"
    if concept_id != concept_id.strip():
        return "concept_id must not have surrounding whitespace"
    if _CONTROL.search(concept_id) or "\\" in concept_id:
        return "concept_id must not contain control characters or backslashes"
    if concept_id.startswith("/") or concept_id.endswith("/") or "//" in concept_id:
        return "concept_id must be a relative slash path without empty segments"
    if ":" in concept_id or concept_id.startswith("file:"):
        return "concept_id must not contain ':'"
    if concept_id.endswith(".md"):
        return "concept_id must not end in .md"
    for seg in concept_id.split("/"):
        if seg in (".", "..", "index", "log") or seg.startswith("."):
            return f"concept_id segment {seg!r} is reserved"
    if len(concept_id.encode("utf-8")) > MAX_PATH_BYTES - 3:
        return "concept_id is too long"
    if any(len(seg.encode("utf-8")) > MAX_NAME_BYTES for seg in concept_path(concept_id).split("/")):
        return f"concept_id segment is too long for a file name (at most {MAX_NAME_BYTES} bytes, with .md)"
    return None


def concept_path(concept_id: str) -> str:
    return concept_id + ".md"
