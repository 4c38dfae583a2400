"""Handlers of the seven OKF mutation tools.

Each handler only decodes arguments, wires cancellation and returns the structured result;
the rules live in ``knowspec.impl.okf.write`` (planning is pure, I/O sits in the store).
The v0.1 -> v0.2 migration converts legacy ``# Citations`` sections with explicit
``citation_mappings`` only; what it cannot convert losslessly is reported ``blocked``.
"""

from __future__ import annotations

from knowspec.generated.models.okf.apply_concept_patch_input_schema import ApplyConceptPatchInput
from knowspec.generated.models.okf.apply_temporal_upgrade_input_schema import ApplyTemporalUpgradeInput
from knowspec.generated.models.okf.apply_v02_migration_input_schema import ApplyV02MigrationInput
from knowspec.generated.models.okf.preview_concept_patch_input_schema import PreviewConceptPatchInput
from knowspec.generated.models.okf.preview_temporal_upgrade_input_schema import PreviewTemporalUpgradeInput
from knowspec.generated.models.okf.preview_v02_migration_input_schema import PreviewV02MigrationInput
from knowspec.generated.models.okf.write_concept_input_schema import WriteConceptInput
from knowspec.impl.context import CallContext, ToolOutput
from knowspec.impl.okf.write import migration_flow, patch_flow, replace, temporal_flow
from knowspec.impl.okf.write.inputs import decode_patch


def _checker(ctx: CallContext, operation: str):
    return lambda: ctx.check_cancelled(operation)


def write_concept(args: WriteConceptInput, ctx: CallContext) -> ToolOutput:
    return ToolOutput(replace.write_concept(args, _checker(ctx, "write_concept")))


def preview_concept_patch(args: PreviewConceptPatchInput, ctx: CallContext) -> ToolOutput:
    ctx.check_cancelled("preview_concept_patch")
    req = decode_patch(args)
    return ToolOutput(patch_flow.preview(req, _checker(ctx, "preview_concept_patch")))


def apply_concept_patch(args: ApplyConceptPatchInput, ctx: CallContext) -> ToolOutput:
    ctx.check_cancelled("apply_concept_patch")
    req = decode_patch(args)
    return ToolOutput(patch_flow.apply(
        req, args.expected_revision, args.expected_plan_digest,
        _checker(ctx, "apply_concept_patch"),
    ))


def preview_v02_migration(args: PreviewV02MigrationInput, ctx: CallContext) -> ToolOutput:
    ctx.check_cancelled("preview_v02_migration")
    return ToolOutput(migration_flow.preview(args, _checker(ctx, "preview_v02_migration")))


def apply_v02_migration(args: ApplyV02MigrationInput, ctx: CallContext) -> ToolOutput:
    ctx.check_cancelled("apply_v02_migration")
    return ToolOutput(migration_flow.apply(args, _checker(ctx, "apply_v02_migration")))


def preview_temporal_upgrade(args: PreviewTemporalUpgradeInput, ctx: CallContext) -> ToolOutput:
    ctx.check_cancelled("preview_temporal_upgrade")
    # The contract's text fallback for both temporal tools is the empty string.
    return ToolOutput(temporal_flow.preview(args, _checker(ctx, "preview_temporal_upgrade")), text="")


def apply_temporal_upgrade(args: ApplyTemporalUpgradeInput, ctx: CallContext) -> ToolOutput:
    ctx.check_cancelled("apply_temporal_upgrade")
    return ToolOutput(temporal_flow.apply(args, _checker(ctx, "apply_temporal_upgrade")), text="")
