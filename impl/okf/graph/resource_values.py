"""What a path-valued frontmatter field names, for the v0.2 graph's ``resourceKind`` and assets.

The fields are a concept's ``resource``, each source's ``resource`` (legacy ``# Citations``
targets too), an attested computation's ``computation`` file and its executor's and attester's
``resource``. spec/okf/contract/read.md ("Resource values") gives the rules in order; the first
that applies decides. A file the bundle captured wins over URL syntax, so a bundle may hold a
file whose name looks like a scheme; only a source's resource may be a scope descriptor (prose
such as "all queries in project X"), and only a source's resource needs ``://`` (or one of four
URI schemes) to count as a URL, so ``project:dataset`` stays ambiguous there. Pure: strings and
the set of captured paths in, a classification out.
"""

from __future__ import annotations

import re
from collections.abc import Container
from dataclasses import dataclass

URL, BUNDLE_RELATIVE, RELATIVE, SCOPE, AMBIGUOUS = "url", "bundle-relative", "relative", "scope", "ambiguous"
LOCAL_KINDS = (BUNDLE_RELATIVE, RELATIVE)

# Unicode White_Space, as Go's strings.TrimSpace trims it (str.strip would also trim \x1c-\x1f)
WHITE_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
              "\u2028\u2029\u202f\u205f\u3000"
SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
SOURCE_URL_PREFIXES = ("mailto:", "tel:", "data:", "urn:")   # a source's URL without "://"
_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SCOPE_BREAKERS = re.compile(r"[/.]")
_SCOPE_SPACE = re.compile(r"[ \t\r\n]")


@dataclass(frozen=True)
class ResolvedResource:
    raw: str                 # the value as written
    kind: str                # url | bundle-relative | relative | scope | ambiguous
    path: str | None = None  # the bundle path a local value names; None when it leaves the root
    exists: bool = False     # the bundle captured a file at ``path``

    @property
    def local(self) -> bool:
        """A local value becomes a ReferencedAsset node (with or without a path)."""
        return self.kind in LOCAL_KINDS


def resolve_resource(raw: str, document_path: str, captured: Container[str], *,
                     source: bool) -> ResolvedResource | None:
    """The classification of ``raw``, written in the concept at ``document_path`` (a bundle
    path); ``source``: the field is a source's resource. None for a blank value (no kind)."""
    value = raw.strip(WHITE_SPACE)
    if not value:
        return None
    path_part = re.split(r"[?#]", value, maxsplit=1)[0]
    if not path_part:
        return ResolvedResource(raw, AMBIGUOUS)
    local = _local(raw, path_part, document_path, captured)
    if local.exists:
        return local
    if _windows_path(path_part):
        return ResolvedResource(raw, AMBIGUOUS)
    url_like = _url_like(path_part)
    if url_like and _ESCAPE.search(value):
        return ResolvedResource(raw, AMBIGUOUS)
    if _CONTROL.search(value):
        return ResolvedResource(raw, AMBIGUOUS) if url_like else _uncaptured(raw, path_part, local, source)
    if _explicit_url(value, source):
        return ResolvedResource(raw, URL)
    return _uncaptured(raw, path_part, local, source)


def _local(raw: str, path_part: str, document_path: str, captured: Container[str]) -> ResolvedResource:
    """The value read as a bundle path: from the root after leading slashes, else from the
    concept file's folder; a path that climbs out of the root names nothing."""
    if path_part.startswith("/"):
        kind, path = BUNDLE_RELATIVE, clean_path(path_part.lstrip("/"))
    else:
        folder = clean_path(document_path).rpartition("/")[0]
        kind, path = RELATIVE, clean_path(f"{folder}/{path_part}" if folder else path_part)
    if path in (".", "..") or path.startswith(("../", "/")):
        return ResolvedResource(raw, kind)
    return ResolvedResource(raw, kind, path, path in captured)


def clean_path(path: str) -> str:
    """A slash path with empty and ``.`` segments dropped and each ``..`` taking back the
    segment before it (kept when there is none, in a relative path); ``.`` for nothing."""
    absolute = path.startswith("/")
    segments: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if segments and segments[-1] != "..":
                segments.pop()
            elif not absolute:
                segments.append(segment)
            continue
        segments.append(segment)
    joined = ("/" if absolute else "") + "/".join(segments)
    return joined or "."


def _windows_path(value: str) -> bool:
    """A backslash anywhere, or a drive letter (``C:``, ``C:/…``, ``C:\\…``)."""
    return "\\" in value or (len(value) >= 2 and value[0].isascii() and value[0].isalpha() and value[1] == ":"
                             and (len(value) == 2 or value[2] in "/\\"))


def _url_like(value: str) -> bool:
    """A network-path reference (``//host``) or a scheme before the first colon."""
    return value.startswith("//") or SCHEME.match(value) is not None  # the class stops at the first colon


def _explicit_url(value: str, source: bool) -> bool:
    if not _url_like(value):
        return False
    if not source:
        return True
    return value.startswith("//") or "://" in value or any(
        value[:len(p)].isascii() and value[:len(p)].lower() == p for p in SOURCE_URL_PREFIXES)  # ASCII case only


def _uncaptured(raw: str, path_part: str, local: ResolvedResource, source: bool) -> ResolvedResource:
    """A value that names no captured file: a path for every field but a source's resource,
    which is a path only when it says so (``/``, ``./``, ``../``), else a scope descriptor or
    ambiguous."""
    if not source or path_part.startswith(("/", "./", "../")):
        return local
    if _SCOPE_SPACE.search(path_part) and not _SCOPE_BREAKERS.search(path_part):
        return ResolvedResource(raw, SCOPE)
    return ResolvedResource(raw, AMBIGUOUS)
