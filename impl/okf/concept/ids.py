"""Concept IDs: derivation from paths, segment rules, the MCP canonical check, relation refs.

Pure string rules (spec/okf/contract/read.md §1.2). Byte-wise ordering of IDs equals Python's code-point ordering for
valid UTF-8, so ``sorted()`` on IDs is the contract order.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def valid_segment(segment: str) -> bool:
    """Non-empty, not ``.``/``..``, no ``/``, ``\\`` or control character."""
    if segment in ("", ".", ".."):
        return False
    if "/" in segment or "\\" in segment:
        return False
    return _CONTROL.search(segment) is None


def valid_concept_id(concept_id: str) -> bool:
    return concept_id != "" and all(valid_segment(s) for s in concept_id.split("/"))


def concept_id_from_path(path: str) -> str:
    """``tables/orders.md`` → ``tables/orders``."""
    return path[:-3] if path.endswith(".md") else path


def canonical_id_error(concept_id: str) -> str | None:
    """The MCP handler check (read_concept, get_neighbors); the ``invalid_request`` message or None."""
    if concept_id == "":
        return "concept_id is required"
    if concept_id != concept_id.strip():
        return "concept_id must not contain surrounding whitespace"
    if concept_id.startswith("/") or concept_id.lower().startswith("file:"):
        return "concept_id must be bundle-relative"
    if (
        "\\" in concept_id
        or "//" in concept_id
        or ":" in concept_id
        or concept_id.endswith("/")
        or concept_id.endswith(".md")
    ):
        return "concept_id is not canonical"
    if not valid_concept_id(concept_id):
        return "concept_id is invalid"
    for segment in concept_id.split("/"):
        if segment in ("index", "log", ".", "..") or segment.startswith("."):
            return "concept_id contains a reserved segment"
    return None


# --- relation refs: `<escaped-id>[#<fragment>]`, `\#` escapes a `#` of the ID ----------------

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")


def escape_ref_id(concept_id: str) -> str:
    """The concept part of a relation ref: every ``#`` of the ID becomes ``\\#``."""
    return concept_id.replace("#", "\\#")


def format_ref(concept_id: str, fragment: str | None) -> str:
    ref = escape_ref_id(concept_id)
    return ref if fragment is None else f"{ref}#{fragment}"


def parse_ref(ref: str) -> tuple[str, str | None] | None:
    """Parse a relation ref into (concept id, fragment or None); None when invalid."""
    if ref == "" or ref != ref.strip():
        return None
    chars: list[str] = []
    fragment: str | None = None
    i = 0
    while i < len(ref):
        ch = ref[i]
        if ch == "\\":
            if i + 1 < len(ref) and ref[i + 1] == "#":
                chars.append("#")
                i += 2
                continue
            return None  # `source\part`, `source\`, `source\\#part`
        if ch == "#":
            fragment = ref[i + 1 :]
            break
        chars.append(ch)
        i += 1
    concept_id = "".join(chars)
    if fragment is not None:
        if fragment == "" or fragment != fragment.strip() or "#" in fragment or _CONTROL.search(fragment):
            return None
    if concept_id == "" or concept_id != concept_id.strip():
        return None
    if concept_id.startswith(("/", "./", "../", "//")) or concept_id.endswith(".md"):
        return None
    if _SCHEME.match(concept_id):
        return None
    if not valid_concept_id(concept_id):
        return None
    if format_ref(concept_id, fragment) != ref:
        return None
    return concept_id, fragment
