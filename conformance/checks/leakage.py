"""No absolute path of the bundle dir in anything a server says, on errors or on success, and no
local path at all in an OKF error's messages (read.md §4.4 redacts them)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from knowspec.conformance.checks.common import advertised_only, fail, valid_calls
from knowspec.conformance.checks.registry import CheckContext, check
from knowspec.conformance.fixtures.model import Bundle, Concept
from knowspec.conformance.generate import base_arguments
from knowspec.conformance.oracles.message_paths import path_in_message
from knowspec.conformance.target import CallOutcome

RULE = "spec/okf/contract/read.md §4.4 (redaction: no local path in messages; file fields relative)"


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def leaked(outcome: CallOutcome, secrets: list[str]) -> str | None:
    """The first secret path found in the response's structured or text content."""
    said = _strings(outcome.structured) + list(outcome.texts)
    if outcome.rpc_error is not None:
        said.append(outcome.rpc_error[1])
    for secret in secrets:
        if any(secret in text for text in said):
            return secret
    return None


def error_probes(root: Path, ctx: CheckContext) -> list[str]:
    """bundle_path values that make a server talk about paths: missing, file, unclean, parse error."""
    (root / "plain-file.txt").write_text("not a bundle\n", encoding="utf-8")
    broken = Bundle("parse-error", (Concept("ok", title="fine"),),
                    extra_files={"broken.md": "---\ntype: [unclosed\n---\nbody\n",
                                 "sub/unterminated.md": "---\ntype: x\n"})
    broken_path = ctx.bundles.path_of(broken)
    link = root / "symlinked"
    if not link.exists():
        try:
            os.symlink(ctx.fill()["bundle_path"], link)
        except OSError:
            pass
    return [str(root / "no-such-bundle"), str(root / "plain-file.txt"), str(root) + "/./x/../y",
            str(root / "symlinked"), str(broken_path), str(root / "no such" / "deep" / "dir")]


def unredacted_path(outcome: CallOutcome) -> str | None:
    """A local path left in an error envelope's message or its diagnostics' messages, or None."""
    env = outcome.structured if outcome.is_error and isinstance(outcome.structured, dict) else {}
    diagnostics = env.get("diagnostics") if isinstance(env.get("diagnostics"), list) else []
    messages = [env.get("message"), *(d.get("message") for d in diagnostics if isinstance(d, dict))]
    return next((found for text in messages if isinstance(text, str) for found in [path_in_message(text)] if found),
                None)


def _saying_none_of(ctx: CheckContext, secrets: list[str], failure: str, *,
                    redacted: bool = False) -> Callable[[dict[str, Any]], None]:
    """A call of the judged tool whose answer, valid or not, must not contain any of ``secrets``;
    with ``redacted``, whose error messages hold no local path at all (another folder of the
    server's, a path the caller gave)."""
    def call(args: dict[str, Any]) -> None:
        outcome = ctx.call(args)
        if leaked(outcome, secrets):
            fail(failure, outcome)
        found = unredacted_path(outcome) if redacted else None
        if found:
            fail(f"an error message holds the local path {found[:80]!r}; read.md §4.4 redacts it", outcome)

    return call


def _and_generated_calls(ctx: CheckContext, call: Callable[[dict[str, Any]], None]) -> None:
    ctx.run_property(valid_calls(ctx), call, max_examples=max(1, ctx.config.max_examples // 3))


@check("no_path_leakage", RULE, applies=advertised_only, relevant=lambda t: "bundle_path" in t.input_properties)
def no_path_leakage(ctx: CheckContext) -> None:
    """Error messages and results never contain the absolute bundle dir path, and an OKF
    tool's error messages no local path."""
    tool = ctx.require_tool()
    root = ctx.bundles.root
    call = _saying_none_of(ctx, sorted({str(root), str(root.resolve())}, key=len, reverse=True),
                           "the response contains the absolute bundle dir path", redacted=tool.family == "okf")
    base = {k: v for k, v in ctx.fill().items() if k in tool.input_properties}
    base = {**base_arguments(tool, base), **base}
    for path in error_probes(root, ctx):
        call({**base, "bundle_path": path})
    if "concept_id" in tool.input_properties:
        call({**base, "concept_id": "no/such/concept"})
    _and_generated_calls(ctx, call)


def _pool_folders(ctx: CheckContext) -> list[str]:
    """The local folders of the run's document pools: the fixture the target was started on
    (``--pool-fixture``), or where the suite wrote the pool it imported (a target on this machine)."""
    folders = [Path(folder) for folder in (ctx.config.pool_fixture, ctx.config.pool_dir) if folder is not None]
    named = {str(f.absolute()) for f in folders} | {str(f.resolve()) for f in folders}
    # as absolute paths only ("pool" or "." as typed would be found in correct answers), and
    # long enough to be told from other words
    return sorted((f for f in named if len(f) > 4), key=len, reverse=True)


def _pool_folders_known(ctx: CheckContext) -> str | None:
    why = advertised_only(ctx)
    if why:
        return why
    return None if _pool_folders(ctx) else "no local pool folder in this run (--pool-fixture DIR names one)"


@check("no_pool_path_leakage", RULE, applies=_pool_folders_known,
       relevant=lambda t: t.family == "docpool" and "bundle_path" not in t.input_properties)
def no_pool_path_leakage(ctx: CheckContext) -> None:
    """Answers of the doc and help tools, valid or not, never contain the pool files' folder."""
    call = _saying_none_of(ctx, _pool_folders(ctx), "the response contains the absolute path of the pool's folder")
    tool = ctx.require_tool()
    for probe in ({"database": "zz-no-such-database"}, {"collection": "zz-no-such-collection"},
                  {"slug": "zz/../../no-such-topic"}):
        call({**base_arguments(tool, {}), **{k: v for k, v in probe.items() if k in tool.input_properties}})
    _and_generated_calls(ctx, call)
