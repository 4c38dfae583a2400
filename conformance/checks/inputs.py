"""Input contract: valid arguments are served, invalid ones are refused with the right code."""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

from hypothesis import strategies as st

from knowspec.conformance.checks.common import (
    INPUT_ERROR_CODES, MAX_INPUT_DIAGNOSTICS, advertised_only, envelope_problems, fail, probe_calls,
    require_result, success_problems, valid_calls,
)
from knowspec.conformance.checks.registry import CheckContext, check
from knowspec.conformance.contract import ToolContract
from knowspec.conformance.generate import acceptable_error_codes, arguments, boundary_cases, input_limits
from knowspec.conformance.target import CallOutcome

RULE_VALID = "spec/okf/contract/read.md §3.0 (valid input: success or a listed contract error)"
RULE_INVALID = "spec/README.md#schema-rules (limit keywords: resource_limit; others: schema_validation)"
RULE_BOUNDARY = "spec/okf/contract/read.md §5.1 (limits: 0, 1, max, max+1; lengths at and over maxLength)"


def judge(ctx: CheckContext, args: dict[str, Any], outcome: CallOutcome) -> None:
    """Classify ``args`` with the schema and hold the response to the matching rule."""
    require_result(outcome)
    expected = acceptable_error_codes(ctx.require_tool().input_schema, args)
    if not expected:
        if outcome.is_error:
            problems = envelope_problems(ctx, outcome)
            code = (outcome.structured or {}).get("code")
            if code == "schema_validation" and not violates_recheck(ctx.require_tool().rechecks, args):
                problems.append("schema-valid input was refused as schema_validation")
            if code == "resource_limit" and ctx.require_tool().limits and _blames_a_limit(ctx, outcome):
                problems.append("valid input within the advertised limits got resource_limit")
        else:
            problems = success_problems(ctx, outcome)
        if problems:
            fail("valid input: " + "; ".join(problems), outcome)
        return
    if not outcome.is_error:
        fail(f"invalid input was accepted (expected {' or '.join(sorted(expected))})", outcome)
    problems = envelope_problems(ctx, outcome)
    if problems:
        fail("; ".join(problems), outcome)
    env = outcome.structured
    if env["code"] not in expected:
        fail(f"invalid input got {env['code']}, expected {' or '.join(sorted(expected))}", outcome)
    diags = env["diagnostics"]
    if len(diags) > MAX_INPUT_DIAGNOSTICS:
        fail(f"{len(diags)} input diagnostics, at most {MAX_INPUT_DIAGNOSTICS} allowed", outcome)
    echoed = _echoed_values(args, [d.get("message", "") for d in diags] + [env["message"]],
                            json.dumps(ctx.require_tool().input_schema, ensure_ascii=False))
    if echoed:
        fail(f"error message echoes the bad input value {echoed!r}", outcome)


def _blames_a_limit(ctx: CheckContext, outcome: CallOutcome) -> bool:
    """Whether a resource_limit answer to schema-valid arguments contradicts the advertised limits:
    always for a tool without a bundle; for one with a bundle only when an ``invalid_input``
    diagnostic names a limited argument (the bundle's own caps on files and bytes, and a search's
    term or section bounds with their ``recovery_step``, may answer any call)."""
    tool = ctx.require_tool()
    if "bundle_path" not in tool.input_properties:
        return True
    limited = set(tool.limits) - {"bundle_path"}
    diagnostics = (outcome.structured or {}).get("diagnostics") or []
    named = {part for d in diagnostics if isinstance(d, dict) and d.get("code") == "invalid_input"  # not a
             for part in re.split(r"[^A-Za-z0-9_]+", str(d.get("field", ""))) if part}   # recovery_step (§4.2)
    return bool(named & limited)


def violates_recheck(rechecks: tuple[dict[str, str], ...], args: dict[str, Any]) -> bool:
    """Whether ``args`` breaks one of the handler re-checks the contract declares (spec/okf/contract/read.md §4.2:
    a blank query, a query without letters or digits), which may answer schema_validation."""
    for recheck in rechecks:
        value = args.get(recheck.get("argument", ""))
        if not isinstance(value, str):
            continue
        if recheck.get("rule") == "non_blank" and not value.strip():
            return True
        if recheck.get("rule") == "letter_or_number" and not any(
                unicodedata.category(ch)[0] in "LN" for ch in value):
            return True
    return False


def _string_values(value: Any) -> list[str]:
    """String values anywhere in the arguments (keys are names, not values)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _string_values(v)]
    if isinstance(value, list):
        return [s for v in value for s in _string_values(v)]
    return []


def _distinctive(text: str) -> bool:
    """Long enough, and not a plain word a server's own wording could contain ("advertised")."""
    stripped = text.strip()
    if len(stripped) < 8:
        return False
    return len(stripped) >= 24 or not (stripped.isascii() and stripped.isalpha())


def _echoed_values(args: dict[str, Any], messages: list[str], schema_text: str) -> str | None:
    """A distinctive bad value (not a word the schema itself advertises) repeated in a message."""
    for text in _string_values(args):
        if _distinctive(text) and text not in schema_text and any(text in m for m in messages):
            return text
    return None


@check("input_valid_accepted", RULE_VALID, applies=advertised_only)
def input_valid_accepted(ctx: CheckContext) -> None:
    """Schema-valid arguments (fixed probes built to succeed, then generated ones pointed at fixture
    data) get success or a listed error."""
    for args in probe_calls(ctx):
        judge(ctx, args, ctx.call(args))
    ctx.run_property(valid_calls(ctx), lambda args: judge(ctx, args, ctx.call(args)))


@check("input_invalid_rejected", RULE_INVALID, applies=advertised_only)
def input_invalid_rejected(ctx: CheckContext) -> None:
    """Negative-mode arguments: invalid ones get schema_validation/resource_limit with a clean envelope."""
    strategy = invalid_arguments(ctx.require_tool(), ctx.fill()["bundle_path"])
    ctx.run_property(strategy, lambda args: judge(ctx, args, ctx.call(args)))


def invalid_arguments(tool: ToolContract, real_path: str) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments the schema refuses (``pointed_at``); never valid ones, whose failures would be
    reported as this check's."""
    return (arguments(tool, "negative").map(lambda args: pointed_at(tool, real_path, args))
            .filter(lambda args: bool(acceptable_error_codes(tool.input_schema, args))))


def pointed_at(tool: ToolContract, real_path: str, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` with a real bundle path (a path error must not mask the schema error), unless the
    path is what makes them invalid: swapping it then would judge valid arguments."""
    if isinstance(args.get("bundle_path"), str) and len(args["bundle_path"]) < 4096:
        real = {**args, "bundle_path": real_path}
        if acceptable_error_codes(tool.input_schema, real):
            return real
    return args


@check("boundary_limits", RULE_BOUNDARY, applies=advertised_only, relevant=lambda t: bool(input_limits(t)))
def boundary_limits(ctx: CheckContext) -> None:
    """Explicit edge cases from every input bound (``$ref``s followed) behave exactly as the schema classifies them."""
    for case in boundary_cases(ctx.require_tool(), ctx.fill()):
        judge(ctx, case.arguments, ctx.call(case.arguments))


# re-exported for other checks
__all__ = ["judge", "INPUT_ERROR_CODES"]
