"""``validate_bundle`` diagnostics over one snapshot (spec/okf/contract/read.md §3.3): base, links, orphans, strict.

Base conformance (concept parse/frontmatter/type, reserved files, root declaration) is always
run; link, orphan and strict checks on request. Diagnostics come out in the contract order.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

from knowspec.generated.constants import TEMPORAL_PROFILE_DATE
from knowspec.impl.errors import diagnostic
from knowspec.impl.okf.parsing.links import classify_link
from knowspec.impl.okf.model import Concept, Document, Snapshot
from knowspec.impl.okf.parsing.typed import is_duplicated, read_str
from knowspec.impl.okf.validation.reserved_files import index_findings, log_findings
from knowspec.impl.okf.bundle.version import go_quote
from knowspec.impl.rules.redaction import redact_message, safe_file

_SEVERITY_RANK = {"ERROR": 0, "WARN": 1, "INFO": 2}


@dataclass
class Report:
    version: dict[str, Any]
    declaration: dict[str, Any]
    diagnostics: list[dict[str, Any]]

    def _count(self, severity: str) -> int:
        return sum(1 for d in self.diagnostics if d["severity"] == severity)

    @property
    def errors(self) -> int:
        return self._count("ERROR")

    @property
    def warnings(self) -> int:
        return self._count("WARN")

    @property
    def info(self) -> int:
        return self._count("INFO")


def diagnostic_key(d: dict[str, Any]) -> tuple:
    b = lambda s: s.encode("utf-8")  # noqa: E731 - byte-wise comparison
    return (_SEVERITY_RANK[d["severity"]], b(d["file"]), b(d["code"]), b(d["spec_ref"]), b(d["field"]),
            d["policy_failure"], b(d["message"]))


class Collector:
    """Accumulates diagnostics with redaction applied to ``message`` and ``file``."""

    def __init__(self, effective: str | None) -> None:
        self.items: list[dict[str, Any]] = []
        self.okf = f"okf-v{effective or '0.2'}"

    def add(self, code, severity, file, field, message, spec_ref, policy_failure=False) -> None:
        self.items.append(
            diagnostic(code, redact_message(message), severity=severity, file=safe_file(file), field=field,
                       spec_ref=spec_ref, policy_failure=policy_failure)
        )


def validate_snapshot(snapshot: Snapshot, ctx, *, strict=False, check_links=False, check_orphans=False,
                      selector=None, profile=TEMPORAL_PROFILE_DATE, as_of=None) -> Report:
    resolution = snapshot.version(selector)
    out = Collector(resolution.effective)
    for i, concept in enumerate(snapshot.concepts.values()):
        if i % 256 == 0:
            ctx.check_cancelled("validate bundle")
        base_concept(concept, out)
    _reserved(snapshot, resolution, out, check_orphans)
    if resolution.assertion is not None:
        out.add("version_assertion_failed", "WARN", "index.md", "okf_version", resolution.assertion,
                "toolkit#version-selector-assertion", True)
    if check_links:
        _links(snapshot, out, ctx)
    if check_orphans:
        _orphans(snapshot, out)
    if strict and resolution.compatibility in ("legacy", "native"):
        from knowspec.impl.okf.validation.strict import strict_legacy, strict_v02

        check = strict_legacy if resolution.compatibility == "legacy" else strict_v02
        for i, concept in enumerate(snapshot.concepts.values()):
            if i % 256 == 0:
                ctx.check_cancelled("validate bundle")
            if concept.parse_error is None and concept.has_frontmatter:
                check(concept, out, profile=profile, as_of=as_of, snapshot=snapshot)
        if resolution.compatibility == "legacy":
            from knowspec.impl.okf.validation.strict import index_descriptions

            index_descriptions(snapshot, out)
    out.items.sort(key=diagnostic_key)
    return Report(resolution.version, resolution.declaration, out.items)


def base_concept(concept: Concept, out: Collector) -> None:
    spec = out.okf
    if concept.parse_error is not None:
        out.add("concept_unparseable", "ERROR", concept.path, "frontmatter",
                f"unparseable concept document: {concept.parse_error.message}", f"{spec}#11.1")
        return
    if not concept.has_frontmatter:
        out.add("concept_frontmatter_missing", "ERROR", concept.path, "frontmatter",
                "missing YAML frontmatter block", f"{spec}#11.1")
        return
    fm = concept.frontmatter
    if is_duplicated(fm, "type"):
        out.add("concept_type_invalid", "ERROR", concept.path, "type",
                "'type' field should be declared exactly once", f"{spec}#11.2")
    elif read_str(fm, "type") is None:
        out.add("concept_type_invalid", "ERROR", concept.path, "type", "missing or empty 'type' field", f"{spec}#11.2")


def _reserved(snapshot: Snapshot, resolution, out: Collector, check_orphans: bool) -> None:
    for path, doc in snapshot.indexes.items():
        reserved_index(path, doc, resolution, out, check_orphans)
    for path, doc in snapshot.logs.items():
        reserved_log(path, doc, out)


def reserved_index(path: str, doc: Document, resolution, out: Collector, check_orphans: bool) -> None:
    """The structure rules of one ``index.md`` (the root one also carries the declaration's problems)."""
    spec = f"{out.okf}#11.3"
    root = path == "index.md"
    if doc.parse_error is not None:
        out.add("index_structure_invalid", "ERROR", path, "frontmatter", doc.parse_error.message, spec)
        return
    if root:
        for field_name, message in resolution.index_problems:
            out.add("index_structure_invalid", "ERROR", path, field_name, message, "okf-v0.2#12")
    elif doc.has_frontmatter:
        out.add("index_structure_invalid", "ERROR", path, "frontmatter", "index.md should not contain frontmatter", spec)
    for field_name, message in index_findings(doc.body, nested_empty_skipped=check_orphans and not root):
        out.add("index_structure_invalid", "ERROR", path, field_name, message, spec)


def reserved_log(path: str, doc: Document, out: Collector) -> None:
    """The structure rules of one ``log.md``."""
    spec = f"{out.okf}#11.3"
    if doc.parse_error is not None:
        out.add("log_structure_invalid", "ERROR", path, "frontmatter", doc.parse_error.message, spec)
        return
    if doc.has_frontmatter:
        out.add("log_structure_invalid", "ERROR", path, "frontmatter", "log.md should not contain frontmatter", spec)
        return
    for field_name, message in log_findings(doc.body):
        out.add("log_structure_invalid", "ERROR", path, field_name, message, spec)


# --- links ------------------------------------------------------------------------------------

def resolve_bundle_path(file: str, target_path: str) -> str | None:
    """Resolve a link path against the file's directory (or the root for ``/…``); None if it
    leaves the root. A trailing ``/`` is kept as a directory marker."""
    base = "" if target_path.startswith("/") else posixpath.dirname(file)
    parts: list[str] = base.split("/") if base else []
    for seg in target_path.split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            if not parts:
                return None
            parts.pop()
            continue
        parts.append(seg)
    resolved = "/".join(parts)
    if target_path.endswith("/") and resolved:
        resolved += "/"
    return resolved


def _directories(snapshot: Snapshot) -> set[str]:
    dirs = set()
    for path in snapshot.files:
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            dirs.add("/".join(parts[:i]))
    return dirs


def _target_document(snapshot: Snapshot, resolved: str, dirs: set[str]) -> tuple[bool, Document | None]:
    """(exists, Markdown document whose headings answer a fragment)."""
    if resolved in ("", "/"):
        doc = snapshot.documents.get("index.md")
        return doc is not None, doc
    if resolved.endswith("/"):
        d = resolved[:-1]
        doc = snapshot.documents.get(f"{d}/index.md")
        return doc is not None, doc
    if resolved in snapshot.files:
        return True, snapshot.documents.get(resolved)
    if resolved in dirs and f"{resolved}/index.md" in snapshot.files:
        return True, None
    return False, None


LINKS_PER_CHECK = 1024  # one concept may hold tens of thousands of links (a 5 MB body: ~1 s)


def _links(snapshot: Snapshot, out: Collector, ctx) -> None:
    dirs = _directories(snapshot)
    for n, (path, doc) in enumerate(snapshot.documents.items()):
        if n % 128 == 0:
            ctx.check_cancelled("validate bundle")
        if doc.parse_error is not None:
            continue
        for i, link in enumerate(doc.markdown.links):
            if i % LINKS_PER_CHECK == LINKS_PER_CHECK - 1:
                ctx.check_cancelled("validate bundle")
            target = link.target.strip()
            kind = classify_link(target)
            if kind in ("external", "other"):
                continue
            hash_pos = target.find("#")
            link_path, fragment = (target, None) if hash_pos < 0 else (target[:hash_pos], target[hash_pos + 1:])
            field_name = f"body.links[{i}].target"
            tdoc: Document | None
            if link_path == "":
                exists, tdoc = True, doc
            else:
                resolved = resolve_bundle_path(path, link_path)
                exists, tdoc = (False, None) if resolved is None else _target_document(snapshot, resolved, dirs)
            if not exists:
                out.add("link_target_missing", "INFO", path, field_name,
                        f"broken link to {go_quote(link.target)} (target not found)", "toolkit#link-resolution")
                continue
            if not fragment:
                continue
            if link_path and not (link_path.endswith(".md") or link_path.endswith("/")):
                if tdoc is None:
                    out.add("link_anchor_missing", "WARN", path, field_name,
                            f"anchor not found in target file: {link.target}", "toolkit#anchor-resolution")
                continue
            frag = fragment[1:] if fragment.startswith("#") else fragment
            anchors = set() if tdoc is None or tdoc.parse_error is not None else tdoc.markdown.anchors
            if frag not in anchors:
                out.add("link_anchor_missing", "WARN", path, field_name,
                        f"anchor not found in target file: {link.target}", "toolkit#anchor-resolution")


# --- orphans ----------------------------------------------------------------------------------

def _orphans(snapshot: Snapshot, out: Collector) -> None:
    by_dir: dict[str, list[Concept]] = {}
    for concept in snapshot.concepts.values():
        by_dir.setdefault(posixpath.dirname(concept.path), []).append(concept)
    for directory in sorted(by_dir):
        index_path = f"{directory}/index.md" if directory else "index.md"
        index = snapshot.documents.get(index_path)
        if index is None:
            out.add("orphan_index_missing", "INFO", directory or ".", "index.md",
                    "missing index.md, skipping orphan check for this directory", "toolkit#orphan-missing-index")
            continue
        linked: set[str] = set()
        for link in index.markdown.links:
            target = link.target.strip()
            if classify_link(target) not in ("absolute", "relative"):
                continue
            link_path = target.split("#", 1)[0]
            resolved = resolve_bundle_path(index_path, link_path) if link_path else None
            if resolved:
                linked.add(resolved)
        for concept in by_dir[directory]:
            if concept.path not in linked:
                out.add("orphan_unlisted", "WARN", concept.path, "index.md.body",
                        f"orphan file (not linked in {index_path})", "toolkit#orphan-coverage")
