"""Plan a patch change set against a captured snapshot: pure, no I/O.

Operations are applied in order to an overlay of the snapshot; the whole staged bundle is
then validated by the read side's strict 0.2 validator, and any ERROR in it blocks the plan,
including one the base already had: a change never publishes a non-conformant bundle
(spec/okf/NOTES.md#write-gate). The result is a ``Plan`` whose
digest binds preview and apply. Parsed documents and findings are cached by content, so a
preview and its apply (or successive edits) do not re-parse an unchanged bundle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from knowspec.generated.constants import TEMPORAL_PROFILE_DATE
from knowspec.impl import runtime as process
from knowspec.impl.errors import diagnostic
from knowspec.impl.okf.write.changeset import ChangeSet, Operation
from knowspec.impl.okf.write.computation_body import ComputationBodyRejected
from knowspec.impl.okf.write.document import Document, DocumentError, split_document
from knowspec.impl.okf.write.patch import PatchRejected, apply_concept_operation, set_bundle_version
from knowspec.impl.okf.write.paths import concept_path
from knowspec.impl.okf.write.plan import Plan
from knowspec.impl.okf.write.revision import revision_with
from knowspec.impl.okf.write.yaml_text import YamlRejected

ROOT_INDEX = "index.md"


class PlanRejected(Exception):
    """The change set cannot be planned; carries wire diagnostics (at least one ERROR)."""

    def __init__(self, code: str, diagnostics: list[dict]) -> None:
        super().__init__(diagnostics[0]["message"] if diagnostics else code)
        self.code = code
        self.diagnostics = diagnostics


MAX_MESSAGE_BYTES = 512


def _capped(message: str) -> str:
    raw = message.encode("utf-8")
    if len(raw) <= MAX_MESSAGE_BYTES:
        return message
    return raw[: MAX_MESSAGE_BYTES - len(" [truncated]")].decode("utf-8", "ignore") + " [truncated]"


def _reject(code: str, message: str, path: str = "") -> PlanRejected:
    return PlanRejected(code, [diagnostic(code, _capped(message), file=path)])


@dataclass
class _Overlay:
    files: Mapping[str, bytes]
    docs: dict[str, Document | None]

    def load(self, path: str) -> Document | None:
        if path not in self.docs:
            raw = self.files.get(path)
            self.docs[path] = None if raw is None else split_document(raw)
        return self.docs[path]


def _target(op: Operation) -> str:
    return ROOT_INDEX if op["kind"] == "set_bundle_version" else concept_path(op["concept_id"])


def _apply(overlay: _Overlay, op: Operation, path: str) -> None:
    doc = overlay.load(path)
    if op["kind"] == "set_bundle_version":
        overlay.docs[path] = set_bundle_version(doc, op["version"])
        return
    if doc is None:
        raise _reject("concept_not_found", f"concept {op['concept_id']} does not exist in the bundle", path)
    overlay.docs[path] = apply_concept_operation(doc, op)


_BUNDLE_CODES = frozenset({"link_target_missing", "link_anchor_missing", "orphan_unlisted", "orphan_index_missing"})


DOC_LIMIT = 40_000
FINDINGS_LIMIT = 8


def parsed_document(path: str, raw: bytes):
    """The read side's parse of one captured document, shared with staged validation.

    Parsed documents and validation findings of recent bundles are reused across calls (the
    runtime's ``okf.write.parsed`` and ``okf.write.findings`` caches): a patch preview and its
    apply validate the same base and the same staged bundle, and consecutive edits share every
    unedited document. Stamps are exact bytes (documents) and keys content digests (findings),
    so a hit is always the same input."""
    from knowspec.impl.okf.model import document_for

    cache = process.current().cache("okf.write.parsed", max_entries=DOC_LIMIT, sizeof=lambda held: 4 * len(held[0]))
    return cache.get(path, raw, lambda: (raw, document_for(path, raw)))[1]


def _findings(key: tuple, compute: Callable[[], list[dict]]) -> list[dict]:
    return process.current().cache("okf.write.findings", max_entries=FINDINGS_LIMIT).get(key, None, compute)


CHECK_EVERY = 64   # documents parsed between two cancellation checks


def _snapshot(files: Mapping[str, bytes], check: Callable[[], None]):
    from knowspec.impl.okf.model import Snapshot

    docs = {}
    for index, (path, raw) in enumerate(files.items()):
        if index % CHECK_EVERY == 0:
            check()
        if path.endswith(".md"):
            docs[path] = parsed_document(path, raw)
    return Snapshot("", files, docs)


def _finding(d: dict) -> tuple:
    return (d["file"], d["code"], d["field"], d["message"])


def staged_validation(files: Mapping[str, bytes], writes: dict[str, bytes], profile: str = TEMPORAL_PROFILE_DATE,
                      *, check: Callable[[], None], links: bool = True,
                      revisions: tuple[str, str] | None = None) -> tuple[list[dict], list[dict]]:
    """(blocking, advisory) findings of the read side's strict 0.2 validator over the whole
    staged bundle, with links and orphans checked when ``links`` is set.

    Blocking = every ERROR of the staged bundle, wherever it is: the contract validates the
    whole staged bundle and publishes nothing unless it is conformant, so an ERROR the base
    already had blocks too. Advisory = the WARN/INFO findings of the written documents, plus
    link and orphan findings the edit introduces (links to and from the edited documents);
    pre-existing link and orphan findings of the base are not repeated.

    Without links, ``revisions`` (the base's and the staged bundle's) lets the findings be kept
    per document and re-checked in the written documents only (``validation.incremental``);
    the answer is the same as the full validation's. ``check`` is the call's cancellation
    (required: a whole-bundle validation takes seconds on a big bundle)."""
    from knowspec.impl.okf.parsing.frontmatter import YamlLimitError
    from knowspec.impl.okf.validation.diagnostics import validate_snapshot

    ctx = _Cancellation(check)
    options = {"strict": True, "check_links": links, "check_orphans": links, "selector": "0.2", "profile": profile}

    def report(bundle: Mapping[str, bytes]) -> list[dict]:
        snapshot = _snapshot(bundle, check)
        return _findings((snapshot.revision, profile, links),
                               lambda: validate_snapshot(snapshot, ctx, **options).diagnostics)

    try:
        if not links and revisions is not None:
            found = _incremental(files, writes, profile, ctx, revisions)
            if found is not None:
                return found
        staged_files = dict(files)  # a copy of captured files reads them all: only when needed
        staged_files.update(writes)
        after = report(staged_files)
        before = report(files)
    except YamlLimitError:
        return [diagnostic("resource_limit", "staged document exceeds the YAML limits")], []
    old = {_finding(d) for d in before}
    blocking = [d for d in after if d["severity"] == "ERROR"]
    advisory = [d for d in after if d["severity"] != "ERROR" and (
        (d["file"] in writes and d["code"] not in _BUNDLE_CODES)
        or (d["code"] in _BUNDLE_CODES and _finding(d) not in old))]
    return blocking, advisory


def _incremental(files: Mapping[str, bytes], writes: dict[str, bytes], profile: str, ctx,
                 revisions: tuple[str, str]) -> tuple[list[dict], list[dict]] | None:
    """The no-links staged validation from the base's per-document findings (kept per base
    revision, and the staged bundle's kept under its own for the apply and the next edit); None
    when the change is not a local one (``DocumentFindings.replaced``)."""
    from knowspec.impl.okf.validation.incremental import DocumentFindings, Options

    options = Options(strict=True, selector="0.2", profile=profile)
    cache = process.current().cache("okf.write.findings", max_entries=FINDINGS_LIMIT)
    base_revision, staged_revision = revisions
    staged = cache.peek(("documents", staged_revision, profile))
    if staged is None:
        base = cache.get(("documents", base_revision, profile), None,
                         lambda: DocumentFindings.of(_snapshot(files, ctx.check_cancelled), ctx, options))
        staged = base.replaced({p: parsed_document(p, b) for p, b in writes.items()}) \
            if all(p.endswith(".md") for p in writes) else None
        if staged is None:
            return None
        cache.put(("documents", staged_revision, profile), None, staged)
    blocking = staged.errors()
    advisory = [d for d in staged.of_documents(writes) if d["severity"] != "ERROR" and d["file"] in writes]
    return blocking, advisory


class _Cancellation:
    """The validator's ``ctx``: its cancellation polls call the flow's checker."""

    def __init__(self, check: Callable[[], None]) -> None:
        self._check = check

    def check_cancelled(self, operation: str = "") -> None:
        self._check()


def plan_change_set(files: Mapping[str, bytes], cs: ChangeSet, request_digest: str,
                    profile: str = TEMPORAL_PROFILE_DATE, *, check: Callable[[], None]) -> Plan:
    """Apply ``cs`` to the snapshot ``files`` (whose revision is ``cs.base_revision``)."""
    overlay = _Overlay(files, {})
    for index, op in enumerate(cs.operations):
        path = _target(op)
        try:
            _apply(overlay, op, path)
        except (PatchRejected, YamlRejected, DocumentError, ComputationBodyRejected) as exc:
            raise _reject(exc.code, f"operations[{index}]: {exc.message}", path) from None
    writes: dict[str, bytes] = {}
    for path, doc in overlay.docs.items():
        if doc is None:
            continue
        new = doc.render().encode("utf-8")
        if files.get(path) != new:
            writes[path] = new
    result_revision = revision_with(files, cs.base_revision, writes)
    # Patch plans check documents, not links or orphans (spec/okf/NOTES.md#write-gate).
    blocking, advisory = staged_validation(files, writes, profile, check=check, links=False,
                                           revisions=(cs.base_revision, result_revision)) if writes else ([], [])
    if blocking:
        raise PlanRejected("staged_validation_failed", blocking)
    refs = sorted(p[: -len(".md")] for p in writes if p.endswith(".md") and p.rsplit("/", 1)[-1] not in ("index.md", "log.md"))
    return Plan(
        request_digest=request_digest,
        base_revision=cs.base_revision,
        result_revision=result_revision,
        reads=tuple(sorted(overlay.docs)),
        writes=writes,
        old={p: files.get(p) for p in writes},
        affected_refs=tuple(refs),
        diagnostics=tuple(advisory),
    )
