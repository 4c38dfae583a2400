"""The imported document-pool fixture: the import step, and checks that judge the target on it.

With ``--rest-url`` and admin credentials the runner calls :func:`prepare_pool` before any check:
it logs in, writes the fixture pool (``pool_fixture.py``) into the pool dir and imports its two
collections through IMPORTDOC. The checks then compare the target's answers with answers computed
here from the fixture by the seed's rules (spec/docpool/contract.md §3), never from the target.
Without those options nothing is imported: the doc-tool checks read the target's own pool and
these checks skip, naming that mode.
"""

from __future__ import annotations

import json

import secrets
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knowspec.conformance.checks.common import fail, require_result, schema_errors, unsuccessful
from knowspec.conformance.checks.registry import CheckContext, check, holds_family, skip
from knowspec.conformance.checks.rest import EXEC, LOGIN, post
from knowspec.conformance.config import RunConfig
from knowspec.conformance.contract import Contract
from knowspec.conformance.failures import CheckFailed
from knowspec.conformance.pool_fixture import HERKES, Entity, PoolFixture, Topic, ascii_lower, fold, generate, tokens
from knowspec.conformance.target import CallOutcome, Target, TargetError, connect

SEED = "spec/docpool/contract.md"
RULE_IMPORT = f"{SEED} §3 (200 {{result: true, collection, topics, chunks, docsDb, source}})"
RULE_ANSWERS = f"{SEED} §5 (doc_get, doc_entity, doc_links, doc_search fts, doc_entities, doc_stats on the fixture)"
RULE_ACL = f"{SEED} §4 (erisim herkes, or an ACL principal in {{user, roles..., *}}; stdio sees all)"
RULE_REFUSALS = f"{SEED} §3 (400 for a missing param; 202 result false for a bad name, absent collection or file)"
RULE_NON_ADMIN = f"{SEED} §3 (IMPORTDOC is SYSADMIN only)"
LOGOUT, DOC_GET = "/ClientREST/Logout", "/ClientREST/DocGet"
ANONYMOUS = frozenset({"*"})
COUNT_NAMES = ("topic", "chunk", "topic_vec", "chunk_vec", "entity", "entity_rel", "alias", "link", "acl")


# ---- the import step ------------------------------------------------------------------------

@dataclass(frozen=True)
class Session:
    token: str
    user: str
    roles: tuple[str, ...]
    database: str | None

    @property
    def principals(self) -> frozenset[str]:
        return frozenset(ascii_lower(p) for p in (self.user, *self.roles, "*") if p)


@dataclass
class PoolRun:
    """What this run did about the document-pool fixture; ``mode``: imported | failed | discovered."""

    mode: str
    note: str
    fixture: PoolFixture | None = None
    database: str | None = None
    source: Path | None = None
    answers: dict[str, tuple[int, Any]] = field(default_factory=dict)
    before: dict[str, Any] | None = None       # doc_stats before the import (None: not available)
    admin: Session | None = None
    help: PoolFixture | None = None            # the help pool's facts (only with --pool-fixture)
    wrote_source: bool = False                 # the suite wrote ``source`` (removed when the run ends)


POOL_CHECKS = ("docpool_import", "docpool_import_answers", "docpool_import_acl", "docpool_import_refusals",
               "docpool_import_non_admin")
FIXTURE_CHECK_PREFIX = "oracle_"


def login(config: RunConfig, user: str, password: str, database: str | None) -> tuple[Session | None, Any]:
    """A REST session, or ``None`` with the HTTP answer that refused it."""
    body: dict[str, Any] = {"user": user, "password": password}
    if database:
        body["database"] = database
    try:
        status, answer = post(config.rest_url or "", LOGIN, body, timeout=config.call_timeout)
    except CheckFailed as exc:
        return None, exc.message
    if status != 200 or not isinstance(answer, dict) or not answer.get("token"):
        return None, {"status": status, "body": answer}
    return Session(answer["token"], str(answer.get("user") or user), tuple(answer.get("roles") or ()),
                   answer.get("database")), answer


def importdoc(config: RunConfig, token: str | None, params: dict[str, Any]) -> tuple[int, Any]:
    return post(config.rest_url or "", EXEC, {"command": "IMPORTDOC", "params": params}, token, config.call_timeout)


def prepare_pool(config: RunConfig, target: Target, contract: Contract, check_ids: list[str], root: Path) -> PoolRun:
    """Generate and import the fixture pool when the run can and needs to; never raises."""
    if config.family == "okf" or not any(t.family == "docpool" for t in contract.tools) \
            or not (set(check_ids) & set(POOL_CHECKS) or any(c.startswith(FIXTURE_CHECK_PREFIX) for c in check_ids)):
        return PoolRun("discovered", "this run checks no document-pool tool with the fixture")
    if config.pool_fixture is not None:
        return _written_fixture(config)
    if not (config.rest_url and config.admin_user and config.admin_password):
        return PoolRun("discovered", "no --rest-url with --admin-user/--admin-password: the doc checks read "
                                     "the target's own pool")
    admin, answer = login(config, config.admin_user, config.admin_password, config.pool_database)
    if admin is None:
        return PoolRun("failed", f"admin login refused: {answer}")
    database = config.pool_database or admin.database
    if not database:
        return PoolRun("failed", "the admin session names no database: pass --pool-database", admin=admin)
    before = _stats_before(target, database, config.call_timeout)
    token = config.pool_token or secrets.token_hex(4)
    try:
        fixture = generate(config.seed, token, (before or {}).get("meta"))
        source = fixture.write((Path(config.pool_dir) if config.pool_dir else root).absolute()
                               / f"{fixture.open_id}.db")
    except (OSError, ValueError, sqlite3.Error) as exc:
        return PoolRun("failed", f"cannot write the fixture pool: {exc}", database=database, admin=admin)
    run = PoolRun("imported", f"imported {fixture.open_id} and {fixture.restricted_id} into {database}",
                  fixture, database, source, before=before, admin=admin, wrote_source=True)
    for collection in (fixture.open_id, fixture.restricted_id):
        try:
            run.answers[collection] = importdoc(config, admin.token,
                                                {"database": database, "collection": collection, "path": str(source)})
        except CheckFailed as exc:
            run.answers[collection] = (0, exc.message)
    bad = [c for c, (status, body) in run.answers.items()
           if status != 200 or not isinstance(body, dict) or body.get("result") is not True]
    if bad:
        run.mode, run.note = "failed", f"IMPORTDOC did not import {', '.join(bad)}"
    return run


def _written_fixture(config: RunConfig) -> PoolRun:
    """--pool-fixture DIR: the target was started on the suite's pools; nothing is imported."""
    from knowspec.conformance.fixtures.pools import load_fixture

    try:
        written = load_fixture(Path(config.pool_fixture))
    except (OSError, ValueError, KeyError) as exc:
        return PoolRun("failed", f"cannot read the pool fixture {config.pool_fixture}: {exc}")
    return PoolRun("fixture", f"the target serves the pool fixture (seed {written.seed}) as {written.database}",
                   written.docs, written.database, written.directory / "docs.db", before={"counts": {}},
                   help=written.help)


def release_pool(config: RunConfig) -> None:
    """End the admin session and remove the source pool the suite wrote for IMPORTDOC (the
    imported collections stay: the pool is the operator's)."""
    run = config.pool
    if not isinstance(run, PoolRun):
        return
    if run.admin is not None and config.rest_url:
        try:
            post(config.rest_url, LOGOUT, {}, run.admin.token, config.call_timeout)
        except CheckFailed:
            pass
    if run.wrote_source and run.source is not None:
        run.source.unlink(missing_ok=True)


def _stats_before(target: Target, database: str, timeout: float) -> dict[str, Any] | None:
    try:
        with connect(target) as conn:
            outcome = conn.call("doc_stats", {"database": database}, timeout)
    except TargetError:
        return None
    ok = outcome.is_result and not outcome.is_error and isinstance(outcome.structured, dict)
    return outcome.structured if ok else None


# ---- the seed's rules over the fixture --------------------------------------------------------

def allowed(fx: PoolFixture, topic: Topic, principals: frozenset[str] | None) -> bool:
    """``None`` principals: an unrestricted (stdio) caller."""
    if principals is None or fx.collection(topic.collection).erisim == HERKES:
        return True
    return any(ascii_lower(p) in principals for p in topic.acl)


def mcp_principals(ctx: CheckContext) -> frozenset[str] | None:
    """A stdio caller sees everything; an HTTP MCP caller what its session's principals may
    (without a session, or with a token of unknown identity, only what ``*`` may)."""
    if ctx.conn.target.is_stdio:
        return None
    return ctx.config.mcp_principals or ANONYMOUS


def same_key(a: str, b: str) -> bool:
    return ascii_lower(a) == ascii_lower(b)


def linked(fx: PoolFixture, kind: str, key: str, principals: frozenset[str] | None) -> list[dict[str, Any]]:
    """doc_links: allowed topics linked to (kind, key), confidence descending, then collection, slug."""
    rows = [(t, l) for t in fx.topics for l in t.links
            if l.kind == kind and same_key(l.key, key) and allowed(fx, t, principals)]
    rows.sort(key=lambda r: (-r[1].confidence, r[0].collection, r[0].slug))
    return [{"collection": t.collection, "slug": t.slug, "title": t.title, "breadcrumb": t.breadcrumb,
             "confidence": l.confidence, "source": l.source} for t, l in rows]


def topic_view(topic: Topic) -> dict[str, Any]:
    """doc_get without ``related`` (checked as a set): links confidence descending, then kind, key."""
    links = sorted(topic.links, key=lambda l: (-l.confidence, l.kind, l.key))
    return {"collection": topic.collection, "slug": topic.slug, "title": topic.title,
            "breadcrumb": topic.breadcrumb, "category": topic.category, "description": topic.description,
            "source_uri": topic.source_uri, "mime": topic.mime, "mtime": topic.mtime, "body_md": topic.body_md,
            "links": [{"kind": l.kind, "key": l.key, "confidence": l.confidence, "source": l.source} for l in links]}


def related(fx: PoolFixture, topic: Topic, principals: frozenset[str] | None) -> set[tuple[str, str]]:
    """Other allowed topics linked to one of the topic's form_class / islem_kodu entities."""
    mine = {(l.kind, ascii_lower(l.key)) for l in topic.links if l.kind in ("form_class", "islem_kodu")}
    return {(t.collection, t.slug) for t in fx.topics if t != topic and allowed(fx, t, principals)
            and any((l.kind, ascii_lower(l.key)) in mine for l in t.links)}


UNORDERED_ENTITY_LISTS = ("relations_in",)  # spec/docpool/tools.toml doc_entity orders relations and aliases only


def entity_differences(want: dict[str, Any], got: dict[str, Any]) -> dict[str, Any]:
    """The fields of a doc_entity answer that differ from ``want`` (``got``'s values), lists whose
    order the contract leaves open compared as multisets."""
    def comparable(key: str, value: Any) -> Any:
        if key in UNORDERED_ENTITY_LISTS and isinstance(value, list):
            return sorted(value, key=lambda item: json.dumps(item, sort_keys=True))
        return value

    return {k: got.get(k) for k in want if comparable(k, got.get(k)) != comparable(k, want[k])}


def entity_view(fx: PoolFixture, e: Entity, principals: frozenset[str] | None) -> dict[str, Any]:
    """doc_entity: relations by rel, kind, key; aliases by confidence descending, then alias."""
    by_rel = lambda r: (r["rel"], r["kind"], r["key"])  # noqa: E731
    out = sorted(({"rel": r.rel, "kind": r.to_kind, "key": r.to_key} for r in fx.relations
                  if r.from_kind == e.kind and same_key(r.from_key, e.key)), key=by_rel)
    into = sorted(({"rel": r.rel, "kind": r.from_kind, "key": r.from_key} for r in fx.relations
                   if r.to_kind == e.kind and same_key(r.to_key, e.key)), key=by_rel)
    aliases = sorted(({"alias": a.alias, "confidence": a.confidence} for a in fx.aliases
                      if a.kind == e.kind and same_key(a.key, e.key)), key=lambda a: (-a["confidence"], a["alias"]))
    kind = fx.kind_of(e)
    url = None
    if kind is not None and kind.url_template:
        url = kind.url_template.replace("<key>", e.key).replace("<v3>", fx.collection(e.collection).help_url_v3 or "")
    return {"collection": e.collection, "kind": e.kind, "key": e.key, "title": e.title, "attrs": e.attrs,
            "relations": out, "relations_in": into, "aliases": aliases,
            "topics": len(linked(fx, e.kind, e.key, principals)), "help_url": url}


def expected_counts(fx: PoolFixture, principals: frozenset[str] | None) -> dict[str, int]:
    """What the import adds to doc_stats counts: topic-bound rows only for allowed topics."""
    seen = [t for t in fx.topics if allowed(fx, t, principals)]
    chunks = sum(len(t.chunks) for t in seen)   # vectors: none, unless the fixture's server embedded them
    return {"topic": len(seen), "chunk": chunks, "topic_vec": len(seen) if fx.vectors else 0,
            "chunk_vec": chunks if fx.vectors else 0, "entity": len(fx.entities), "entity_rel": len(fx.relations), "alias": len(fx.aliases),
            "link": sum(len(t.links) for t in seen), "acl": sum(len(t.acl) for t in seen)}


def unique_prefix(fx: PoolFixture, topic: Topic) -> str | None:
    """The shortest prefix (3+ characters) of the topic's word that no other token of its collection starts with."""
    word = fold(topic.word)
    others = {tok for t in fx.topics_in(topic.collection)
              for text in (t.title, *(c.heading for c in t.chunks), *(c.body for c in t.chunks))
              for tok in tokens(text) if tok != word}
    for n in range(3, len(word)):
        if not any(o.startswith(word[:n]) for o in others):
            return word[:n]
    return None


# ---- calling the target -----------------------------------------------------------------------

def _run(ctx: CheckContext) -> PoolRun:
    run = ctx.config.pool
    assert isinstance(run, PoolRun) and run.fixture is not None
    return run


def _imported(ctx: CheckContext) -> str | None:
    run = ctx.config.pool
    if not isinstance(run, PoolRun):
        return "no document-pool fixture in this run"
    if run.mode not in ("imported", "fixture"):
        return f"document-pool fixture {run.mode}: {run.note}"
    return None


def _imported_by_rest(ctx: CheckContext) -> str | None:
    reason = _imported(ctx)
    if reason is None and ctx.config.pool.admin is None:
        return "the pool fixture was not imported through REST: no admin session"
    return reason


def _attempted(ctx: CheckContext) -> str | None:
    run = ctx.config.pool
    if not isinstance(run, PoolRun):
        return "no document-pool fixture in this run"
    if run.mode == "fixture":
        return "the target was started on the pool fixture: nothing was imported"
    return f"document-pool fixture {run.mode}: {run.note}" if run.mode == "discovered" else None


def call(ctx: CheckContext, tool: str, args: dict[str, Any]) -> CallOutcome:
    if not ctx.is_advertised(tool):
        skip(f"{tool} is not advertised by the target")
    outcome = ctx.call(ctx.fitted(tool, {**args, "database": _run(ctx).database}), name=tool)
    require_result(outcome)
    return outcome


def success_data(outcome: CallOutcome, failure: str) -> Any:
    """A successful result's structuredContent (``results`` unwrapped); anything else fails."""
    why = unsuccessful(outcome)
    if why:
        fail(f"{failure}: {why}", outcome)
    data = outcome.structured
    return data["results"] if set(data) == {"results"} else data


def answer(ctx: CheckContext, tool: str, args: dict[str, Any]) -> tuple[CallOutcome, Any]:
    outcome = call(ctx, tool, args)
    return outcome, success_data(outcome, f"{tool} on imported fixture data")


def expect(ok: bool, message: str, outcome: CallOutcome, expected: Any = None) -> None:
    if not ok:
        fail(message if expected is None else f"{message}; expected {_short(expected)}", outcome)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 600 else text[:600] + "..."


# ---- checks ------------------------------------------------------------------------------------

@check("docpool_import", RULE_IMPORT, scope="server", applies=_attempted, planned=holds_family("docpool"))
def docpool_import(ctx: CheckContext) -> None:
    """IMPORTDOC of each fixture collection answers 200 result true with the generated topic and chunk counts."""
    run = ctx.config.pool
    if run.fixture is None:
        raise CheckFailed(f"the fixture was not imported: {run.note}")
    fx = run.fixture
    for collection in (fx.open_id, fx.restricted_id):
        status, body = run.answers.get(collection, (0, "not attempted"))
        request = {"command": "IMPORTDOC", "params": {"database": run.database, "collection": collection,
                                                      "path": str(run.source)}}
        response = {"status": status, "body": body}
        if status != 200 or not isinstance(body, dict) or body.get("result") is not True:
            said = body.get("message") if isinstance(body, dict) else body
            said = f" ({str(said)[:200]})" if said else ""
            raise CheckFailed(f"IMPORTDOC of {collection}: HTTP {status}, expected 200 result true{said}",
                              arguments=request, response=response)
        want = {"collection": collection, "topics": len(fx.topics_in(collection)), "chunks": fx.chunk_count(collection)}
        got = {k: body.get(k) for k in want}
        if got != want:
            raise CheckFailed(f"IMPORTDOC of {collection} answered {got}, the source holds {want}",
                              arguments=request, response=response)
        missing = [k for k in ("docsDb", "source") if k not in body]
        if missing:
            raise CheckFailed(f"IMPORTDOC success lacks {', '.join(missing)}", arguments=request, response=response)


@check("docpool_import_answers", RULE_ANSWERS, scope="server", applies=_imported, planned=holds_family("docpool"))
def docpool_import_answers(ctx: CheckContext) -> None:
    """doc_* answers on the imported collections equal the answers computed from the generated rows."""
    run, principals = _run(ctx), mcp_principals(ctx)
    fx = run.fixture
    _check_topics(ctx, fx, principals)
    _check_entities(ctx, fx, principals)
    _check_search(ctx, fx, principals)
    _check_listings(ctx, fx, principals)
    _check_stats(ctx, run, principals)


def _check_topics(ctx: CheckContext, fx: PoolFixture, principals: frozenset[str] | None) -> None:
    for topic in fx.topics_in(fx.open_id):
        outcome, got = answer(ctx, "doc_get", {"collection": topic.collection, "slug": topic.slug})
        want = topic_view(topic)
        diff = {k: got.get(k) for k in want if got.get(k) != want[k]}
        expect(not diff, f"doc_get {topic.slug}: {sorted(diff)} differ from the imported topic", outcome,
               {k: want[k] for k in diff})
        rel = {(r.get("collection"), r.get("slug")) for r in got.get("related") or []}
        wanted = related(fx, topic, principals)
        ok = rel == wanted if len(wanted) <= 10 else (rel <= wanted and len(rel) == 10)
        expect(ok, f"doc_get {topic.slug}: related topics {sorted(rel)} are not the other allowed topics "
                   "linked to its form_class / islem_kodu", outcome, sorted(wanted))


def _check_entities(ctx: CheckContext, fx: PoolFixture, principals: frozenset[str] | None) -> None:
    for i, e in enumerate(fx.entities):
        typed = (e.key.upper(), e.key.lower(), e.key.swapcase())[i % 3]
        outcome, got = answer(ctx, "doc_entity", {"kind": e.kind, "key": typed})
        want = entity_view(fx, e, principals)
        diff = entity_differences(want, got)
        expect(not diff, f"doc_entity {e.kind} {typed!r}: {sorted(diff)} differ", outcome, {k: want[k] for k in diff})
        expect("resolved_from" not in got, "doc_entity by the current key (other case) reports resolved_from", outcome)
        outcome, got = answer(ctx, "doc_links", {"kind": e.kind, "key": typed})
        want_links = linked(fx, e.kind, e.key, principals)
        expect(got == want_links, f"doc_links {e.kind} {typed!r}: not the allowed linked topics, most reliable "
                                  "first (then collection, slug)", outcome, want_links)
        if want_links:
            outcome, got = answer(ctx, "doc_get", {"kind": e.kind, "key": typed})
            best = {(r["collection"], r["slug"]) for r in want_links if r["confidence"] == want_links[0]["confidence"]}
            expect((got.get("collection"), got.get("slug")) in best,
                   f"doc_get {e.kind} {typed!r}: not the most reliable linked topic", outcome, sorted(best))
    for a in fx.aliases:
        e = next(x for x in fx.entities if x.kind == a.kind and same_key(x.key, a.key))
        outcome, got = answer(ctx, "doc_entity", {"kind": a.kind, "key": a.alias})
        expect(got.get("key") == e.key and got.get("resolved_from") == a.alias,
               f"doc_entity {a.kind} {a.alias!r}: an old name must resolve to {e.key} with resolved_from", outcome)
        outcome, got = answer(ctx, "doc_links", {"kind": a.kind, "key": a.alias})
        expect(got == linked(fx, e.kind, e.key, principals), f"doc_links {a.kind} {a.alias!r}: the old name must "
               "list the current key's topics", outcome)


def _check_search(ctx: CheckContext, fx: PoolFixture, principals: frozenset[str] | None) -> None:
    visible = [t for t in fx.topics_in(fx.open_id) if allowed(fx, t, principals)]
    for i, topic in enumerate(visible):
        query = (topic.word, topic.word.upper(), fold(topic.word))[i % 3]
        _expect_hits(ctx, fx, query, topic.collection, [topic])
        if i % 4 == 0 and (prefix := unique_prefix(fx, topic)):
            _expect_hits(ctx, fx, prefix, topic.collection, [topic])
    if len(visible) >= 2:  # no chunk holds both words: all words finds nothing, so any word is tried
        a, b = visible[0], visible[-1]
        _expect_hits(ctx, fx, f"{a.word} {b.word}", fx.open_id, [a, b])


def _expect_hits(ctx: CheckContext, fx: PoolFixture, query: str, collection: str, topics: list[Topic]) -> None:
    outcome, got = answer(ctx, "doc_search", {"query": query, "collection": collection, "mode": "fts", "limit": 10})
    slugs = {(h.get("collection"), h.get("slug")) for h in got}
    want = {(t.collection, t.slug) for t in topics}
    expect(slugs == want and len(got) == len(want), f"doc_search {query!r}: hits {sorted(slugs)} are not the topics "
                                                    "holding the word", outcome, sorted(want))
    by_slug = {t.slug: t for t in topics}
    for hit in got:
        t = by_slug[hit["slug"]]
        links = {(l.get("kind"), l.get("key")) for l in hit.get("links") or []}
        ok = (hit.get("title"), hit.get("breadcrumb"), hit.get("method")) == (t.title, t.breadcrumb, "fts") \
            and links == {(l.kind, l.key) for l in t.links}
        expect(ok, f"doc_search {query!r}: hit {t.slug} does not carry the topic's title, breadcrumb, links "
                   "and method fts", outcome, {"title": t.title, "breadcrumb": t.breadcrumb})


def _check_listings(ctx: CheckContext, fx: PoolFixture, principals: frozenset[str] | None) -> None:
    outcome, got = answer(ctx, "doc_entities", {"q": fx.token, "limit": 200})
    want = sorted(({"collection": e.collection, "kind": e.kind, "key": e.key, "title": e.title}
                   for e in fx.entities), key=lambda e: (e["kind"], e["key"], e["collection"]))
    expect(got == want, "doc_entities q=<run token>: not the imported entities by kind, key", outcome, want)
    outcome, got = answer(ctx, "doc_entities", {"limit": 200})
    kinds = [r for r in got if r.get("collection") == fx.open_id]
    want = [{"kind": k.kind, "title": k.title, "key_rule": k.key_rule, "collection": k.collection,
             "entities": sum(1 for e in fx.entities if (e.collection, e.kind) == (k.collection, k.kind))}
            for k in sorted(fx.kinds, key=lambda k: k.kind)]
    if len(got) < 200:
        expect(kinds == want, "doc_entities: the imported entity kinds (key_rule, entity counts) are wrong",
               outcome, want)
    outcome, got = answer(ctx, "doc_collections", {})
    c = fx.collection(fx.open_id)
    row = next((r for r in got if r.get("id") == c.id), None)
    want_row = {"id": c.id, "title": c.title, "kind": c.kind, "erisim": c.erisim,
                "topics": len(fx.topics_in(c.id)), "generated": c.generated}
    expect(row == want_row, f"doc_collections: the row of {c.id} is wrong", outcome, want_row)


def _check_stats(ctx: CheckContext, run: PoolRun, principals: frozenset[str] | None) -> None:
    fx = run.fixture
    outcome, got = answer(ctx, "doc_stats", {})
    collections = got.get("collections") or {}
    for c in fx.collections:
        seen = [t for t in fx.topics_in(c.id) if allowed(fx, t, principals)]
        if not seen and c.erisim != HERKES:
            continue  # whether an unreadable collection is listed at all is not the seed's to say
        want = {"title": c.title, "kind": c.kind, "erisim": c.erisim, "generated": c.generated,
                "help_url_v3": c.help_url_v3, "topics": len(seen), "chunks": sum(len(t.chunks) for t in seen),
                "meta": dict(c.meta)}
        expect(collections.get(c.id) == want, f"doc_stats: collections[{c.id}] is not the imported collection "
                                              "(allowed topics and chunks, its recipe)", outcome, want)
    counts = got.get("counts") or {}
    want = expected_counts(fx, principals)
    if run.before is not None:
        before = run.before.get("counts") or {}
        delta = {n: counts.get(n, 0) - before.get(n, 0) for n in COUNT_NAMES}
        expect(delta == want, f"doc_stats: counts grew by {delta} with the import", outcome, want)
    else:
        low = {n: counts.get(n, 0) for n in COUNT_NAMES if counts.get(n, 0) < want[n]}
        expect(not low, f"doc_stats: counts {low} are below the imported rows", outcome, want)


@check("docpool_import_acl", RULE_ACL, scope="server", applies=_imported, planned=holds_family("docpool"))
def docpool_import_acl(ctx: CheckContext) -> None:
    """Restricted topics: readable exactly by callers one of whose principals is in the topic's ACL."""
    run, principals = _run(ctx), mcp_principals(ctx)
    fx = run.fixture
    restricted = fx.topics_in(fx.restricted_id)
    for topic in restricted:
        outcome = call(ctx, "doc_get", {"collection": topic.collection, "slug": topic.slug})
        if allowed(fx, topic, principals):
            expect(not outcome.is_error and (outcome.structured or {}).get("title") == topic.title,
                   f"doc_get {topic.slug} (ACL {list(topic.acl)}): the caller may read it", outcome)
        else:
            expect(outcome.is_error and (outcome.structured or {}).get("code") == "not_found",
                   f"doc_get {topic.slug} (ACL {list(topic.acl)}): a forbidden topic must answer not_found", outcome)
        outcome, got = answer(ctx, "doc_search", {"query": topic.word, "collection": topic.collection})
        want = [topic.slug] if allowed(fx, topic, principals) else []
        expect([h.get("slug") for h in got] == want, f"doc_search {topic.word!r} (ACL {list(topic.acl)}): "
                                                     "forbidden topics are never ranked", outcome, want)
    readable = sum(allowed(fx, t, principals) for t in restricted)
    if readable:
        outcome, got = answer(ctx, "doc_collections", {})
        row = next((r for r in got if r.get("id") == fx.restricted_id), None)
        expect(row is not None and row.get("topics") == readable,
               f"doc_collections: {fx.restricted_id} must count the {readable} topics the caller may read", outcome)
    sessions = [("admin", run.admin)]
    if ctx.config.reader_user and ctx.config.reader_password:
        reader, refused = login(ctx.config, ctx.config.reader_user, ctx.config.reader_password, run.database)
        if reader is None:
            raise CheckFailed("reader login failed", arguments={"user": ctx.config.reader_user}, response=refused)
        sessions.append(("reader", reader))
    for who, session in sessions:
        _check_rest_reads(ctx, fx, who, session)


def _check_rest_reads(ctx: CheckContext, fx: PoolFixture, who: str, session: Session | None) -> None:
    """REST Doc* results are filtered by the session's identity: DocGet of every restricted topic."""
    if session is None:
        return
    for topic in fx.topics_in(fx.restricted_id):
        body = {"collection": topic.collection, "slug": topic.slug}
        status, got = post(ctx.config.rest_url or "", DOC_GET, body, session.token, ctx.config.call_timeout)
        response = {"status": status, "body": got}
        context = f"REST DocGet {topic.slug} as {who} {sorted(session.principals)} (ACL {list(topic.acl)})"
        if allowed(fx, topic, session.principals):
            if status != 200 or not isinstance(got, dict) or got.get("title") != topic.title:
                raise CheckFailed(f"{context}: HTTP {status}, expected 200 with the topic", arguments=body,
                                  response=response)
        elif status != 404 or schema_errors(ctx.contract.error_schema, got):
            raise CheckFailed(f"{context}: HTTP {status}, a forbidden topic must be a 404 envelope", arguments=body,
                              response=response)


def _envelope(ctx: CheckContext, what: str, status: int, body: Any, statuses: tuple[int, ...], request: Any) -> None:
    problems = schema_errors(ctx.contract.error_schema, body)
    if status not in statuses or problems:
        raise CheckFailed(f"{what}: HTTP {status}, expected an error envelope with {' or '.join(map(str, statuses))}"
                          + (f" ({'; '.join(problems)})" if problems else ""),
                          arguments=request, response={"status": status, "body": body})


def _refused(ctx: CheckContext, what: str, params: dict[str, Any]) -> None:
    status, body = importdoc(ctx.config, _run(ctx).admin.token, params)
    if status != 202 or not isinstance(body, dict) or body.get("result") is not False or not body.get("message"):
        raise CheckFailed(f"IMPORTDOC {what}: HTTP {status}, expected 202 {{result: false, message}}",
                          arguments=params, response={"status": status, "body": body})
    folder = str(_run(ctx).source.parent) if _run(ctx).source else ""
    if folder and folder in json.dumps(body, ensure_ascii=False):
        raise CheckFailed(f"IMPORTDOC {what}: the refusal names the absolute path {folder}", arguments=params,
                          response={"status": status, "body": body})


@check("docpool_import_refusals", RULE_REFUSALS, scope="server", applies=_imported_by_rest, planned=holds_family("docpool"))
def docpool_import_refusals(ctx: CheckContext) -> None:
    """Against the real pool: a missing param is 400; bad name, absent collection, missing file are 202 untouched."""
    run = _run(ctx)
    fx = run.fixture
    good = {"database": run.database, "collection": fx.open_id, "path": str(run.source)}
    for name in good:
        params = {k: v for k, v in good.items() if k != name}
        status, body = importdoc(ctx.config, run.admin.token, params)
        _envelope(ctx, f"IMPORTDOC without {name}", status, body, (400,), params)
    _refused(ctx, "with an invalid collection name", {**good, "collection": f"Conform_{fx.token}!"})
    absent = f"{fx.open_id}-yok"
    _refused(ctx, "of a collection absent from the source", {**good, "collection": absent})
    _refused(ctx, "from a missing source file", {**good, "path": str(run.source.with_name(f"missing-{fx.token}.db"))})
    outcome, got = answer(ctx, "doc_collections", {})
    ids = {r.get("id"): r for r in got}
    expect(absent not in ids, f"a refused IMPORTDOC created collection {absent}", outcome)
    row = ids.get(fx.open_id) or {}
    expect(row.get("topics") == len(fx.topics_in(fx.open_id)),
           f"a refused IMPORTDOC changed {fx.open_id} (it must stay untouched)", outcome)


@check("docpool_import_non_admin", RULE_NON_ADMIN, scope="server", applies=_imported_by_rest, planned=holds_family("docpool"))
def docpool_import_non_admin(ctx: CheckContext) -> None:
    """A logged-in user without SYSADMIN is refused IMPORTDOC with a 401/403 envelope."""
    config, run = ctx.config, _run(ctx)
    if not (config.reader_user and config.reader_password):
        skip("no --reader-user/--reader-password: the suite cannot log in as a non-admin")
    reader, refused = login(config, config.reader_user, config.reader_password, run.database)
    if reader is None:
        raise CheckFailed("reader login failed", arguments={"user": config.reader_user}, response=refused)
    if "sysadmin" in {ascii_lower(r) for r in reader.roles}:
        skip(f"the reader {reader.user} holds SYSADMIN")
    params = {"database": run.database, "collection": run.fixture.open_id, "path": str(run.source)}
    status, body = importdoc(config, reader.token, params)
    _envelope(ctx, f"IMPORTDOC by the non-admin {reader.user}", status, body, (401, 403), params)
    post(config.rest_url or "", LOGOUT, {}, reader.token, config.call_timeout)
