"""Which version a migration starts from (spec/okf/contract/write.md §5.2, §2.6): the source tuple.

The tuple records the caller's selector, the root index declaration and how the source was
resolved (explicit selector, declaration, legacy probe, default, or a future declaration that
blocks). The apply sends it back frozen; its digest is part of the migration proof.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Mapping

from knowspec.impl.errors import ToolError
from knowspec.impl.okf.write.document import DocumentError, split_document
from knowspec.impl.okf.write.encoding import enc_str, u64
from knowspec.impl.okf.write.yaml_text import YamlRejected, compose, lookup

_CITATIONS_HEADING = re.compile(r"^# Citations[ \t]*\r?$", re.MULTILINE)
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _unsupported(message: str) -> ToolError:
    return ToolError("unsupported_migration_source", message, diagnostics=[{
        "code": "recovery_step", "severity": "INFO", "file": "", "field": "source",
        "message": "Choose a from selector that matches the bundle's okf_version declaration.",
        "spec_ref": "", "policy_failure": False}])


def declaration(files: Mapping[str, bytes]) -> dict[str, Any]:
    from knowspec.impl.okf.model import document_for
    from knowspec.impl.okf.bundle.version import resolve_version

    raw = files.get("index.md")
    return resolve_version(document_for("index.md", raw) if raw is not None else None).declaration


def citations_heading_spans(body_offset: int, body: str) -> list[tuple[int, int]]:
    """Byte spans of ``# Citations`` headings outside fenced code."""
    spans, fence, pos = [], None, 0
    for line in body.splitlines(keepends=True):
        m = _FENCE.match(line)
        if m:
            fence = None if fence and m.group(1)[0] == fence else (fence or m.group(1)[0])
        elif fence is None and _CITATIONS_HEADING.match(line.rstrip("\n")):
            start = body_offset + len(body[:pos].encode("utf-8"))
            spans.append((start, start + len(line.rstrip("\r\n").encode("utf-8"))))
        pos += len(line)
    return spans


def probe_candidates(files: Mapping[str, bytes]) -> list[dict]:
    """Legacy evidence: concept ``timestamp`` keys and ``# Citations`` sections."""
    out = []
    for path in sorted(files, key=lambda p: p.encode("utf-8")):
        if not path.endswith(".md"):
            continue
        try:
            doc = split_document(files[path])
            root = compose(doc.frontmatter) if doc.has_frontmatter else None
        except (DocumentError, YamlRejected):
            continue
        head = len((doc.open_line + doc.frontmatter + doc.close_line).encode("utf-8"))
        found = lookup(root, "timestamp") if root is not None and path.rsplit("/", 1)[-1] not in ("index.md", "log.md") else None
        if found is not None:
            key, value = found
            start = len((doc.open_line + doc.frontmatter[:key.start_mark.index]).encode("utf-8"))
            end = len((doc.open_line + doc.frontmatter[:value.end_mark.index]).encode("utf-8"))
            out.append({"kind": "timestamp", "path": path, "location": {"start": start, "end": end}})
        for start, end in citations_heading_spans(head, doc.body):
            out.append({"kind": "citations", "path": path, "location": {"start": start, "end": end}})
    return out


def resolve_source(files: Mapping[str, bytes], selector: str) -> dict[str, Any]:
    decl = declaration(files)
    present, valid = bool(decl["present"]), bool(decl["valid"])
    raw = decl["raw"] if isinstance(decl.get("raw"), str) else ""
    value = decl.get("value")
    if present and not valid:
        raise _unsupported("the root okf_version declaration is malformed")

    def tup(resolved: str, how: str, frm: str, to: str, transition: str, candidates=(), blockers=()):
        return {"requested_selector": selector, "declaration_present": present, "declaration_valid": valid,
                "declaration_raw": raw if present else "", "declared_version": value if present else None,
                "resolved_source": resolved, "resolution_source": how, "from_version": frm, "to_version": to,
                "transition": transition, "candidates": list(candidates), "blockers": list(blockers)}

    if selector in ("0.1", "0.2"):
        if present and value != selector:
            raise _unsupported(f"from {selector} conflicts with the declared okf_version")
        if selector == "0.1":
            return tup("0.1", "explicit", "0.1", "0.2", "v0.1-to-v0.2")
        return tup("0.2", "explicit", "0.2", "0.2", "target-noop")
    if present:
        if value == "0.1":
            return tup("0.1", "declared", "0.1", "0.2", "v0.1-to-v0.2")
        if value == "0.2":
            return tup("0.2", "declared", "0.2", "0.2", "target-noop")
        blocker = {"code": "unsupported_migration_source", "path": "index.md", "location": {"start": 0, "end": 0},
                   "message": f"future declaration {value} cannot be rewritten as v0.2"}
        return tup(str(value), "future", str(value), "", "blocked", blockers=[blocker])
    candidates = probe_candidates(files)
    if candidates:
        return tup("0.1", "legacy-probe", "0.1", "0.2", "v0.1-to-v0.2", candidates)
    return tup("0.2", "default", "0.2", "0.2", "target-noop")


def resolution_digest(res: dict[str, Any]) -> str:
    h = hashlib.sha256()
    for part in ("okf:migration-source-resolution:v1", res["requested_selector"],
                 "present" if res["declaration_present"] else "absent",
                 "valid" if res["declaration_valid"] else "invalid", res["declaration_raw"],
                 res["declared_version"] or "", res["resolved_source"], res["resolution_source"],
                 res["from_version"], res["to_version"], res["transition"]):
        h.update(enc_str(part))
    h.update(enc_str("ordered_candidates") + u64(len(res["candidates"])))
    for c in res["candidates"]:
        h.update(enc_str(c["kind"]) + enc_str(c["path"]) + u64(c["location"]["start"]) + u64(c["location"]["end"]))
    h.update(enc_str("ordered_blockers") + u64(len(res["blockers"])))
    for b in res["blockers"]:
        h.update(enc_str(b["code"]) + enc_str(b["path"]) + u64(b["location"]["start"])
                 + u64(b["location"]["end"]) + enc_str(b["message"]))
    return "sha256:" + h.hexdigest()
