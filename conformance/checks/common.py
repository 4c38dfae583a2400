"""Shared judgements used by several checks: envelope shape, success shape, meaningful inputs."""

from __future__ import annotations

import dataclasses
import json
import re
import threading
import time
from typing import Any

from hypothesis import strategies as st

from knowspec.conformance.checks.registry import CheckContext
from knowspec.conformance.contract import ContractError, load_contract
from knowspec.conformance.failures import (
    NO_ENVELOPE, NO_STRUCTURE, NO_SUCCESS_STRUCTURE, REFUSED, RPC_INSTEAD, CheckFailed,
)
from knowspec.conformance.fixtures.model import Bundle
from knowspec.conformance.fixtures.strategies import (
    cafe_bundle, markup_bundle, neighbors_bundle, sources_bundle, wide_bundle,
)
from knowspec.conformance.generate import arguments, base_arguments, validator
from knowspec.conformance.target import CallOutcome

MAX_INPUT_DIAGNOSTICS = 8
INPUT_ERROR_CODES = frozenset({"schema_validation", "resource_limit"})
NOT_IMPLEMENTED = "not_implemented"  # spec/errors.toml: any tool of either family may answer it


SCORE_TOLERANCE = 1e-9  # relative: another implementation may round the last bits of a score differently


def score_differs(got: Any, want: float) -> bool:
    """Whether ``got`` is not a number within ``SCORE_TOLERANCE`` (relative) of ``want``."""
    return not isinstance(got, (int, float)) or isinstance(got, bool) or abs(got - want) > SCORE_TOLERANCE * abs(want)


def schema_errors(schema: dict[str, Any], value: Any, limit: int = 3) -> list[str]:
    errors = sorted(validator(schema).iter_errors(value), key=lambda e: list(e.absolute_path))
    return [f"/{'/'.join(map(str, e.absolute_path))}: {e.message[:160]}" for e in errors[:limit]]


def advertised_only(ctx: CheckContext) -> str | None:
    tool = ctx.require_tool()
    if not ctx.is_advertised(tool.name):
        return f"{tool.name} is not advertised by the target (reported by tools_list, or as a skipped area)"
    return None


def envelope_problems(ctx: CheckContext, outcome: CallOutcome) -> list[str]:
    """An isError result must carry a schema-valid envelope with a code the tool may return."""
    env = outcome.structured
    if env is None:
        return [NO_ENVELOPE]
    problems = schema_errors(ctx.contract.error_schema, env)
    if problems:
        return ["envelope does not match the error schema: " + "; ".join(problems)]
    tool = ctx.require_tool()
    code = env["code"]
    if code == NOT_IMPLEMENTED:  # honest, and still not the contract: every listed tool is to work
        return [f"{tool.name} answers {NOT_IMPLEMENTED}: the target lists the tool but does not implement it"]
    if tool.errors and code not in tool.errors:
        problems.append(f"error code {code!r} is not among the tool's contract errors {sorted(tool.errors)}")
    default = ctx.contract.retryable(code)
    if default is False and env["retryable"]:
        problems.append(f"{code} must not be retryable")
    if not outcome.texts:
        problems.append("isError result has no text content")
    elif tool.family == "okf" and list(outcome.texts) != [env["message"]] and not _rejection_report(tool.name, env,
                                                                                                  outcome.texts):
        problems.append("an OKF error's content must be one text item equal to its message (read.md §4.1)")
    return problems


def _rejection_report(tool: str, env: dict[str, Any], texts: tuple[str, ...]) -> bool:
    """The two OKF errors whose text is a report, not the message: write_concept's validation
    rejection (write.md §1.4, ``{"status":"rejected",...}``) and a bundle that does not parse
    (read.md §4.3, ``{"status":"error","diagnostics":[...]}``), both ``operation_rejected``."""
    if env.get("code") != "operation_rejected" or len(texts) != 1:
        return False
    try:
        report = json.loads(texts[0])
    except ValueError:
        return False
    status = report.get("status") if isinstance(report, dict) else None
    return status == "error" or (status == "rejected" and tool == "write_concept")


def success_problems(ctx: CheckContext, outcome: CallOutcome) -> list[str]:
    tool = ctx.require_tool()
    if not isinstance(outcome.structured, dict):
        return [NO_SUCCESS_STRUCTURE]
    problems = schema_errors(tool.success_schema, outcome.structured)
    if problems:
        return ["structuredContent does not match the success schema: " + "; ".join(problems)]
    return []   # the output schema is anyOf[success, envelope]: valid success is valid output


def require_result(outcome: CallOutcome) -> None:
    """Tool failures are isError results, never JSON-RPC errors."""
    if outcome.rpc_error is not None:
        code, message = outcome.rpc_error
        raise CheckFailed(f"JSON-RPC error {code} {RPC_INSTEAD}: {message[:200]}",
                          arguments=outcome.arguments, response=outcome.summary())


def fail(message: str, outcome: CallOutcome) -> None:
    raise CheckFailed(message, arguments=outcome.arguments, response=outcome.summary())


def said(outcome: CallOutcome) -> str:
    """The target's error code and message, shortened: the reason a user acts on (e.g. a server
    that reads no bundle outside its roots) belongs on the console, not only in the reports."""
    error = outcome.structured if isinstance(outcome.structured, dict) else {}
    message = error.get("message") or " ".join(outcome.texts)
    text = f"{error.get('code')}: {message}" if message else str(error.get("code"))
    return text if len(text) <= 200 else text[:199] + "…"


def unsuccessful(outcome: CallOutcome) -> str | None:
    """Why a call meant to succeed gave no success to judge (its error, or a success without
    structured content), or None: a failure message must say which of the two it was."""
    if outcome.is_error:
        return f"{REFUSED} ({said(outcome)})"
    if not isinstance(outcome.structured, dict):
        return NO_STRUCTURE
    return None


# ---- meaningful valid inputs ------------------------------------------------------------------

FIXED_QUERIES = ("needle", "e", "a", "café", "CAFE\u0301", "title", "zz-no-match", "data", "table")


def fixture_bundles(ctx: CheckContext) -> list[Bundle]:
    """The fixed bundles valid calls point at; a writing tool gets its own copies."""
    fixtures = [neighbors_bundle(), wide_bundle(30, "wide30"), markup_bundle(), cafe_bundle(), sources_bundle()]
    tool = ctx.require_tool()
    if not tool.read_only:
        fixtures = [Bundle(f"{b.name}-{tool.name}", b.concepts) for b in fixtures]
    return fixtures


def probe_calls(ctx: CheckContext) -> list[dict[str, Any]]:
    """A few fixed, schema-valid calls on rich fixtures (many hits, edges, sources) run before fuzzing."""
    tool = ctx.require_tool()
    props = tool.input_properties
    check = validator(tool.input_schema)
    calls: list[dict[str, Any]] = []
    extras: list[dict[str, Any]] = []
    if tool.family == "docpool":
        extras = help_probe_values(ctx) if tool.name.startswith("help_") else pool_probe_values(ctx)
    else:
        for bundle in fixture_bundles(ctx):
            for query, concept_id in (("needle", sorted(bundle.ids)[0]), ("e", sorted(bundle.ids)[-1])):
                extras.append({"bundle_path": str(ctx.bundles.path_of(bundle)), "query": query,
                               "concept_id": concept_id})
    for extra in extras:
        args = base_arguments(tool, {})
        args.update({k: v for k, v in extra.items() if k in props and v is not None})
        if check.is_valid(args) and args not in calls:
            calls.append(args)
    if tool.family == "docpool" and calls:  # each choice of a string enum (doc_search's mode ...) once
        for name, schema in props.items():
            for value in schema.get("enum") or ():
                args = {**calls[0], name: value}
                if isinstance(value, str) and check.is_valid(args) and args not in calls:
                    calls.append(args)
    return calls + [args for args in success_probes(ctx) if check.is_valid(args)]


PROBE_FRONTMATTER = "type: concept\ntitle: Conformance probe\n"


def success_probes(ctx: CheckContext, per_tool: int = 3) -> list[dict[str, Any]]:
    """Calls built to succeed on a writing tool, which generated values almost never do:
    a new concept with minimal frontmatter for a concept writer (its ID holds ``&``); a patch of
    the markup fixture for a patch preview and its apply; for an ``apply_X`` tool, the
    arguments of a successful ``preview_X`` on a fresh fixture copy plus the revision and plan
    digest that preview answered (the contract's preview-then-apply flow)."""
    tool = ctx.require_tool()
    props = tool.input_properties
    if tool.family == "okf" and tool.name.startswith("preview_"):
        probes = [{**args, "bundle_path": str(ctx.bundles.path_of(bundle, fresh=True))}
                  for args, bundle in _preview_probes(tool)]
        return [args for args in probes if validator(tool.input_schema).is_valid(args)]
    if tool.family != "okf" or tool.read_only or "bundle_path" not in props:
        return []
    if {"concept_id", "frontmatter", "body"} <= set(props):
        return [{"bundle_path": str(ctx.bundles.path_of(bundle, fresh=True)), "concept_id": f"conform-probe-{i}&co",
                 "frontmatter": PROBE_FRONTMATTER, "body": "Written by the conformance suite.\n"}
                for i, bundle in enumerate(fixture_bundles(ctx)[:per_tool])]
    if not tool.name.startswith("apply_"):
        return []
    name = "preview_" + tool.name[len("apply_"):]
    try:   # the run may be narrowed to the apply tool alone (--tool): read the preview from the file
        preview = ctx.contract.tool(name)
    except KeyError:
        try:
            preview = load_contract(ctx.config.contract_path).tool(name)
        except (KeyError, ContractError):
            return []
    previewing = dataclasses.replace(ctx, tool=preview, notes=[])
    probes: list[dict[str, Any]] = []
    drawn = [(args, next((b for b in fixture_bundles(ctx) if b.name.startswith(args["bundle_path"][len(PLACEHOLDER):])),
                         None)) for args in raw_valid_examples(previewing)
             if isinstance(args.get("bundle_path"), str) and args["bundle_path"].startswith(PLACEHOLDER)]
    for args, bundle in _preview_probes(preview) + drawn:
        if len(probes) >= per_tool:
            break
        if bundle is None:
            continue
        args = {**args, "bundle_path": str(ctx.bundles.path_of(bundle, fresh=True))}
        outcome = ctx.call(args, name=preview.name)
        answer = outcome.structured if outcome.is_result and not outcome.is_error else None
        if not isinstance(answer, dict) or not answer.get("plan_digest"):
            continue
        applied = {k: v for k, v in args.items() if k in props}
        for name in [*tool.required_inputs, *(["expected_plan_digest"] if "expected_plan_digest" in props else [])]:
            if name not in applied and name.endswith("revision"):
                applied[name] = answer.get("base_revision")
            elif name not in applied and name.endswith("plan_digest"):
                applied[name] = answer.get("plan_digest")
            elif name not in applied and name == "expected_source":
                applied[name] = answer.get("source")
        if "proof" in props and answer.get("proof") is not None:
            applied["proof"] = answer["proof"]
        probes.append(applied)
    ctx.fixture_seconds += previewing.fixture_seconds
    return probes


def _preview_probes(preview: Any) -> list[tuple[dict[str, Any], Bundle]]:
    """Previews known to succeed on the markup fixtures, whose paths and diffs hold ``&`` and ``<``
    (the characters the text encoders write differently): a lifecycle patch, a v0.1 migration."""
    props = set(preview.input_properties)
    if {"actor", "operations"} <= props:
        return [({"bundle_path": "", "actor": "human:conform", "operations": [
            {"kind": "set_lifecycle", "concept_id": "r&d", "lifecycle": {"status": "deprecated", "stale_after": None}}]},
            markup_bundle())]
    if {"timestamp_policy", "citation_mappings"} <= props:
        legacy = Bundle("markup-v01", tuple(dataclasses.replace(c, sources=()) for c in markup_bundle().concepts),
                        okf_version="0.1")
        return [({"bundle_path": "", "timestamp_policy": "preserve", "citation_mappings": [], "generated_by": "human:conform",
                  "generated_at": [{"concept_id": "r&d", "at": "2025-01-02T03:04:05Z"}]}, legacy)]
    return []


def pool_probe_values(ctx: CheckContext, per_kind: int = 6) -> list[dict[str, Any]]:
    """Argument values discovered from the target's own document pool (no pool of ours exists
    there): entity kinds and keys from ``doc_entities``, and title words as queries, so that
    searches, links and lookups return results the ordering and truncation oracles can judge."""
    if not ctx.is_advertised("doc_entities"):
        return []
    kinds = ctx.call({}, name="doc_entities")
    if kinds.is_error or not isinstance(kinds.structured, dict):
        return []
    values: list[dict[str, Any]] = []
    for row in (kinds.structured.get("results") or [])[:4]:
        listed = ctx.call({"kind": row.get("kind"), "limit": per_kind}, name="doc_entities")
        if listed.is_error or not isinstance(listed.structured, dict):
            continue
        for entity in listed.structured.get("results") or []:
            words = re.findall(r"\w{3,}", str(entity.get("title") or ""))
            kind, key = entity.get("kind"), entity.get("key")
            values.append({"kind": kind, "key": key, "query": words[0] if words else None,
                           "form_class": key if kind == "form_class" else None,
                           "islem_kodu": key if kind == "islem_kodu" else None,
                           "module": key if kind == "module" else None})
    return values


MAX_HELP_SEARCHES = 12


def help_probe_values(ctx: CheckContext, searches: int = MAX_HELP_SEARCHES) -> list[dict[str, Any]]:
    """Argument values discovered from the target's own help pool, which no suite fixture can
    fill (IMPORTDOC writes document pools only): ``help_search`` from the words of its collection
    titles (``help_stats``), then from the words of the hits it found (the fixed queries when
    those run out), up to ``searches`` searches. Each hit gives a slug with its module and the
    query that found it, and its form class on its own. The same target always yields the same
    values, so the help tools' success shapes are judged on every run, not only on runs whose
    generated or document-pool names happened to exist in the help pool."""
    if not ctx.is_advertised("help_search"):
        return []
    queries: list[str] = []
    if ctx.is_advertised("help_stats"):
        stats = ctx.call({}, name="help_stats")
        if not stats.is_error and isinstance(stats.structured, dict):
            for collection in (stats.structured.get("collections") or {}).values():
                if isinstance(collection, dict):
                    queries += re.findall(r"\w{3,}", str(collection.get("title") or ""))
    fallback = list(FIXED_QUERIES)  # asked only when the words found so far run out
    asked: set[str] = set()
    values: list[dict[str, Any]] = []
    while (queries or fallback) and len(asked) < searches:
        query = queries.pop(0) if queries else fallback.pop(0)
        if query in asked:
            continue
        asked.add(query)
        found = ctx.call({"query": query}, name="help_search")
        if found.is_error or not isinstance(found.structured, dict):
            continue
        for hit in found.structured.get("results") or []:
            if not isinstance(hit, dict):
                continue
            values.append({"query": query, "slug": hit.get("slug"), "module": hit.get("module")})
            if hit.get("form_class"):
                values.append({"form_class": hit["form_class"]})
            queries += [w for w in re.findall(r"\w{4,}", f"{hit.get('title') or ''} {hit.get('snippet') or ''}")
                        if w not in asked and w not in queries]
    return values


PLACEHOLDER = "\x00fixture:"   # stands for a fixture bundle's path until a worker resolves it


def overrides(ctx: CheckContext) -> st.SearchStrategy[dict[str, Any]]:
    """Values for well-known argument names that point the call at fixture data.

    A ``None`` value means "keep the generated value" (so generated queries still run). The
    bundle path is a placeholder naming the fixture; :func:`resolve` turns it into this worker's path.
    """
    fixtures = fixture_bundles(ctx)

    def for_bundle(bundle: Any) -> st.SearchStrategy[dict[str, Any]]:
        ids = sorted(bundle.ids) + ["missing"]
        return st.fixed_dictionaries({
            "bundle_path": st.just(PLACEHOLDER + bundle.name),
            "query": st.one_of(st.sampled_from(FIXED_QUERIES), st.none()),
            "concept_id": st.one_of(st.sampled_from(ids), st.none()),
        })

    return st.sampled_from(fixtures).flatmap(for_bundle)


def _generated_valid_calls(ctx: CheckContext) -> st.SearchStrategy[dict[str, Any]]:
    tool = ctx.require_tool()
    check = validator(tool.input_schema)
    props = tool.input_properties

    def merge(pair: tuple[dict[str, Any], dict[str, Any]]) -> dict[str, Any]:
        generated, extra = pair
        out = dict(generated)
        for key, value in extra.items():
            if value is not None and key in props and (key in generated or key == "bundle_path"):
                out[key] = value
        return out

    return st.tuples(arguments(tool, "positive"), overrides(ctx)).map(merge).filter(check.is_valid)


_EXAMPLES: dict[tuple[str, str, int, int], list[dict[str, Any]]] = {}
_EXAMPLES_LOCK = threading.Lock()
_KEY_LOCKS: dict[tuple[str, str, int, int], threading.Lock] = {}


def valid_examples(ctx: CheckContext) -> list[dict[str, Any]]:
    """The run's schema-valid calls for this tool, generated once per process and shared by every
    check (generation, not the target, is the costly part): ``max_examples`` of them, seeded."""
    return [resolve(ctx, args) for args in raw_valid_examples(ctx)]


def raw_valid_examples(ctx: CheckContext) -> list[dict[str, Any]]:
    """:func:`valid_examples` with fixture placeholders left in (shared by every worker)."""
    tool = ctx.require_tool()
    key = (tool.name, json.dumps(tool.input_schema, sort_keys=True), ctx.config.seed, ctx.config.max_examples)
    with _EXAMPLES_LOCK:
        lock = _KEY_LOCKS.setdefault(key, threading.Lock())
    with lock:
        if key not in _EXAMPLES:
            start = time.monotonic()
            drawn: list[dict[str, Any]] = []
            ctx.run_property(_generated_valid_calls(ctx), drawn.append, shrink=False, honour_deadline=False)
            _EXAMPLES[key] = drawn
            ctx.fixture_seconds += time.monotonic() - start
    return _EXAMPLES[key]


def resolve(ctx: CheckContext, args: dict[str, Any]) -> dict[str, Any]:
    """Replace a fixture placeholder by the fixture's path in this context's bundle dir."""
    path = args.get("bundle_path")
    if not (isinstance(path, str) and path.startswith(PLACEHOLDER)):
        return args
    name = path[len(PLACEHOLDER):]
    bundle = next(b for b in fixture_bundles(ctx) if b.name == name)
    return {**args, "bundle_path": str(ctx.bundles.path_of(bundle))}


def valid_calls(ctx: CheckContext) -> st.SearchStrategy[dict[str, Any]]:
    """Schema-valid arguments aimed at fixture data (``bundle_path`` always points at one),
    drawn from :func:`valid_examples` so that every check sees the same calls."""
    examples = valid_examples(ctx)
    if not examples:
        return _generated_valid_calls(ctx).map(lambda args: resolve(ctx, args))
    return st.sampled_from(examples)


def json_text(outcome: CallOutcome) -> Any:
    if len(outcome.texts) != 1:
        fail(f"expected exactly one text content item, got {len(outcome.texts)}", outcome)
    try:
        return json.loads(outcome.texts[0])
    except json.JSONDecodeError:
        fail("text content is not JSON although the tool's text fallback is json", outcome)
