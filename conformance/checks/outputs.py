"""Output contract on successful calls: schema validity, text fallback, order, truncation, determinism."""

from __future__ import annotations

import json
from typing import Any, Callable

from hypothesis import strategies as st

from knowspec.conformance.checks.common import (
    advertised_only, envelope_problems, fail, json_text, probe_calls, require_result,
    success_problems, valid_calls,
)
from knowspec.conformance.checks.registry import CheckContext, check, skip
from knowspec.conformance.failures import NO_STRUCTURE
from knowspec.conformance.oracles.go_encoding import go_text_problem
from knowspec.conformance.oracles.plain_encoding import plain_problem
from knowspec.conformance.oracles.contract_ordering import rules as contract_rules
from knowspec.conformance.oracles.contract_ordering import violations as contract_violations
from knowspec.conformance.oracles.ordering import ORDERINGS, ordering_violations
from knowspec.conformance.oracles.truncation import truncation_violations
from knowspec.conformance.target import CallOutcome

RULE_OUTPUT = "spec/README.md#schema-rules (outputSchema = anyOf[success, envelope])"
RULE_TEXT = "spec/README.md#tool-table-format (text_fallback json: compact JSON of structuredContent or wrap)"
RULE_ENCODING = ("spec/README.md#text-encoders (the tool's text_encoder, plain when the contract names none: "
                 "go = the bytes of Go encoding/json; plain = compact, only what JSON requires escaped)")
RULE_ORDER = "contract.json tools[].ordering (each ordered array as declared, tie-breaks included)"
RULE_TRUNC = "spec/okf/contract/queries.md §2-3 (total counts all; at most limit; truncated = left out)"
RULE_DET = "spec/okf/contract/read.md §1.1 (one immutable snapshot: the same call gives the same answer)"


def _over_successes(ctx: CheckContext, judge: Callable[[dict[str, Any], CallOutcome], None],
                    strategy: st.SearchStrategy[dict[str, Any]] | None = None, *,
                    judges_structure: bool = True) -> None:
    """Run ``judge`` on every successful valid call; skip when the target never succeeded. A
    success without structured content fails a check that judges it: passing would say an
    order or a truncation was judged when nothing was."""
    seen = {"success": 0, "error_codes": set()}

    def test(args: dict[str, Any]) -> None:
        outcome = ctx.call(args)
        require_result(outcome)
        if outcome.is_error:
            seen["error_codes"].add((outcome.structured or {}).get("code"))
            return
        seen["success"] += 1
        if judges_structure and not isinstance(outcome.structured, dict):
            fail(f"nothing to judge: {NO_STRUCTURE}", outcome)
        judge(args, outcome)

    if strategy is None:
        for args in probe_calls(ctx):
            test(args)
    ctx.run_property(strategy or valid_calls(ctx), test)
    if not seen["success"]:
        codes = ", ".join(sorted(c for c in seen["error_codes"] if c)) or "none"
        skip(f"no successful response to check (errors seen: {codes}): no data on the target these calls fit "
             f"(a pool: --pool-fixture or --rest-url), or none of this seed's calls succeeded (try another --seed)")


@check("output_schema", RULE_OUTPUT, applies=advertised_only)
def output_schema(ctx: CheckContext) -> None:
    """Every result validates: success against the success schema, isError against the envelope."""

    def test(args: dict[str, Any]) -> None:
        outcome = ctx.call(args)
        require_result(outcome)
        problems = envelope_problems(ctx, outcome) if outcome.is_error else success_problems(ctx, outcome)
        if problems:
            fail("; ".join(problems), outcome)

    for args in probe_calls(ctx):
        test(args)
    ctx.run_property(valid_calls(ctx), test)


@check("text_fallback", RULE_TEXT, applies=advertised_only, relevant=lambda t: t.text_fallback == "json")
def text_fallback(ctx: CheckContext) -> None:
    """With text_fallback json, the text content is the structured content (or its wrapped array)."""
    tool = ctx.require_tool()

    def judge(args: dict[str, Any], outcome: CallOutcome) -> None:
        text = json_text(outcome)
        expected = outcome.structured.get(tool.wrap) if tool.wrap else outcome.structured
        if text != expected:
            what = f"structuredContent.{tool.wrap}" if tool.wrap else "structuredContent"
            fail(f"text content differs from {what}", outcome)

    _over_successes(ctx, judge)


TEXT_ENCODERS: dict[str, Callable[[str, Any], str | None]] = {
    "go": go_text_problem,
    "plain": lambda raw, value: plain_problem(raw),
}


@check("text_encoding", RULE_ENCODING, applies=advertised_only, relevant=lambda t: t.text_fallback == "json")
def text_encoding(ctx: CheckContext) -> None:
    """A json text fallback is written by the encoder the contract names for the tool (plain when
    it names none, as every contract before revision 1): judged on the bytes, not the value."""
    tool = ctx.require_tool()
    problem_of = TEXT_ENCODERS.get(tool.text_encoder)
    if problem_of is None:
        skip(f"the contract names text encoder {tool.text_encoder!r}, which this suite does not know")

    def judge(args: dict[str, Any], outcome: CallOutcome) -> None:
        if len(outcome.texts) != 1:
            return   # text_fallback judges the shape of the text content
        try:
            value = json.loads(outcome.texts[0])
        except ValueError:
            return
        problem = problem_of(outcome.texts[0], value)
        if problem:
            fail(f"text content is not {tool.text_encoder} JSON ({problem})", outcome)

    _over_successes(ctx, judge, judges_structure=False)  # the text's bytes, whatever else came


@check("result_ordering", RULE_ORDER, applies=advertised_only,
       relevant=lambda t: bool(contract_rules(t)) or t.name in ORDERINGS)
def result_ordering(ctx: CheckContext) -> None:
    """Result arrays come in the order the contract's ``ordering`` field states, tie-breaks included
    (conformance/oracles/contract_ordering.py), and in the suite's restated orders where it has one."""
    tool = ctx.require_tool()
    declared = contract_rules(tool)

    def judge(args: dict[str, Any], outcome: CallOutcome) -> None:
        problems = contract_violations(declared, outcome.structured)
        if tool.name in ORDERINGS:
            problems += ordering_violations(tool.name, outcome.structured, args, tool.wrap)
        if problems:
            fail("; ".join(problems), outcome)

    _over_successes(ctx, judge)


@check("truncation", RULE_TRUNC, applies=advertised_only, relevant=lambda t: "limit" in t.input_properties)
def truncation(ctx: CheckContext) -> None:
    """len(items) <= limit, total >= len(items), truncated == (total > len(items))."""
    tool = ctx.require_tool()
    default = tool.limits.get("limit", {}).get("default", tool.input_properties["limit"].get("default"))

    def judge(args: dict[str, Any], outcome: CallOutcome) -> None:
        problems = truncation_violations(tool.name, outcome.structured, args, default, tool.wrap)
        if problems:
            fail("; ".join(problems), outcome)

    _over_successes(ctx, judge)


@check("determinism", RULE_DET, applies=advertised_only, relevant=lambda t: t.read_only)
def determinism(ctx: CheckContext) -> None:
    """A read-only call made twice returns the same bytes."""

    def test(args: dict[str, Any]) -> None:
        first, second = ctx.call(args), ctx.call(args)
        if first.canonical_bytes() != second.canonical_bytes():
            fail("the same call answered differently the second time", second)

    ctx.run_property(valid_calls(ctx), test, max_examples=max(1, ctx.config.max_examples // 2))


@check("concurrent_calls", RULE_DET, applies=advertised_only, relevant=lambda t: t.read_only)
def concurrent_calls(ctx: CheckContext) -> None:
    """Calls in flight together on one session each get the answer they get alone."""
    tool = ctx.require_tool()

    def test(batch: list[dict[str, Any]]) -> None:
        alone = [ctx.call(args) for args in batch]
        together = ctx.call_many([(tool.name, args) for args in batch])
        for a, b in zip(alone, together):
            if a.canonical_bytes() != b.canonical_bytes():
                fail("a concurrent call answered differently from the same call alone", b)

    # three or more distinct calls in flight; a tiny input space (no arguments) falls back to repeats
    key = lambda a: json.dumps(a, sort_keys=True)  # noqa: E731
    distinct = st.one_of(
        st.lists(valid_calls(ctx), min_size=3, max_size=6, unique_by=key),
        st.lists(valid_calls(ctx), min_size=1, max_size=3, unique_by=key).map(lambda b: (b * 3)[:max(3, len(b))]),
    )
    # no shrinking: a racing batch rarely reproduces, and each attempt costs a burst of calls
    ctx.run_property(distinct, test, max_examples=max(3, ctx.config.max_examples // 4), shrink=False)
