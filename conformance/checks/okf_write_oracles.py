"""Oracle checks for the seven OKF write tools: round trips judged on the files themselves.

Each check writes a fresh bundle (the suite and a local target share the file system, as for every
OKF check) and compares the bundle's files before and after each call with what the contract
says (spec/okf/contract/write.md): a preview writes nothing and is deterministic; an apply writes
exactly the previewed diff, answers the preview's revisions, repeats its result on replay, and a
stale revision or a foreign plan digest is refused with nothing written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from knowspec.conformance.checks.common import advertised_only, fail, require_result, unsuccessful
from knowspec.conformance.checks.registry import CheckContext, check, tools_named
from knowspec.conformance.failures import CheckFailed
from knowspec.conformance.fixtures.model import Bundle, Concept, render_document
from knowspec.conformance.oracles.okf_writes import body_of, diff_sides, snapshot, written_body
from knowspec.conformance.target import CallOutcome

WRITE = "spec/okf/contract/write.md"
STALE_REVISION = "sha256:" + "0" * 64
OTHER_DIGEST = "sha256:" + "1" * 64


def for_tools(*names: str) -> dict[str, Any]:
    """``@check`` arguments of an oracle of these tools: planned on each, skipped unless all are advertised."""

    def applies(ctx: CheckContext) -> str | None:
        missing = [n for n in names if not ctx.is_advertised(n)]
        return f"{', '.join(missing)} not advertised by the target" if missing else advertised_only(ctx)

    return {"applies": applies, "relevant": tools_named(*names)}


def _call(ctx: CheckContext, name: str, args: dict[str, Any]) -> CallOutcome:
    outcome = ctx.call(ctx.fitted(name, args), name=name)
    require_result(outcome)
    return outcome


class Answer(dict):
    """A successful result's structuredContent, still carrying the outcome for failure reports."""

    outcome: CallOutcome


def _ok(ctx: CheckContext, name: str, args: dict[str, Any]) -> Answer:
    outcome = _call(ctx, name, args)
    why = unsuccessful(outcome)
    if why:
        fail(f"{name} on a valid fixture: {why}", outcome)
    answer = Answer(outcome.structured)
    answer.outcome = outcome
    return answer


def _refused(ctx: CheckContext, name: str, args: dict[str, Any], codes: tuple[str, ...], root: Path,
             what: str) -> None:
    before = snapshot(root)
    outcome = _call(ctx, name, args)
    code = (outcome.structured or {}).get("code") if outcome.is_error else None
    if code not in codes:
        fail(f"{name} {what}: expected {' or '.join(codes)}, got "
             f"{code if outcome.is_error else 'success ' + str((outcome.structured or {}).get('status'))}", outcome)
    if snapshot(root) != before:
        fail(f"{name} {what}: refused, but the bundle's files changed", outcome)


def _unchanged(before: dict[str, bytes], root: Path, what: str, outcome_args: dict[str, Any]) -> None:
    after = snapshot(root)
    if after != before:
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        raise CheckFailed(f"{what} changed files {changed}", arguments=outcome_args)


def patch_bundle(name: str) -> Bundle:
    return Bundle(name, (
        Concept("a", title="Alpha", text="alpha body"),
        Concept("b", title="Beta", stale_after="2025-03-01", text="beta body\n\nlast line"),
        Concept("c", title="Gamma", stale_after="2025-06-30"),
    ))


# ---- write_concept ----------------------------------------------------------------------------

@check("oracle_write_concept", f"{WRITE}#3 (whole-concept replace: body and frontmatter written; refusal writes nothing)",
       **for_tools("write_concept"))
def oracle_write_concept(ctx: CheckContext) -> None:
    """write_concept writes exactly the body sent, read_concept returns it; a refusal changes nothing."""
    root = ctx.bundles.path_of(patch_bundle("write"), fresh=True)
    cases = [("n/new", "type: Note\ntitle: New", "# New\n\nHello\n\nlast line of new\n"),
             ("a", "type: Note\ntitle: Alpha replaced\n", "replaced body\nsecond line")]
    for concept_id, frontmatter, body in cases:
        before = snapshot(root)
        args = {"bundle_path": str(root), "concept_id": concept_id, "frontmatter": frontmatter, "body": body}
        outcome = _call(ctx, "write_concept", args)
        why = unsuccessful(outcome)
        if why or outcome.structured.get("path") != f"{concept_id}.md":
            fail(f"write_concept {concept_id!r} must succeed with path {concept_id}.md: "
                 f"{why or 'its path is ' + repr(outcome.structured.get('path'))}", outcome)
        after = snapshot(root)
        written = after.get(f"{concept_id}.md", b"").decode("utf-8", "replace")
        # okf-mcp's written layout is stated from contract revision 1 on; an older contract states
        # only that the body is written: its text, whatever blank lines surround it
        if (body_of(written) != written_body(body) if ctx.contract.number >= 1
                else body_of(written).strip("\n") != body.strip("\n")):
            fail(f"write_concept {concept_id!r}: the file's body {body_of(written)!r} is not the body sent", outcome)
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        if changed != [f"{concept_id}.md"]:
            fail(f"write_concept {concept_id!r} changed {changed}, not just its own file", outcome)
        read = _call(ctx, "read_concept", {"bundle_path": str(root), "concept_id": concept_id})
        got = (read.structured or {}) if not read.is_error else {}
        if str(got.get("body", "")).rstrip("\n") != body.rstrip("\n") \
                or str(got.get("frontmatter_yaml", "")).rstrip("\n") != frontmatter.rstrip("\n"):
            fail(f"read_concept after write_concept {concept_id!r} does not return the written concept", read)
    bad = {"bundle_path": str(root), "concept_id": "bad", "frontmatter": "type: [\n", "body": "x"}
    _refused(ctx, "write_concept", bad, ("invalid_request", "operation_rejected"), root, "with unparseable YAML")


# ---- preview_concept_patch / apply_concept_patch -----------------------------------------------

def _lifecycle(concept_id: str, status: str) -> list[dict[str, Any]]:
    return [{"kind": "set_lifecycle", "concept_id": concept_id, "lifecycle": {"status": status, "stale_after": None}}]


@check("oracle_concept_patch", f"{WRITE} (preview writes nothing; apply = the diff; CAS; plan binding; replay)",
       **for_tools("preview_concept_patch", "apply_concept_patch"))
def oracle_concept_patch(ctx: CheckContext) -> None:
    """Preview → apply writes the diff's new side; stale revision and foreign digest are refused untouched."""
    root = ctx.bundles.path_of(patch_bundle("patch"), fresh=True)
    path = str(root)
    ops = _lifecycle("b", "deprecated")
    base = {"bundle_path": path, "actor": "human:conform", "operations": ops}
    original = snapshot(root)
    preview = _ok(ctx, "preview_concept_patch", base)
    _unchanged(original, root, "preview_concept_patch", base)
    again = _ok(ctx, "preview_concept_patch", base)
    for key in ("base_revision", "result_revision", "plan_digest", "diff", "affected_paths"):
        if preview.get(key) != again.get(key):
            fail(f"preview_concept_patch: {key} differs between two identical previews", again.outcome)
    if preview.get("status") != "applicable" or preview.get("affected_paths") != ["b.md"]:
        fail(f"preview_concept_patch of b: status {preview.get('status')}, affected {preview.get('affected_paths')}; "
             "expected applicable and ['b.md']", again.outcome)
    sides = diff_sides(str(preview.get("diff", "")))
    if set(sides) != {"b.md"} or sides["b.md"][0].encode() != original["b.md"]:
        fail("preview_concept_patch: the diff's old side is not the current b.md", again.outcome)
    apply = {**base, "expected_revision": preview["base_revision"], "expected_plan_digest": preview["plan_digest"]}
    _refused(ctx, "apply_concept_patch", {**apply, "expected_plan_digest": OTHER_DIGEST},
             ("plan_mismatch",), root, "with another plan digest")
    _refused(ctx, "apply_concept_patch", {**apply, "expected_revision": STALE_REVISION},
             ("revision_conflict", "invalid_revision"), root, "with a stale expected_revision")
    applied = _ok(ctx, "apply_concept_patch", apply)
    after = snapshot(root)
    want = {"status": "applied", "base_revision": preview["base_revision"], "result_revision": preview["result_revision"],
            "plan_digest": preview["plan_digest"], "changed_paths": preview["affected_paths"]}
    diff = {k: applied.get(k) for k in want if applied.get(k) != want[k]}
    if diff:
        fail(f"apply_concept_patch: {diff} differ from the preview's {({k: want[k] for k in diff})}",
             applied.outcome)
    if after.get("b.md", b"").decode() != sides["b.md"][1] or {k for k in after if after[k] != original.get(k)} != {"b.md"}:
        fail("apply_concept_patch: the written files are not the preview diff's new side",
             applied.outcome)
    replay = _call(ctx, "apply_concept_patch", apply)
    if replay.is_error or replay.structured != applied or snapshot(root) != after:
        fail("apply_concept_patch: repeating the identical apply must return the same result and write nothing", replay)
    # a real stale revision: the bundle moves between preview and apply
    ops2 = _lifecycle("a", "deprecated")
    base2 = {**base, "operations": ops2}
    preview2 = _ok(ctx, "preview_concept_patch", base2)
    moved = render_document(Concept("c", title="Gamma moved")).encode()
    (root / "c.md").write_bytes(moved)
    apply2 = {**base2, "expected_revision": preview2["base_revision"], "expected_plan_digest": preview2["plan_digest"]}
    _refused(ctx, "apply_concept_patch", apply2, ("revision_conflict",), root,
             "after another change moved the bundle (compare-and-swap)")


# ---- temporal upgrade -------------------------------------------------------------------------

@check("oracle_temporal_upgrade", f"{WRITE} (temporal upgrade: unresolved dates, mapped scalars only, binding)",
       **for_tools("preview_temporal_upgrade", "apply_temporal_upgrade"))
def oracle_temporal_upgrade(ctx: CheckContext) -> None:
    """Unmapped dates are listed; the apply rewrites exactly the mapped scalars; stale inputs write nothing."""
    root = ctx.bundles.path_of(patch_bundle("temporal"), fresh=True)
    path = str(root)
    original = snapshot(root)
    base = {"bundle_path": path, "id": "conform-u1", "actor": "human:conform"}
    partial = _ok(ctx, "preview_temporal_upgrade", {**base, "mappings": []})
    want_unresolved = [{"concept": "b", "path": "stale_after", "from": "2025-03-01"},
                       {"concept": "c", "path": "stale_after", "from": "2025-06-30"}]
    got = sorted(partial.get("unresolved") or [], key=lambda u: (u.get("concept", ""), u.get("path", "")))
    if partial.get("status") != "incomplete" or got != want_unresolved:
        fail(f"preview_temporal_upgrade without mappings: status {partial.get('status')}, unresolved {got}; "
             f"expected incomplete with {want_unresolved}", partial.outcome)
    mappings = [{"concept": "b", "path": "stale_after", "from": "2025-03-01", "to": "2025-03-01T08:00:00+03:00"},
                {"concept": "c", "path": "stale_after", "from": "2025-06-30", "to": "2025-06-30T23:59:59Z"}]
    args = {**base, "mappings": mappings}
    ready = _ok(ctx, "preview_temporal_upgrade", args)
    _unchanged(original, root, "preview_temporal_upgrade", args)
    if ready.get("status") != "ready" or ready.get("unresolved"):
        fail(f"preview_temporal_upgrade with every date mapped: status {ready.get('status')}",
             ready.outcome)
    apply = {**args, "base_revision": ready["base_revision"], "plan_digest": ready.get("plan_digest", "")}
    _refused(ctx, "apply_temporal_upgrade", {**apply, "plan_digest": OTHER_DIGEST},
             ("plan_mismatch", "operation_rejected"), root, "with another plan digest")
    _refused(ctx, "apply_temporal_upgrade", {**apply, "base_revision": STALE_REVISION},
             ("revision_conflict", "invalid_revision", "operation_rejected"), root, "with a stale base_revision")
    applied = _ok(ctx, "apply_temporal_upgrade", apply)
    if applied.get("result_revision") != ready.get("result_revision"):
        fail("apply_temporal_upgrade: result_revision differs from the preview's", applied.outcome)
    for name, answer in (("preview_temporal_upgrade", ready), ("apply_temporal_upgrade", applied)):
        if list(answer.outcome.texts) != [""]:  # write.md: upstream builds these results with an empty text
            fail(f"{name}: the text content must be one empty string, got {list(answer.outcome.texts)!r:.200}",
                 answer.outcome)
    after = snapshot(root)
    expected = dict(original)
    for m in mappings:
        file = f"{m['concept']}.md"
        expected[file] = original[file].replace(f'stale_after: "{m["from"]}"'.encode(),
                                                f'stale_after: "{m["to"]}"'.encode())
    if after != expected:
        changed = sorted(k for k in set(after) | set(expected) if after.get(k) != expected.get(k))
        fail(f"apply_temporal_upgrade: files {changed} are not the originals with only the mapped scalars rewritten",
             applied.outcome)
    replay = _call(ctx, "apply_temporal_upgrade", apply)
    if replay.is_error or replay.structured != applied or snapshot(root) != after:
        fail("apply_temporal_upgrade: repeating the identical apply must return the same result", replay)
    noop = _ok(ctx, "preview_temporal_upgrade", {**base, "mappings": []})
    if noop.get("status") != "noop" or noop.get("base_revision") != applied.get("result_revision"):
        fail("preview_temporal_upgrade after the apply: expected noop at the applied revision",
             noop.outcome)


# ---- v0.2 migration ---------------------------------------------------------------------------

@check("oracle_v02_migration", f"{WRITE} (v0.1 → v0.2: index.md declares 0.2; binding; replay; preview writes nothing)",
       **for_tools("preview_v02_migration", "apply_v02_migration"))
def oracle_v02_migration(ctx: CheckContext) -> None:
    """A v0.1 bundle migrates: the preview's paths are the changed ones, index.md then declares 0.2."""
    legacy = Bundle("legacy", patch_bundle("legacy").concepts, okf_version="0.1")
    root = ctx.bundles.path_of(legacy, fresh=True)
    original = snapshot(root)
    base = {"bundle_path": str(root), "timestamp_policy": "preserve", "citation_mappings": []}
    preview = _ok(ctx, "preview_v02_migration", base)
    _unchanged(original, root, "preview_v02_migration", base)
    if preview.get("status") != "applicable" or "index.md" not in (preview.get("affected_paths") or []):
        fail(f"preview_v02_migration of a v0.1 bundle: status {preview.get('status')}, affected "
             f"{preview.get('affected_paths')}", preview.outcome)
    apply = {**base, "expected_source": preview.get("source"), "proof": preview.get("proof"),
             "expected_plan_digest": preview.get("plan_digest")}
    apply = {k: v for k, v in apply.items() if v is not None}
    _refused(ctx, "apply_v02_migration", {**apply, "expected_plan_digest": OTHER_DIGEST},
             ("plan_mismatch", "invalid_request", "revision_conflict"), root, "with another plan digest")
    applied = _ok(ctx, "apply_v02_migration", apply)
    after = snapshot(root)
    changed = sorted(k for k in set(after) | set(original) if after.get(k) != original.get(k))
    problems = []
    if applied.get("status") != "applied" or applied.get("changed_paths") != preview.get("affected_paths"):
        problems.append(f"status {applied.get('status')}, changed_paths {applied.get('changed_paths')} != "
                        f"previewed {preview.get('affected_paths')}")
    if changed != sorted(preview.get("affected_paths") or []):
        problems.append(f"files changed {changed} are not the previewed paths")
    if b'okf_version: "0.2"' not in after.get("index.md", b"") and b"okf_version: 0.2" not in after.get("index.md", b""):
        problems.append("index.md does not declare 0.2")
    if applied.get("result_revision") != preview.get("result_revision"):
        problems.append("result_revision differs from the preview's")
    if problems:
        fail("apply_v02_migration: " + "; ".join(problems), applied.outcome)
    replay = _call(ctx, "apply_v02_migration", apply)
    if replay.is_error or replay.structured != applied or snapshot(root) != after:
        fail("apply_v02_migration: repeating the identical apply must return the same result", replay)
