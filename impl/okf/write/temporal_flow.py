"""Preview and apply of the temporal upgrade (spec/okf/contract/write.md §6.2, §6.4).

The preview binds the caller's id, actor and mappings to the captured revision through the
plan digest; the apply recomputes that plan on the same base (or, when the bundle already
moved, lets the store replay an earlier identical commit) and commits with the
``temporal-upgrade:v1`` idempotency key. Every failure is ``operation_rejected`` or
``invalid_argument`` with a recovery step, as the contract prescribes.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from knowspec.generated.models.okf.apply_temporal_upgrade_input_schema import ApplyTemporalUpgradeInput
from knowspec.generated.models.okf.preview_temporal_upgrade_input_schema import PreviewTemporalUpgradeInput
from knowspec.impl.errors import ToolError
from knowspec.impl.okf.read_errors import recovery_step
from knowspec.impl.okf.write import bundle_io
from knowspec.impl.okf.write.changeset import ChangeSet, request_digest
from knowspec.impl.okf.write.encoding import is_digest
from knowspec.impl.okf.write.inputs import check_text, is_calendar_date, plain
from knowspec.impl.okf.write.paths import concept_id_problem
from knowspec.impl.okf.write.plan import Plan, plan_digest, plan_idempotency_key
from knowspec.impl.okf.write.revision import revision_of
from knowspec.impl.okf.write.store_errors import commit_or_raise
from knowspec.impl.okf.write.temporal import INSTANT, TemporalError, operations_from_mappings, plan_temporal

NAMESPACE = "temporal-upgrade:v1"
_MAX_MAPPINGS = 10_000


def _bad_input(message: str = "cannot decode temporal upgrade input") -> ToolError:
    return ToolError("invalid_argument", message)


def decode(args: PreviewTemporalUpgradeInput | ApplyTemporalUpgradeInput) -> dict[str, Any]:
    data = plain(args)
    try:
        check_text("id", data.get("id"), limit=128)
        check_text("actor", data.get("actor"), limit=256)
        if data["id"] != data["id"].strip() or data["actor"] != data["actor"].strip():
            raise ToolError("invalid_request", "identity has surrounding whitespace")
    except (ToolError, KeyError, AttributeError):
        raise _bad_input() from None
    mappings = data.get("mappings") or []
    if not isinstance(mappings, list) or len(mappings) > _MAX_MAPPINGS:
        raise _bad_input()
    for m in mappings:
        if not isinstance(m, dict) or set(m) != {"concept", "path", "from", "to"}:
            raise _bad_input()
        if not is_calendar_date(m["from"]) or not isinstance(m["to"], str) or not INSTANT.match(m["to"]) \
                or m["to"].endswith("-00:00"):
            raise _bad_input()
        if concept_id_problem(m["concept"]) is not None:
            raise _bad_input("invalid temporal mapping")
    data["mappings"] = mappings
    return data


def _rejected(message: str, field: str, advice: str, *, retryable: bool = False) -> ToolError:
    return ToolError("operation_rejected", message, retryable=retryable, diagnostics=[recovery_step(field, advice)])


def _check_version(files: Mapping[str, bytes]) -> None:
    from knowspec.impl.okf.model import document_for
    from knowspec.impl.okf.bundle.version import resolve_version

    raw = files.get("index.md")
    v = resolve_version(document_for("index.md", raw) if raw is not None else None).version
    if v.get("effective") != "0.2" or v.get("declared") not in (None, "0.2"):
        raise TemporalError("bundle is not an OKF 0.2 bundle")


def _plan(files: Mapping[str, bytes], base: str, data: dict,
          check: Callable[[], None]) -> tuple[str, Plan | None, ChangeSet | None, list]:
    _check_version(files)
    tp = plan_temporal(files, data["mappings"], check)
    if tp.status != "ready":
        return tp.status, None, None, tp.unresolved
    cs = ChangeSet(data["id"], data["actor"], base, tp.operations)
    digest = request_digest(cs)
    post = dict(files)
    post.update(tp.writes)
    plan = Plan(digest, base, revision_of(post), tuple(sorted(tp.writes)), tp.writes,
                {p: files.get(p) for p in tp.writes},
                affected_refs=tuple(op["concept_id"] for op in tp.operations))
    return "ready", plan, cs, []


def preview(args: PreviewTemporalUpgradeInput, check: Callable[[], None]) -> dict[str, Any]:
    data = decode(args)
    with bundle_io.pinned(data.get("bundle_path") or "") as root_fd:
        bundle_io.finish_interrupted(root_fd)
        files, base = bundle_io.capture(root_fd, check=check)
    check()
    try:
        status, plan, _, unresolved = _plan(files, base, data, check)
    except TemporalError:
        raise _rejected("temporal upgrade preview failed", "mappings",
                        "Fix the mappings so each names an existing legacy date exactly, then preview again.") from None
    out = {"status": status, "base_revision": base,
           "result_revision": plan.result_revision if plan else base, "unresolved": unresolved}
    if plan is not None:
        out["plan_digest"] = plan_digest(plan)
    return out


def apply(args: ApplyTemporalUpgradeInput, check: Callable[[], None]) -> dict[str, Any]:
    data = decode(args)
    base, expected = args.base_revision, args.plan_digest
    if not is_digest(base) or not is_digest(expected):
        raise _bad_input("base_revision and plan_digest must be canonical sha256 digests")
    key = plan_idempotency_key(NAMESPACE, expected)
    mismatch = lambda: _rejected("temporal upgrade plan or receipt did not match", "plan_digest",  # noqa: E731
                                 "Preview again with the same mappings and apply the new plan digest.")
    conflict = lambda: _rejected("temporal upgrade apply failed", "base_revision",  # noqa: E731
                                 "The bundle changed; preview the upgrade again.", retryable=True)
    try:
        with bundle_io.pinned(data.get("bundle_path") or "") as root_fd:
            bundle_io.finish_interrupted(root_fd)
            files, live = bundle_io.capture(root_fd, check=check)
            if live == base:
                try:
                    status, plan, cs, _ = _plan(files, base, data, check)
                except TemporalError:
                    raise mismatch() from None
                if plan is None or plan_digest(plan) != expected:
                    raise mismatch()
            else:
                plan, cs = None, ChangeSet(data["id"], data["actor"], base, operations_from_mappings(data["mappings"]))
            check()
            digest = request_digest(cs)  # type: ignore[arg-type]
            receipt = commit_or_raise(root_fd, cs, key, digest, plan, check,  # type: ignore[arg-type]
                                      conflict=conflict, mismatch=mismatch)
    except ToolError as err:
        if err.code == "operation_cancelled":
            raise ToolError("operation_cancelled", "temporal upgrade was cancelled; outcome is not confirmed",
                            retryable=True, diagnostics=[recovery_step(
                                "base_revision", "Inspect the bundle, then retry the same arguments before previewing again.")]) from None
        raise
    return {"status": "applied", "request_digest": receipt.RequestDigest, "result_revision": receipt.ResultRevision}
