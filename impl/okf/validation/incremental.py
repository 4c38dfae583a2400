"""Validation kept per document, so a bundle that differs in a few documents is re-checked in
those documents only (a one-concept write costs the change, not the bundle).

Without link and orphan checks, ``validate_snapshot`` is the sorted union of per-document
findings (a concept's base and strict checks, a reserved file's structure rules, all under the
bundle's version resolution) and a few bundle-level ones: the version assertion and, for a
legacy bundle, the index descriptions, which read the indexed concepts. ``DocumentFindings``
keeps that union by document; ``replaced`` swaps some concepts and re-checks only them (and the
index descriptions when a swapped concept's description changed). A change it cannot re-check
locally (a reserved file, which decides the version resolution and the index rules, or a
document that is new) gives None, and the caller validates in full.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from typing import Any, Iterable, Mapping

from knowspec.generated.constants import TEMPORAL_PROFILE_DATE
from knowspec.impl.okf.layered_map import LayeredMap
from knowspec.impl.okf.model import Concept, Document, Snapshot
from knowspec.impl.okf.validation.diagnostics import Collector, base_concept, diagnostic_key, reserved_index, \
    reserved_log
from knowspec.impl.okf.validation.strict import index_descriptions, strict_legacy, strict_v02

Diagnostic = dict[str, Any]


@dataclass(frozen=True)
class Options:
    """The ``validate_snapshot`` options this mode supports (links and orphans are always off)."""

    strict: bool = False
    selector: str | None = None
    profile: str = TEMPORAL_PROFILE_DATE
    as_of: Any = None


@dataclass(frozen=True)
class _IndexView:
    """What the legacy index-description rule reads of a snapshot."""

    indexes: Mapping[str, Document]
    documents: Mapping[str, Document]


class DocumentFindings:
    """The diagnostics of one bundle, grouped by the document that produced them."""

    def __init__(self, resolution, options: Options, documents: Mapping[str, Document],
                 indexes: dict[str, Document], by_document: Mapping[str, tuple[Diagnostic, ...]],
                 errors_by_document: dict[str, tuple[Diagnostic, ...]], bundle: tuple[Diagnostic, ...]) -> None:
        self.resolution = resolution
        self.options = options
        self.documents = documents
        self.indexes = indexes
        self.by_document = by_document
        self.bundle = bundle
        self.errors_by_document = errors_by_document  # only the documents that have an ERROR

    @classmethod
    def of(cls, snapshot: Snapshot, ctx, options: Options) -> "DocumentFindings":
        resolution = snapshot.version(options.selector)
        by_document = {}
        for i, (path, doc) in enumerate(snapshot.documents.items()):
            if i % 256 == 0:
                ctx.check_cancelled("validate bundle")
            by_document[path] = _document_findings(path, doc, resolution, options)
        documents, indexes = snapshot.documents, dict(snapshot.indexes)  # a snapshot's documents never change
        errors = {p: e for p, ds in by_document.items() if (e := _errors(ds))}
        return cls(resolution, options, documents, indexes, by_document, errors,
                   _bundle_findings(resolution, options, _IndexView(indexes, documents)))

    def replaced(self, documents: Mapping[str, Document]) -> "DocumentFindings | None":
        """These findings with ``documents`` (path -> new parse) swapped in; None when a swapped
        document is not an existing concept replaced by a concept."""
        for path, doc in documents.items():
            if not (isinstance(doc, Concept) and isinstance(self.documents.get(path), Concept)):
                return None
        rechecked = {path: _document_findings(path, doc, self.resolution, self.options)
                     for path, doc in documents.items()}
        errors = dict(self.errors_by_document)  # only the documents that have an ERROR
        for path, findings in rechecked.items():
            errors.pop(path, None)
            if own := _errors(findings):
                errors[path] = own
        by_document = LayeredMap(self.by_document, rechecked)
        merged = LayeredMap(self.documents, documents)
        bundle = self.bundle
        if _legacy_strict(self.resolution, self.options) and any(
                _description(self.documents[p]) != _description(d) for p, d in documents.items()):
            bundle = _bundle_findings(self.resolution, self.options, _IndexView(self.indexes, merged))
        return DocumentFindings(self.resolution, self.options, merged, self.indexes, by_document, errors, bundle)

    def diagnostics(self) -> list[Diagnostic]:
        """Every diagnostic, in ``validate_snapshot``'s order."""
        return sorted(chain(chain.from_iterable(self.by_document.values()), self.bundle), key=diagnostic_key)

    def errors(self) -> list[Diagnostic]:
        """Every ERROR of the bundle, in ``validate_snapshot``'s order."""
        found = chain(chain.from_iterable(self.errors_by_document.values()),
                      (d for d in self.bundle if d["severity"] == "ERROR"))
        return sorted(found, key=diagnostic_key)

    def of_documents(self, paths: Iterable[str]) -> list[Diagnostic]:
        """The diagnostics these documents produced, in ``validate_snapshot``'s order."""
        return sorted(chain.from_iterable(self.by_document.get(p, ()) for p in paths), key=diagnostic_key)


def _errors(found: tuple[Diagnostic, ...]) -> tuple[Diagnostic, ...]:
    return tuple(d for d in found if d["severity"] == "ERROR")


def _legacy_strict(resolution, options: Options) -> bool:
    return options.strict and resolution.compatibility == "legacy"


def _description(doc: Document) -> Any:
    return getattr(doc, "description", None)


def _document_findings(path: str, doc: Document, resolution, options: Options) -> tuple[Diagnostic, ...]:
    """What ``validate_snapshot`` reports about one document (links and orphans off)."""
    out = Collector(resolution.effective)
    if isinstance(doc, Concept):
        base_concept(doc, out)
        if options.strict and resolution.compatibility in ("legacy", "native") \
                and doc.parse_error is None and doc.has_frontmatter:
            check = strict_legacy if resolution.compatibility == "legacy" else strict_v02
            check(doc, out, profile=options.profile, as_of=options.as_of, snapshot=None)
    elif path.rsplit("/", 1)[-1] == "index.md":
        reserved_index(path, doc, resolution, out, False)
    else:
        reserved_log(path, doc, out)
    return tuple(out.items)


def _bundle_findings(resolution, options: Options, view: _IndexView) -> tuple[Diagnostic, ...]:
    out = Collector(resolution.effective)
    if resolution.assertion is not None:
        out.add("version_assertion_failed", "WARN", "index.md", "okf_version", resolution.assertion,
                "toolkit#version-selector-assertion", True)
    if _legacy_strict(resolution, options):
        index_descriptions(view, out)
    return tuple(out.items)
