"""tools/list: every contract tool advertised with the contract's schemas and annotations."""

from __future__ import annotations

import json
from typing import Any

from knowspec.conformance.checks.registry import CheckContext, check
from knowspec.conformance.failures import CheckFailed

RULE_LIST = "spec/README.md#schema-rules (advertised schemas are the contract's, self-contained)"
RULE_UNKNOWN = "impl/errors.py (protocol faults: unknown tool is a JSON-RPC error in the knowspec profile)"


def schema_diff(expected: Any, actual: Any, path: str = "") -> list[str]:
    """JSON-pointer-ish differences between two schemas (first few only)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        out: list[str] = []
        for key in sorted(set(expected) | set(actual)):
            where = f"{path}/{key}"
            if key not in actual:
                out.append(f"{where}: missing")
            elif key not in expected:
                out.append(f"{where}: unexpected")
            else:
                out += schema_diff(expected[key], actual[key], where)
        return out
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        out = []
        for i, (e, a) in enumerate(zip(expected, actual)):
            out += schema_diff(e, a, f"{path}/{i}")
        return out
    if expected != actual or type(expected) is not type(actual):
        return [f"{path or '/'}: expected {json.dumps(expected)[:80]}, got {json.dumps(actual)[:80]}"]
    return []


@check("tools_list", RULE_LIST)
def tools_list(ctx: CheckContext) -> None:
    """The tool is advertised, with input/output schemas equal to the contract and matching hints."""
    tool = ctx.require_tool()
    advertised = ctx.advertised.get(tool.name)
    if advertised is None:
        raise CheckFailed(f"{tool.name} is missing from tools/list",
                          response={"advertised": sorted(ctx.advertised)})
    diffs = [f"inputSchema{d}" for d in schema_diff(tool.input_schema, advertised.get("inputSchema"))]
    diffs += [f"outputSchema{d}" for d in schema_diff(tool.output_schema, advertised.get("outputSchema"))]
    hints = advertised.get("annotations") or {}
    for hint, expected in (("readOnlyHint", tool.read_only), ("idempotentHint", tool.idempotent)):
        if hints.get(hint) is not None and hints.get(hint) != expected:
            diffs.append(f"annotations/{hint}: expected {expected}, got {hints.get(hint)}")
    if diffs:
        raise CheckFailed(f"{len(diffs)} difference(s) from the contract: " + "; ".join(diffs[:8]),
                          response={"diff": diffs})


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
