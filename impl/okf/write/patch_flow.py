"""Preview and apply of a concept patch: the preview -> apply binding (spec/okf/contract/write.md §4.3-4.6).

A preview plans against the captured revision and reports the plan digest; it writes
nothing. An apply rebuilds the same change set with ``expected_revision`` as base, re-plans
and must arrive at exactly ``expected_plan_digest``; the store's compare-and-swap is the only
authorization to publish, and the digest-derived idempotency key turns a repeated apply into
a replay of the first receipt.
"""

from __future__ import annotations

from typing import Any, Callable

from knowspec.impl.errors import ToolError, diagnostic
from knowspec.impl.okf.bundle.captured_files import retried_on_file_change
from knowspec.impl.okf.read_errors import recovery_step
from knowspec.impl.okf.write import bundle_io
from knowspec.impl.okf.write.changeset import ChangeSet, patch_changeset_id, request_digest
from knowspec.impl.okf.write.encoding import is_digest
from knowspec.impl.okf.write.inputs import PatchArgs
from knowspec.impl.okf.write.plan import MAX_AFFECTED_PATHS, MAX_DIFF_BYTES, Plan, plan_digest, \
    plan_idempotency_key, render_diff
from knowspec.impl.okf.write.planner import PlanRejected, plan_change_set
from knowspec.impl.okf.write.receipts import Receipt
from knowspec.impl.okf.write.store_errors import commit_or_raise

NAMESPACE = "mcp:concept-patch"
Check = Callable[[], None]


def _change_set(req: PatchArgs, base: str) -> tuple[ChangeSet, str]:
    cs = ChangeSet(patch_changeset_id(req.actor, req.operations), req.actor, base, req.operations)
    return cs, request_digest(cs)


def _rejection_diagnostics(exc: PlanRejected) -> list[dict]:
    diags = list(exc.diagnostics)
    if not any(d["severity"] == "ERROR" for d in diags):
        diags.append(diagnostic(exc.code or "invalid_change_set", str(exc)))
    return diags


def preview(req: PatchArgs, check: Check) -> dict[str, Any]:
    @retried_on_file_change
    def capture_and_plan() -> tuple[str, str, Plan | PlanRejected]:
        with bundle_io.pinned(req.bundle_path) as root_fd:
            bundle_io.finish_interrupted(root_fd)
            check()
            files, base = bundle_io.capture(root_fd, req.bundle_path, check)
        check()
        cs, digest = _change_set(req, base)
        try:
            return base, digest, plan_change_set(files, cs, digest, req.profile, check=check)
        except PlanRejected as exc:
            return base, digest, exc

    base, digest, plan = capture_and_plan()
    if isinstance(plan, PlanRejected):
        return {"status": "rejected", "base_revision": base, "result_revision": None,
                "plan_digest": digest, "diff": "", "diff_truncated": False, "affected_paths": [],
                "diagnostics": _rejection_diagnostics(plan), "unknown_preserved": False}
    check()
    noop = plan.is_noop
    paths = [] if noop else plan.affected_paths()
    if len(paths) > MAX_AFFECTED_PATHS:
        raise ToolError("resource_limit", "patch affects too many paths")
    diff = "" if noop else render_diff(plan)
    if len(diff.encode("utf-8")) > MAX_DIFF_BYTES:
        raise ToolError("resource_limit", "patch diff exceeds the MCP output limit")
    return {"status": "noop" if noop else "applicable", "base_revision": base,
            "result_revision": plan.result_revision, "plan_digest": plan_digest(plan), "diff": diff,
            "diff_truncated": False, "affected_paths": paths, "diagnostics": list(plan.diagnostics),
            "unknown_preserved": True}


def _conflict(message: str = "bundle revision changed since the preview") -> ToolError:
    return ToolError("revision_conflict", message, retryable=True, diagnostics=[recovery_step(
        "expected_revision", "Preview the patch again against the current revision and review the new plan.")])


def plan_mismatch(message: str = "plan digest does not match the recomputed plan") -> ToolError:
    return ToolError("plan_mismatch", message, diagnostics=[recovery_step(
        "expected_plan_digest", "Resubmit the exact operations and digest returned by the preview, or preview again.")])


def _applied(receipt: Receipt, expected_digest: str) -> dict[str, Any]:
    changed = [] if receipt.BaseRevision == receipt.ResultRevision else receipt.changed_paths()
    return {"status": "applied" if changed else "noop", "base_revision": receipt.BaseRevision,
            "result_revision": receipt.ResultRevision, "plan_digest": expected_digest,
            "changed_paths": changed, "diagnostics": []}


def apply(req: PatchArgs, expected_revision: str, expected_digest: str, check: Check,
          step_hook: Callable[[str], None] | None = None) -> dict[str, Any]:
    if not is_digest(expected_revision):
        raise ToolError("invalid_revision", "expected_revision is not a canonical sha256 revision")
    if not is_digest(expected_digest):
        raise plan_mismatch("expected_plan_digest is not canonical")
    cs, digest = _change_set(req, expected_revision)
    key = plan_idempotency_key(NAMESPACE, expected_digest)
    with bundle_io.pinned(req.bundle_path) as root_fd:
        bundle_io.finish_interrupted(root_fd)
        check()

        @retried_on_file_change
        def capture_and_plan() -> tuple[str, Plan | PlanRejected | None]:
            files, live = bundle_io.capture(root_fd, req.bundle_path, check)
            if live != expected_revision:
                return live, None
            try:
                return live, plan_change_set(files, cs, digest, req.profile, check=check)
            except PlanRejected as exc:
                return live, exc

        live, plan = capture_and_plan()
        if isinstance(plan, PlanRejected):
            return {"status": "rejected", "base_revision": live, "result_revision": live,
                    "plan_digest": expected_digest, "changed_paths": [],
                    "diagnostics": _rejection_diagnostics(plan)}
        if plan is not None:
            if plan_digest(plan) != expected_digest:
                raise plan_mismatch()
            if plan.is_noop:
                return {"status": "noop", "base_revision": live, "result_revision": live,
                        "plan_digest": expected_digest, "changed_paths": [], "diagnostics": []}
        elif not bundle_io.has_private_dir(root_fd):
            raise _conflict()
        check()
        receipt = commit_or_raise(root_fd, cs, key, digest, plan, check, step_hook=step_hook,
                                  conflict=_conflict, mismatch=plan_mismatch,
                                  capture=lambda: bundle_io.locked_capture(root_fd, req.bundle_path, check))
    return _applied(receipt, expected_digest)
