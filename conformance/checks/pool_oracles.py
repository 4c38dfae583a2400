"""Oracle checks for the help and document tools on the suite's own pools, one check per tool.

They run when the target serves the suite's pools: started on ``--pool-fixture DIR`` (stdio or
HTTP, no credentials) or fed through IMPORTDOC (REST admin). Expected answers come from the
fixture facts and the seed's rules (``oracles/pools.py``, ``checks/docpool_import.py``), for the
caller's identity: a stdio caller sees everything, an HTTP MCP caller without a session only
what ``*`` may. Cross-tool invariants (doc_stats vs doc_collections, doc_entity vs doc_links) too.
"""

from __future__ import annotations

from typing import Any

from knowspec.conformance.checks.common import advertised_only, fail, require_result
from knowspec.conformance.checks.docpool_import import (
    PoolRun, entity_differences, entity_view, linked, mcp_principals, success_data, topic_view,
)
from knowspec.conformance.checks.registry import CheckContext, check, tools_named
from knowspec.conformance.oracles import pools as oracle
from knowspec.conformance.pool_fixture import fold
from knowspec.conformance.target import CallOutcome

SEED = "spec/docpool/contract.md"
HELP_ID = "netsim-help"


def _pool(ctx: CheckContext) -> PoolRun:
    run = ctx.config.pool
    assert isinstance(run, PoolRun) and run.fixture is not None
    return run


def for_tool(name: str, needs_help: bool = False) -> dict[str, Any]:
    """``@check`` arguments of an oracle of one tool: planned only on it, skipped without the suite's pool."""

    def applies(ctx: CheckContext) -> str | None:
        run = ctx.config.pool
        if not isinstance(run, PoolRun) or run.mode not in ("fixture", "imported"):
            note = run.note if isinstance(run, PoolRun) else "no pool fixture"
            return f"no pool of the suite's on the target ({note}); start it on `knowspec conform fixture`"
        if needs_help and run.help is None:
            return ("needs the suite's help pool (an import brings only document collections): start the target "
                    "on `knowspec conform fixture --out DIR` and pass --pool-fixture DIR")
        return advertised_only(ctx)

    return {"applies": applies, "relevant": tools_named(name)}


def _call(ctx: CheckContext, tool: str, args: dict[str, Any], database: bool = True) -> CallOutcome:
    run = _pool(ctx)
    properties = (ctx.advertised.get(tool, {}).get("inputSchema") or {}).get("properties") or {}
    if database and "database" in properties:
        args = {**args, "database": run.database}
    outcome = ctx.call(ctx.fitted(tool, args), name=tool)
    require_result(outcome)
    return outcome


def _answer(ctx: CheckContext, tool: str, args: dict[str, Any]) -> tuple[CallOutcome, Any]:
    outcome = _call(ctx, tool, args)
    return outcome, success_data(outcome, f"{tool} on the suite's pool")


def _expect(ok: bool, message: str, outcome: CallOutcome, expected: Any = None, got: Any = None) -> None:
    if not ok:
        text = message if expected is None else f"{message}; expected {repr(expected)[:700]}"
        fail(text if got is None else f"{text}; got {repr(got)[:700]}", outcome)


# ---- help pool --------------------------------------------------------------------------------

@check("oracle_help_search", f"{SEED}#help_search (fts; folding; module filter; bm25 then slug)",
       **for_tool("help_search", needs_help=True))
def oracle_help_search(ctx: CheckContext) -> None:
    """Each help topic's own word finds exactly it, in every folded spelling; module narrows."""
    hx = _pool(ctx).help
    for i, topic in enumerate(hx.topics):
        queries = [topic.word] + oracle.turkish_variants(topic.word)[: 2 if i % 2 else 5]
        for query in queries:
            outcome, got = _answer(ctx, "help_search", {"query": query})
            _expect([h.get("slug") for h in got] == [topic.slug],
                    f"help_search {query!r}: only {topic.slug} holds this word (folded)", outcome, [topic.slug])
            hit = got[0]
            ok = (hit.get("title"), hit.get("breadcrumb")) == (topic.title, topic.breadcrumb)
            forms, modules = oracle.best_key(topic, "form_class"), oracle.best_key(topic, "module")
            ok = ok and (not forms or hit.get("form_class") in forms) and (not modules or hit.get("module") in modules)
            _expect(ok, f"help_search {query!r}: the hit does not carry the topic's title, breadcrumb, "
                        "most reliable form_class and module", outcome)
        modules = [l.key for l in topic.links if l.kind == "module"]
        others = [e.key for e in hx.entities if e.kind == "module" and e.key not in modules]
        if modules:
            outcome, got = _answer(ctx, "help_search", {"query": topic.word, "module": modules[0]})
            _expect([h.get("slug") for h in got] == [topic.slug], f"help_search module={modules[0]}: the topic is "
                                                                  "linked to that module", outcome)
        if others:
            outcome, got = _answer(ctx, "help_search", {"query": topic.word, "module": others[0]})
            _expect(got == [], f"help_search module={others[0]}: the topic is not linked to that module", outcome, [])
    words = " ".join(t.word for t in hx.topics[:4])
    outcome, got = _answer(ctx, "help_search", {"query": words, "limit": 3})
    scores = [(h.get("score"), h.get("slug")) for h in got]
    _expect(len(got) == min(3, len(hx.topics[:4])) and scores == sorted(scores),
            f"help_search {words!r} limit 3: any word matches; bm25 ascending then slug, at most limit", outcome)


@check("oracle_help_get_topic", f"{SEED}#help_get_topic (by slug, form_class, old name, islem_kodu; related)",
       **for_tool("help_get_topic", needs_help=True))
def oracle_help_get_topic(ctx: CheckContext) -> None:
    """A help topic by slug is the topic; related are the topics sharing a form or code, ordered."""
    hx = _pool(ctx).help
    for topic in hx.topics:
        outcome, got = _answer(ctx, "help_get_topic", {"slug": topic.slug})
        want = {"slug": topic.slug, "title": topic.title, "breadcrumb": topic.breadcrumb, "body_md": topic.body_md}
        diff = {k: got.get(k) for k in want if got.get(k) != want[k]}
        _expect(not diff, f"help_get_topic {topic.slug}: {sorted(diff)} differ", outcome, want)
        related = [{"slug": r.get("slug"), "title": r.get("title")} for r in got.get("related") or []]
        _expect(related == oracle.help_related(hx, topic), f"help_get_topic {topic.slug}: related are the topics "
                "sharing its form_class / islem_kodu, confidence descending then slug, at most 10", outcome,
                oracle.help_related(hx, topic))
    for form in (e for e in hx.entities if e.kind == "form_class"):
        rows = oracle.form_topics(hx, form)
        outcome = _call(ctx, "help_get_topic", {"form_class": form.key.lower()})
        if not rows:
            _expect(outcome.is_error and (outcome.structured or {}).get("code") == "not_found",
                    f"help_get_topic form_class {form.key}: no linked topic must be not_found", outcome)
            continue
        best = {r["slug"] for r in rows if r["confidence"] == rows[0]["confidence"]}
        _expect(not outcome.is_error and (outcome.structured or {}).get("slug") in best,
                f"help_get_topic form_class {form.key}: the most reliable linked topic", outcome, sorted(best))
    for alias in (a for a in hx.aliases if a.kind == "form_class"):
        form = next(e for e in hx.entities if e.kind == "form_class" and oracle.same(e.key, alias.key))
        rows = oracle.form_topics(hx, form)
        if rows:
            outcome, got = _answer(ctx, "help_get_topic", {"form_class": alias.alias})
            best = {r["slug"] for r in rows if r["confidence"] == rows[0]["confidence"]}
            _expect(got.get("slug") in best, f"help_get_topic old form name {alias.alias}: resolves to {form.key}",
                    outcome, sorted(best))


@check("oracle_help_form_info", f"{SEED}#help_form_info (attrs, islem_kodlari by rel then kod, topics ordered)",
       **for_tool("help_form_info", needs_help=True))
def oracle_help_form_info(ctx: CheckContext) -> None:
    """A form's codes and topics come complete and in the seed's order; an old name is legacy_alias."""
    hx = _pool(ctx).help
    for form in (e for e in hx.entities if e.kind == "form_class"):
        outcome, got = _answer(ctx, "help_form_info", {"form_class": form.key.upper()})
        topics = [{k: t.get(k) for k in ("slug", "title", "confidence", "source")} for t in got.get("topics") or []]
        _expect(topics == oracle.form_topics(hx, form), f"help_form_info {form.key}: topics are the linked topics, "
                "confidence descending then slug", outcome, oracle.form_topics(hx, form))
        codes = [(c.get("rel"), c.get("kod")) for c in got.get("islem_kodlari") or []]
        _expect(codes == oracle.form_codes(hx, form), f"help_form_info {form.key}: islem_kodlari are the codes "
                "opening the form, by rel then kod", outcome, oracle.form_codes(hx, form))
        card = got.get("form") or {}
        _expect(card.get("form_class") == form.key and card.get("title") == form.title
                and all(card.get(k) == v for k, v in form.attrs.items()),
                f"help_form_info {form.key}: the form card (key, title, attributes)", outcome)
    for alias in (a for a in hx.aliases if a.kind == "form_class"):
        outcome, got = _answer(ctx, "help_form_info", {"form_class": alias.alias})
        _expect((got.get("form") or {}).get("form_class") == alias.key and got.get("legacy_alias") == alias.alias,
                f"help_form_info old name {alias.alias}: resolves to {alias.key}, reported as legacy_alias", outcome)


@check("oracle_help_stats", f"{SEED}#help_stats (the help pool's recipe and exact row counts)",
       **for_tool("help_stats", needs_help=True))
def oracle_help_stats(ctx: CheckContext) -> None:
    """help_stats counts exactly the help pool's rows and describes its one collection."""
    hx = _pool(ctx).help
    outcome, got = _answer(ctx, "help_stats", {})
    _expect(got.get("counts") == oracle.pool_counts(hx, None), "help_stats: counts are not the help pool's rows",
            outcome, oracle.pool_counts(hx, None))
    want = {HELP_ID: oracle.collection_stats(hx, HELP_ID, None)}
    _expect(got.get("collections") == want, "help_stats: collections", outcome, want)


# ---- document pool ----------------------------------------------------------------------------

@check("oracle_doc_stats", f"{SEED}#doc_stats (counts of the caller's topics; = doc_collections)",
       **for_tool("doc_stats"))
def oracle_doc_stats(ctx: CheckContext) -> None:
    """doc_stats counts only what the caller may see, and agrees with doc_collections per collection."""
    run, principals = _pool(ctx), mcp_principals(ctx)
    fx = run.fixture
    outcome, got = _answer(ctx, "doc_stats", {})
    collections = got.get("collections") or {}
    for c in fx.collections:
        want = oracle.collection_stats(fx, c.id, principals)
        if want["topics"] == 0 and c.id not in collections:
            continue
        _expect(collections.get(c.id) == want, f"doc_stats: collections[{c.id}] for this caller", outcome, want)
    if run.mode == "fixture":
        want = oracle.pool_counts(fx, principals)
        _expect(got.get("counts") == want, "doc_stats: counts are not the rows this caller may see", outcome, want)
    listed, rows = _answer(ctx, "doc_collections", {})
    for row in rows:
        if row.get("id") in collections:
            _expect(row.get("topics") == collections[row["id"]].get("topics"),
                    f"doc_collections.topics of {row['id']} != doc_stats collections[{row['id']}].topics", listed)


@check("oracle_doc_collections", f"{SEED}#doc_collections (netsim-help first, then by id; topics per caller)",
       **for_tool("doc_collections"))
def oracle_doc_collections(ctx: CheckContext) -> None:
    """The fixture collections are listed with the topics the caller may read, netsim-help first."""
    run, principals = _pool(ctx), mcp_principals(ctx)
    fx = run.fixture
    outcome, got = _answer(ctx, "doc_collections", {})
    ids = [r.get("id") for r in got]
    _expect(ids[:1] == [HELP_ID] or HELP_ID not in ids, "doc_collections: netsim-help comes first", outcome)
    rest = [i for i in ids if i != HELP_ID]
    _expect(rest == sorted(rest), "doc_collections: the document pool's collections by id", outcome, sorted(rest))
    for c in fx.collections:
        seen = sum(oracle.visible(fx, t, principals) for t in fx.topics_in(c.id))
        row = next((r for r in got if r.get("id") == c.id), None)
        if row is None and seen == 0:
            continue
        want = {"id": c.id, "title": c.title, "kind": c.kind, "erisim": c.erisim, "topics": seen,
                "generated": c.generated}
        _expect(row == want, f"doc_collections: the row of {c.id} for this caller", outcome, want)
    if run.help is not None:
        h = run.help.collections[0]
        want = {"id": h.id, "title": h.title, "kind": h.kind, "erisim": h.erisim, "topics": len(run.help.topics),
                "generated": h.generated}
        _expect(got[:1] == [want], "doc_collections: the help pool's row", outcome, want)


@check("oracle_doc_search", f"{SEED}#doc_search (folding incl. Turkish ı/İ; ACL before ranking; order)",
       **for_tool("doc_search"))
def oracle_doc_search(ctx: CheckContext) -> None:
    """Every spelling that folds alike finds the same topic; forbidden topics never rank; fts order holds."""
    run, principals = _pool(ctx), mcp_principals(ctx)
    fx = run.fixture
    for i, topic in enumerate(fx.topics):
        want = [topic.slug] if oracle.visible(fx, topic, principals) else []
        variants = oracle.turkish_variants(topic.word)
        if not set("iıIİ") & set(topic.word):
            variants = variants[i % len(variants):][:1] if variants else []
        for query in [topic.word, *variants]:
            outcome, got = _answer(ctx, "doc_search", {"query": query, "collection": topic.collection, "mode": "fts"})
            slugs = [h.get("slug") for h in got]
            _expect(slugs == want,
                    f"doc_search {query!r} ({fold(query)!r} folded) in {topic.collection}: the topics holding the word "
                    "that the caller may see", outcome, want, slugs)
    visible = [t for t in fx.topics if oracle.visible(fx, t, principals)]
    words = " ".join(t.word for t in visible[:6])
    for limit in (2, 5):
        outcome, got = _answer(ctx, "doc_search", {"query": words, "limit": limit})
        keys = [(h.get("score"), h.get("collection"), h.get("slug")) for h in got]
        _expect(len(got) == min(limit, 6) and keys == sorted(keys), f"doc_search {limit} of 6 one-word topics: bm25 "
                "ascending then collection, slug, exactly limit", outcome)
    # forbidden topics compete for the limit only if ACL is applied after ranking
    mixed = fx.topics_in(fx.restricted_id) + fx.topics_in(fx.open_id)[:2]
    seen = [t for t in mixed if oracle.visible(fx, t, principals)]
    query = " ".join(t.word for t in mixed)
    outcome, got = _answer(ctx, "doc_search", {"query": query, "limit": len(seen), "mode": "fts"})
    found = sorted((h.get("collection"), h.get("slug")) for h in got)
    _expect(found == sorted((t.collection, t.slug) for t in seen),
            f"doc_search over {len(mixed)} one-word topics, limit {len(seen)}: exactly the {len(seen)} the caller may "
            "see (ACL before ranking and the limit)", outcome, sorted((t.collection, t.slug) for t in seen), found)
    if run.help is not None:
        topic = run.help.topics[0]
        outcome, got = _answer(ctx, "doc_search", {"query": topic.word, "collection": HELP_ID})
        _expect([h.get("slug") for h in got] == [topic.slug], "doc_search collection netsim-help reads the help pool",
                outcome, [topic.slug])


@check("oracle_doc_get", f"{SEED}#doc_get (the topic; links ordered; related ordered; ACL = not_found)",
       **for_tool("doc_get"))
def oracle_doc_get(ctx: CheckContext) -> None:
    """Every fixture topic reads back as written, or not_found when the caller may not see it."""
    run, principals = _pool(ctx), mcp_principals(ctx)
    fx = run.fixture
    for topic in fx.topics:
        outcome = _call(ctx, "doc_get", {"collection": topic.collection, "slug": topic.slug})
        if not oracle.visible(fx, topic, principals):
            _expect(outcome.is_error and (outcome.structured or {}).get("code") == "not_found",
                    f"doc_get {topic.slug} (ACL {list(topic.acl)}): a forbidden topic is not_found", outcome)
            continue
        got = outcome.structured if not outcome.is_error else {}
        want = topic_view(topic)
        diff = {k: got.get(k) for k in want if got.get(k) != want[k]}
        _expect(not diff, f"doc_get {topic.slug}: {sorted(diff)} differ from the written topic", outcome,
                {k: want[k] for k in diff})
        ranked = oracle.related_ranked(fx, topic, principals)
        conf = {(t.collection, t.slug): c for c, t in ranked}
        rel = [(r.get("collection"), r.get("slug")) for r in got.get("related") or []]
        order = [(-conf.get(k, -1.0), k[0], k[1]) for k in rel]
        ok = set(rel) <= set(conf) and order == sorted(order) and len(rel) == min(10, len(conf))
        _expect(ok, f"doc_get {topic.slug}: related are at most 10 visible topics sharing a form_class / islem_kodu, "
                    "confidence descending, then collection, slug", outcome,
                sorted(conf, key=lambda k: (-conf[k], k))[:10])
    if fx.topics:  # a slug no topic has: not_found, whoever asks (invalid_request had passed)
        absent = {"collection": fx.topics[0].collection, "slug": f"{fx.topics[0].slug}-zz-absent"}
        outcome = _call(ctx, "doc_get", absent)
        _expect(outcome.is_error and (outcome.structured or {}).get("code") == "not_found",
                f"doc_get of a slug no topic has ({absent['slug']}) must be not_found", outcome)


@check("oracle_doc_entity", f"{SEED}#doc_entity (relations, aliases, topics the caller sees = len(doc_links))",
       **for_tool("doc_entity"))
def oracle_doc_entity(ctx: CheckContext) -> None:
    """Each entity's view equals the fixture's, its topic count is what doc_links lists for the caller."""
    run, principals = _pool(ctx), mcp_principals(ctx)
    fx = run.fixture
    for e in fx.entities:
        outcome, got = _answer(ctx, "doc_entity", {"kind": e.kind, "key": e.key.swapcase()})
        want = entity_view(fx, e, principals)
        diff = entity_differences(want, got)
        _expect(not diff, f"doc_entity {e.kind} {e.key}: {sorted(diff)} differ", outcome, {k: want[k] for k in diff})
        if ctx.is_advertised("doc_links"):
            links, rows = _answer(ctx, "doc_links", {"kind": e.kind, "key": e.key})
            _expect(got.get("topics") == len(rows), f"doc_entity {e.key}.topics {got.get('topics')} != "
                                                    f"{len(rows)} topics doc_links lists", outcome)


@check("oracle_doc_entities", f"{SEED}#doc_entities (kinds with counts; entities by kind, key; limit; q folded)",
       **for_tool("doc_entities"))
def oracle_doc_entities(ctx: CheckContext) -> None:
    """Kinds and entities come complete, in order, cut at limit from the first row."""
    fx = _pool(ctx).fixture
    outcome, got = _answer(ctx, "doc_entities", {"limit": 200})
    want = [{"kind": k.kind, "title": k.title, "key_rule": k.key_rule, "collection": k.collection,
             "entities": sum(1 for e in fx.entities if (e.collection, e.kind) == (k.collection, k.kind))}
            for k in sorted(fx.kinds, key=lambda k: (k.collection, k.kind))]
    mine = [r for r in got if r.get("collection") == fx.open_id]
    _expect(mine == want, "doc_entities: the entity kinds with key_rule and entity counts", outcome, want)
    for kind in sorted({e.kind for e in fx.entities}):
        rows = sorted(({"collection": e.collection, "kind": e.kind, "key": e.key, "title": e.title}
                       for e in fx.entities if e.kind == kind), key=lambda r: (r["kind"], r["key"], r["collection"]))
        for limit in (1, 2, 200):
            outcome, got = _answer(ctx, "doc_entities", {"kind": kind, "q": fx.token, "limit": limit})
            _expect(got == rows[:limit], f"doc_entities kind={kind} limit={limit}: the first {limit} by key",
                    outcome, rows[:limit])
    e = next(x for x in fx.entities if x.kind == "form_class")
    outcome, got = _answer(ctx, "doc_entities", {"q": fold(e.title).upper(), "kind": "form_class"})
    _expect(any(r.get("key") == e.key for r in got), f"doc_entities q={fold(e.title).upper()!r}: a title matches "
                                                     "case- and accent-insensitively", outcome)


@check("oracle_doc_links", f"{SEED}#doc_links (visible linked topics, confidence descending, collection, slug)",
       **for_tool("doc_links"))
def oracle_doc_links(ctx: CheckContext) -> None:
    """doc_links of every entity equals the visible linked topics in the seed's order; old names resolve."""
    fx, principals = _pool(ctx).fixture, mcp_principals(ctx)
    for e in fx.entities:
        outcome, got = _answer(ctx, "doc_links", {"kind": e.kind, "key": e.key.lower()})
        want = linked(fx, e.kind, e.key, principals)
        _expect(got == want, f"doc_links {e.kind} {e.key}", outcome, want)
    for a in fx.aliases:
        outcome, got = _answer(ctx, "doc_links", {"kind": a.kind, "key": a.alias})
        _expect(got == linked(fx, a.kind, a.key, principals), f"doc_links old name {a.alias}", outcome)


