"""tools/list: every contract tool advertised with schemas that mean the contract's, and its hints."""

from __future__ import annotations

import json
from typing import Any

from knowspec.conformance.areas import NOT_ADVERTISED
from knowspec.conformance.checks.registry import CheckContext, check, skip
from knowspec.conformance.contract import ToolContract
from knowspec.conformance.failures import CheckFailed
from knowspec.conformance.schema_shape import alternatives, differences, prose_differences, shape

RULE_LIST = "spec/README.md#schema-rules (advertised schemas mean the contract's: structure, not prose)"
RULE_UNKNOWN = "impl/errors.py (protocol faults: unknown tool is a JSON-RPC error in the knowspec profile)"


def input_schema_problems(tool: ToolContract, advertised: Any) -> tuple[list[str], list[str]]:
    """Structural differences (failures) and prose differences (info) of an advertised input schema."""
    expected, actual = shape(tool.input_schema), shape(advertised)
    return ([f"inputSchema{d}" for d in differences(expected, actual)],
            [f"inputSchema{p}" for p in prose_differences(tool.input_schema, advertised)])


def output_schema_problems(tool: ToolContract, advertised: Any) -> tuple[list[str], list[str]]:
    """The advertised output schema means the contract's success shape, alone or wrapped with the
    error envelope (``anyOf``, any order). It must be there: it is how a client learns the shape."""
    if advertised is None:
        return ["outputSchema: not advertised (the contract gives every tool a success shape)"], []
    success = shape(tool.success_schema)
    wrapped = alternatives(tool.output_schema)
    got = alternatives(advertised)
    if _key(shape(advertised)) == _key(success) or _same(got, [success]):
        return [], ["outputSchema: the success schema alone (no error-envelope alternative)"]
    if _same(got, wrapped):
        return [], [f"outputSchema{p}" for p in prose_differences(tool.output_schema, advertised)]
    if len(got) > len(wrapped):
        return [f"outputSchema: {len(got)} alternatives; expected the success schema, alone or with the "
                "error envelope"], []
    failures = []
    for alt in got:  # each advertised alternative against the contract alternative it is closest to
        nearest = min(wrapped, key=lambda want: len(differences(want, alt, limit=1000)))
        failures += [f"outputSchema{d}" for d in differences(nearest, alt)]
    return failures or ["outputSchema: the alternatives do not mean the contract's"], []


def _same(got: list[Any], want: list[Any]) -> bool:
    return sorted(map(_key, got)) == sorted(map(_key, want))


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


@check("tools_list", RULE_LIST)
def tools_list(ctx: CheckContext) -> None:
    """The tool is advertised with schemas that mean the contract's (wording, layout and tool
    order are free: they are reported as info) and annotation hints that do not contradict it."""
    tool = ctx.require_tool()
    advertised = ctx.advertised.get(tool.name)
    if advertised is None and ctx.config.advertised_only:  # (none at all ends the run: runner.py)
        skip(NOT_ADVERTISED)
    if advertised is None:
        raise CheckFailed(f"{tool.name} is missing from tools/list",
                          response={"advertised": sorted(ctx.advertised)[:50]})
    failures, notes = input_schema_problems(tool, advertised.get("inputSchema"))
    more_failures, more_notes = output_schema_problems(tool, advertised.get("outputSchema"))
    failures += more_failures
    notes += more_notes
    hints = advertised.get("annotations") or {}
    for hint, expected in (("readOnlyHint", tool.read_only), ("idempotentHint", tool.idempotent)):
        if hints.get(hint) is not None and hints.get(hint) != expected:
            failures.append(f"annotations/{hint}: expected {expected}, got {hints.get(hint)}")
    if advertised.get("description") != tool.description and tool.description:
        notes.append("description: worded differently")
    if failures:
        raise CheckFailed(f"{len(failures)} structural difference(s) from the contract: " + "; ".join(failures[:8]),
                          response={"diff": failures[:40], "prose": notes[:40]})
    if notes:
        ctx.note(f"{len(notes)} prose difference(s): " + "; ".join(notes[:6]))


@check("unknown_tool", RULE_UNKNOWN, scope="server")
def unknown_tool(ctx: CheckContext) -> None:
    """Calling a tool that does not exist is answered per the profile, and the session survives."""
    outcome = ctx.call({}, name="knowspec_conformance_no_such_tool")
    profile = ctx.config.unknown_tool
    if outcome.rpc_error is not None:
        if profile == "result":
            raise CheckFailed("unknown tool gave a JSON-RPC error; the profile expects an isError result",
                              response=outcome.summary())
        if profile == "jsonrpc" and outcome.rpc_error[0] != -32602:
            raise CheckFailed(f"unknown tool gave JSON-RPC error {outcome.rpc_error[0]}, expected -32602",
                              response=outcome.summary())
    elif not outcome.is_error:
        raise CheckFailed("unknown tool call succeeded", response=outcome.summary())
    elif profile == "jsonrpc":
        raise CheckFailed("unknown tool gave an isError result; the profile expects JSON-RPC -32602",
                          response=outcome.summary())
    tools = ctx.conn.list_tools()
    if not tools and ctx.contract.tools:
        raise CheckFailed("session unusable after the unknown-tool call")
