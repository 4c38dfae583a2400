"""Preview and apply of the v0.1 -> v0.2 migration (spec/okf/contract/write.md §5.3-5.7).

The preview resolves the source, plans against the captured revision and returns a
content-free proof whose digest the apply must echo. The apply checks the frozen source
tuple, re-derives the change set from the request alone and re-proves it (an I/O-free
authorization), then re-plans on the live bundle and commits through the store's
compare-and-swap with the ``migration:v0.1-to-v0.2`` idempotency key.
"""

from __future__ import annotations

from typing import Any, Callable

from knowspec.generated.models.okf.apply_v02_migration_input_schema import ApplyV02MigrationInput
from knowspec.generated.models.okf.preview_v02_migration_input_schema import PreviewV02MigrationInput
from knowspec.impl.errors import ToolError, diagnostic
from knowspec.impl.okf.read_errors import recovery_step
from knowspec.impl.okf.write import bundle_io
from knowspec.impl.okf.write.encoding import is_digest
from knowspec.impl.okf.write.migration_plan import (
    build_proof, decode_migration, label_collisions, migration_change_set, plan_migration, proof_digest,
    proof_is_canonical,
)
from knowspec.impl.okf.write.migration_source import resolution_digest, resolve_source
from knowspec.impl.okf.write.plan import MAX_DIFF_BYTES, Plan, plan_idempotency_key, render_diff
from knowspec.impl.okf.write.store_errors import commit_or_raise

NAMESPACE = "migration:v0.1-to-v0.2"
_LIMIT = 10_000


def _blocked(source, base, blockers, actions, diagnostics=()) -> dict:
    if len(blockers) > _LIMIT or len(actions) > _LIMIT:
        raise ToolError("resource_limit", "migration preview exceeds the MCP output limits")
    return {"status": "blocked", "source": source, "base_revision": base, "result_revision": None,
            "plan_digest": "", "affected_paths": [], "diff": "", "diff_truncated": False,
            "blockers": blockers, "manual_actions": actions, "diagnostics": list(diagnostics)}


def _target_preflight(files, inp) -> list[dict]:
    named = list(inp.generated_at) + [c["path"] for c in inp.computations] + [m["path"] for m in inp.citations]
    return [{"code": "migration_document_missing", "path": p, "location": {"start": 0, "end": 0},
             "message": "the named document does not exist"} for p in named if p not in files]


def _plan(files, base, inp, source, check):
    cs = migration_change_set(inp, base, source)
    out = plan_migration(files, inp, check)
    if out.blockers:
        return cs, out, None
    return cs, out, build_proof(files, out, cs, resolution_digest(source))


def preview(args: PreviewV02MigrationInput, check: Callable[[], None]) -> dict[str, Any]:
    inp, data = decode_migration(args)
    with bundle_io.pinned(data.get("bundle_path") or "") as root_fd:
        bundle_io.finish_interrupted(root_fd)
        files, base = bundle_io.capture(root_fd, check=check)
    check()
    source = resolve_source(files, inp.selector)
    if source["transition"] == "blocked":
        return _blocked(source, base, source["blockers"], [])
    if source["transition"] == "target-noop":
        blockers = _target_preflight(files, inp)
        if blockers:
            return _blocked(source, base, blockers, [])
        return {"status": "noop", "source": source, "base_revision": base, "result_revision": base,
                "plan_digest": "", "affected_paths": [], "diff": "", "diff_truncated": False,
                "blockers": [], "manual_actions": [], "diagnostics": []}
    cs, out, proof = _plan(files, base, inp, source, check)
    if proof is None:
        return _blocked(source, base, out.blockers, out.actions)
    paths = [w["path"] for w in proof["writes"]]
    plan = Plan(proof["request_digest"], base, proof["result_revision"], tuple(proof["reads"]), out.writes,
                {p: files.get(p) for p in out.writes})
    diff = render_diff(plan) if paths else ""
    if len(diff.encode("utf-8")) > MAX_DIFF_BYTES or len(paths) > _LIMIT or len(out.diagnostics) > _LIMIT:
        raise ToolError("resource_limit", "migration preview exceeds the MCP output limits")
    return {"status": "applicable" if paths else "noop", "source": source, "proof": proof,
            "base_revision": base, "result_revision": proof["result_revision"],
            "plan_digest": proof_digest(proof), "affected_paths": paths, "diff": diff, "diff_truncated": False,
            "blockers": [], "manual_actions": [], "diagnostics": out.diagnostics}


def _mismatch(message: str = "migration plan does not match the preview") -> ToolError:
    return ToolError("plan_mismatch", message, diagnostics=[recovery_step(
        "expected_plan_digest", "Send back the exact proof, source and digest of the preview, or preview again.")])


def _conflict() -> ToolError:
    return ToolError("revision_conflict", "bundle revision changed since the preview", retryable=True,
                     diagnostics=[recovery_step("source", "Preview the migration again and review the new plan.")])


def _source_conflict() -> ToolError:
    return ToolError("source_conflict", "the bundle's migration source changed since the preview", retryable=True,
                     diagnostics=[recovery_step("source", "Preview the migration again.")])


def _check_expected(expected: Any, selector: str) -> dict:
    if not isinstance(expected, dict):
        raise ToolError("invalid_request", "expected_source is required")
    if expected.get("requested_selector") != selector:
        raise _mismatch("expected_source was resolved for another from selector")
    if expected.get("transition") == "blocked":
        raise ToolError("unsupported_migration_source", "the expected source is blocked")
    if expected.get("transition") not in ("v0.1-to-v0.2", "target-noop") or expected.get("blockers"):
        raise _mismatch("expected_source is not an applicable source resolution")
    return expected


def apply(args: ApplyV02MigrationInput, check: Callable[[], None]) -> dict[str, Any]:
    inp, data = decode_migration(args)
    for collision in label_collisions(inp):
        raise ToolError(collision["code"], collision["message"])
    expected = _check_expected(data.get("expected_source"), inp.selector)
    proof, digest = data.get("proof"), data.get("expected_plan_digest")
    with bundle_io.pinned(data.get("bundle_path") or "") as root_fd:
        bundle_io.finish_interrupted(root_fd)
        files, live = bundle_io.capture(root_fd, check=check)
        check()
        if expected["transition"] == "target-noop":
            if proof is not None or digest:
                raise _mismatch("a target-noop apply carries no proof or digest")
            if resolve_source(files, inp.selector) != expected:
                raise _source_conflict()
            blockers = _target_preflight(files, inp)
            if blockers:
                raise ToolError(blockers[0]["code"], blockers[0]["message"])
            return {"status": "noop", "source": expected, "base_revision": live, "result_revision": live,
                    "plan_digest": "", "changed_paths": [], "diagnostics": []}
        if not isinstance(proof, dict):
            raise ToolError("invalid_request", "proof is required for a v0.1-to-v0.2 apply")
        if proof.get("format_version") != 2 or not is_digest(proof.get("resolution_digest")) or not is_digest(digest):
            raise _mismatch()
        if not (is_digest(proof.get("base_revision")) and is_digest(proof.get("result_revision"))):
            raise ToolError("invalid_revision", "proof revisions are not canonical")
        base = proof["base_revision"]
        cs = migration_change_set(inp, base, expected)
        from knowspec.impl.okf.write.changeset import request_digest

        if (not proof_is_canonical(proof) or request_digest(cs) != proof["request_digest"]
                or resolution_digest(expected) != proof["resolution_digest"] or proof_digest(proof) != digest):
            raise _mismatch()
        key = plan_idempotency_key(NAMESPACE, digest)
        plan = None
        if live == base:
            if resolve_source(files, inp.selector) != expected:
                raise _source_conflict()
            _, out, fresh = _plan(files, base, inp, expected, check)
            if fresh is None:
                diags = [diagnostic(b["code"], b["message"], file=b["path"]) for b in out.blockers]
                return {"status": "rejected", "source": expected, "base_revision": live, "result_revision": live,
                        "plan_digest": digest, "changed_paths": [], "diagnostics": diags}
            if fresh != proof:
                raise _mismatch()
            if not out.writes:
                return {"status": "noop", "source": expected, "base_revision": live, "result_revision": live,
                        "plan_digest": digest, "changed_paths": [], "diagnostics": []}
            plan = Plan(proof["request_digest"], base, proof["result_revision"], tuple(proof["reads"]), out.writes,
                        {p: files.get(p) for p in out.writes}, affected_refs=tuple(proof["changed_refs"]))
        elif not bundle_io.has_private_dir(root_fd):
            raise _conflict()
        check()
        receipt = commit_or_raise(root_fd, cs, key, proof["request_digest"], plan, check,
                                  conflict=_conflict, mismatch=_mismatch)
    files_changed = [{"kind": f["Kind"], "path": f["Path"], "from": f.get("From", "")} for f in receipt.ChangedFiles]
    if (receipt.ResultRevision != proof["result_revision"] or files_changed != proof["changed_files"]
            or sorted(receipt.ChangedRefs) != sorted(proof["changed_refs"])):
        raise _mismatch("commit receipt does not match the proof")
    changed = receipt.changed_paths()
    return {"status": "applied" if changed else "noop", "source": expected,
            "base_revision": receipt.BaseRevision, "result_revision": receipt.ResultRevision,
            "plan_digest": digest, "changed_paths": changed, "diagnostics": []}
