"""OKF version declaration (root ``index.md`` ``okf_version``) and resolution.

spec/okf/contract/read.md §1.5, gaps.md §3.1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from knowspec.impl.okf.parsing.typed import is_duplicated

_CANONICAL = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$")
SUPPORTED = {"0.1": "legacy", "0.2": "native"}

MSG_NOT_STRING = "root index.md okf_version should be a non-empty string"
MSG_NOT_CANONICAL = "root index.md okf_version should use canonical <major>.<minor> syntax"
MSG_DUPLICATED = "root index.md okf_version should be declared exactly once"


def canonical_version(value: str) -> bool:
    return bool(_CANONICAL.match(value))


@dataclass
class VersionResolution:
    """Declaration state and the resolved version of one snapshot.

    ``declaration``: ``{present, valid, raw, value}``; ``version``: ``{declared, effective,
    resolution, compatibility}`` (all ``None`` when the declaration is malformed);
    ``error``: the Go-style error text when resolution failed (``invalid OKF version
    declaration: "0.2"`` or ``parse root index document: …``); ``root_parse_error``: the
    root index ParseError, if any; ``index_problems``: (field, message) validator findings for the
    root index declaration; ``assertion``: selector-conflict message or ``None``.
    """

    declaration: dict[str, Any]
    version: dict[str, Any]
    error: str | None = None
    root_parse_error: Any = None
    index_problems: list[tuple[str, str]] = field(default_factory=list)
    assertion: str | None = None

    @property
    def compatibility(self) -> str | None:
        return self.version["compatibility"]

    @property
    def effective(self) -> str | None:
        return self.version["effective"]


def _null_version() -> dict[str, Any]:
    return {"declared": None, "effective": None, "resolution": None, "compatibility": None}


def _resolved(declared: str | None, selector: str | None) -> tuple[dict[str, Any], str | None]:
    if declared is None:
        if selector is not None:
            return {"declared": None, "effective": selector, "resolution": "explicit",
                    "compatibility": SUPPORTED[selector]}, None
        return {"declared": None, "effective": "0.2", "resolution": "default", "compatibility": "native"}, None
    assertion = None
    if selector is not None:
        if selector == declared:
            return {"declared": declared, "effective": selector, "resolution": "explicit",
                    "compatibility": SUPPORTED[selector]}, None
        assertion = (
            f'OKF version selector conflicts with declaration: declared "{declared}", selected "{selector}"'
        )
    if declared in SUPPORTED:
        return {"declared": declared, "effective": declared, "resolution": "declared",
                "compatibility": SUPPORTED[declared]}, assertion
    return {"declared": declared, "effective": "0.2", "resolution": "future-best-effort",
            "compatibility": "best-effort"}, assertion


def resolve_version(root_index, selector: str | None = None) -> VersionResolution:
    """Resolve from the root index Document (or None); ``selector`` is ``0.1``/``0.2``/None."""
    absent = {"present": False, "valid": True, "raw": None, "value": None}
    if root_index is None:
        version, assertion = _resolved(None, selector)
        return VersionResolution(absent, version, assertion=assertion)
    if root_index.parse_error is not None:
        err = root_index.parse_error
        return VersionResolution(
            {"present": True, "valid": False, "raw": None, "value": None},
            _null_version(),
            error=f"parse root index document: {err.message}",
            root_parse_error=err,
        )
    fm = root_index.frontmatter
    problems: list[tuple[str, str]] = []
    if not root_index.has_frontmatter or "okf_version" not in fm:
        if root_index.has_frontmatter:
            problems.append(("okf_version", MSG_NOT_STRING))
        version, assertion = _resolved(None, selector)
        return VersionResolution(absent, version, index_problems=problems, assertion=assertion)
    if is_duplicated(fm, "okf_version"):
        return VersionResolution(
            {"present": True, "valid": False, "raw": None, "value": None},
            _null_version(),
            error='invalid OKF version declaration: ""',
            index_problems=[("okf_version", MSG_DUPLICATED)],
        )
    value = fm["okf_version"]
    raw = str(value) if isinstance(value, str) else None
    if type(value) is not str or value.strip() == "":
        problems.append(("okf_version", MSG_NOT_STRING))
    elif not canonical_version(value):
        problems.append(("okf_version", MSG_NOT_CANONICAL))
    if problems:
        return VersionResolution(
            {"present": True, "valid": False, "raw": raw, "value": None},
            _null_version(),
            error=f"invalid OKF version declaration: {go_quote(raw or '')}",
            index_problems=problems,
        )
    version, assertion = _resolved(value, selector)
    return VersionResolution(
        {"present": True, "valid": True, "raw": value, "value": value}, version, assertion=assertion
    )


def go_quote(text: str) -> str:
    """Go ``%q`` for printable text: double quotes, ``\\`` and ``"`` escaped, controls escaped."""
    out = ['"']
    for ch in text:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)
