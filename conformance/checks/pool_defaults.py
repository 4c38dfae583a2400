"""Input defaults on the suite's pools: leaving an argument out answers as naming its default.

Planned on each help/doc tool whose input schema gives a default the oracle can count on the
suite's pool (``oracles/pool_defaults.py``); skipped, like the pool oracles, without that pool.
"""

from __future__ import annotations

from knowspec.conformance.checks.common import fail
from knowspec.conformance.checks.pool_oracles import _answer, _pool, for_tool
from knowspec.conformance.checks.registry import CheckContext, check
from knowspec.conformance.oracles.pool_defaults import default_probes, row_keys

DEFAULT_TOOLS = ("doc_search", "help_search", "doc_entities")


def _applies(ctx: CheckContext) -> str | None:
    name = ctx.require_tool().name
    return for_tool(name, needs_help=name.startswith("help_"))["applies"](ctx)


@check("oracle_pool_defaults", "spec/docpool/contract.md §5 (input defaults: doc_search mode fts, limit 10; "
       "help_search limit 10; doc_entities limit 20)", applies=_applies, relevant=lambda t: t.name in DEFAULT_TOOLS)
def oracle_pool_defaults(ctx: CheckContext) -> None:
    """A call omitting a defaulted argument returns the same rows, in the same order, as the call naming
    the default; both return the fixture's matches cut at the limit in force."""
    run = _pool(ctx)
    tool = ctx.require_tool()
    assert run.fixture is not None
    for probe in default_probes(tool, run.fixture, run.help):
        named, named_rows = _answer(ctx, tool.name, probe.named)
        omitted, omitted_rows = _answer(ctx, tool.name, probe.omitted)
        keys, want = row_keys(tool.name, omitted_rows), row_keys(tool.name, named_rows)
        if len(named_rows) != probe.expected_count:
            fail(f"{tool.name} {probe.named}: {len(named_rows)} rows, the suite's pool holds {probe.matches} "
                 f"matches, so exactly {probe.expected_count}", named)
        if keys != want:
            fail(f"{tool.name} without {probe.argument!r} must answer as with its default "
                 f"{probe.argument}={probe.default!r}; expected {want[:25]}, got {keys[:25]}", omitted)
        if tool.name == "doc_search" and probe.argument == "mode":
            methods = sorted({str(r.get("method")) for r in omitted_rows if isinstance(r, dict)})
            if methods not in ([], ["fts"]):
                fail(f"doc_search without 'mode' is full-text search (method fts), got methods {methods}", omitted)
