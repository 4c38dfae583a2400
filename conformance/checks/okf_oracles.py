"""Oracle checks for the OKF read tools other than search_concepts/get_neighbors.

Each check writes its own bundles (``fixtures/model.py``) and compares the target's answers with
``oracles/okf_reads.py``: list_concepts cards and staleness at the day and instant boundaries,
read_concept raw text and parts, search_sections order/terms/hashes/coverage, get_semantic_graph
nodes and relations, validate_bundle counts against its diagnostics and a known error.
"""

from __future__ import annotations

import json
from typing import Any

from knowspec.conformance.checks.common import advertised_only, fail, require_result, said, unsuccessful
from knowspec.conformance.checks.registry import CheckContext, check, tools_named
from knowspec.conformance.fixtures.model import Bundle, Concept, Link, Relation, Source
from knowspec.conformance.fixtures.strategies import bundles, cafe_bundle, sources_bundle, wide_bundle
from knowspec.conformance.oracles import okf_reads as oracle
from knowspec.conformance.target import CallOutcome

READ = "spec/okf/contract/read.md"
INSTANT = "instant-0b87c52"


def for_tool(name: str) -> dict[str, Any]:
    """``@check`` arguments of an oracle of one tool: planned only on it, skipped if not advertised."""
    return {"applies": advertised_only, "relevant": tools_named(name)}


def _whole(value: Any) -> bool:
    """A JSON Schema integer: 5 or 5.0 (the contract fixes number spelling in the text alone)."""
    return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, float) and value.is_integer())


def success(ctx: CheckContext, args: dict[str, Any], name: str | None = None) -> CallOutcome:
    outcome = ctx.call(ctx.fitted(name or ctx.require_tool().name, args), name=name)
    require_result(outcome)
    why = unsuccessful(outcome)
    if why:
        fail(f"{name or ctx.require_tool().name} on a valid fixture bundle: {why}", outcome)
    return outcome


def dated_bundle() -> Bundle:
    """Concepts with and without stale_after, sources, titles; IDs that sort differently as bytes."""
    return Bundle("dated", (
        Concept("b", title="Beta", stale_after="2025-03-01", sources=(Source("https://example.com/a"),
                                                                      Source("docs/x.md", id="x"))),
        Concept("a", title="Alpha", text="first line\n\nsecond line\n\nlast line"),
        Concept("Z", title="Upper", stale_after="2024-12-31"),
        Concept("é", title="Accent", stale_after="2025-02-28"),
        Concept("a/deep", title="Deep", stale_after="not-a-date"),
    ))


def instant_bundle() -> Bundle:
    return Bundle("instant", (
        Concept("i", title="Instant", stale_after="2025-01-10T12:00:00+02:00"),
        Concept("d", title="Date only", stale_after="2025-01-10"),
    ))


# ---- list_concepts ----------------------------------------------------------------------------

def _compare_cards(ctx: CheckContext, bundle: Bundle, args: dict[str, Any], profile: str,
                   fresh: bool = False) -> None:
    path = str(ctx.bundles.path_of(bundle, fresh=fresh))
    outcome = success(ctx, {"bundle_path": path, **args})
    got = outcome.structured.get("concepts")
    want = oracle.expected_cards(bundle, args.get("as_of"), profile)
    if not isinstance(got, list) or len(got) != len(want):
        fail(f"list_concepts returned {len(got) if isinstance(got, list) else got} cards for "
             f"{len(want)} concepts", outcome)
    for card, expected in zip(got, want):
        diff = {k: card.get(k) for k in expected if card.get(k) != expected[k]}
        if diff:
            fail(f"list_concepts card {expected['id']!r} (as_of {args.get('as_of')}, {profile}): {diff} "
                 f"!= {({k: expected[k] for k in diff})}", outcome)
    if outcome.texts and ctx.require_tool().text_fallback == "custom":
        try:
            text = json.loads(outcome.texts[0])
        except ValueError:
            text = None
        if text != oracle.legacy_summary(bundle):
            fail("list_concepts text is not the legacy summary of the same cards in the same order", outcome)


@check("oracle_list_concepts", f"{READ}#2 (cards sorted by ID bytes; stale at the inclusive day/instant boundary)",
       **for_tool("list_concepts"))
def oracle_list_concepts(ctx: CheckContext) -> None:
    """Every concept has one card in ID byte order; stale flips exactly at the day and at the instant."""
    dated = dated_bundle()
    _compare_cards(ctx, dated, {}, "date-3fcbb9f")
    for as_of, _ in oracle.day_boundaries("2025-03-01"):
        _compare_cards(ctx, dated, {"as_of": as_of}, "date-3fcbb9f")
    for as_of, _ in oracle.instant_boundaries("2025-01-10T12:00:00+02:00"):
        _compare_cards(ctx, instant_bundle(), {"as_of": as_of, "temporal_profile": INSTANT}, INSTANT)
    for bundle in (cafe_bundle(), sources_bundle(), wide_bundle(30, "wide30")):
        _compare_cards(ctx, bundle, {}, "date-3fcbb9f")

    def test(bundle: Bundle) -> None:
        _compare_cards(ctx, bundle, {"as_of": "2001-06-15"}, "date-3fcbb9f", fresh=True)

    ctx.run_property(bundles(), test, max_examples=max(2, ctx.config.max_examples // 3))


# ---- read_concept -----------------------------------------------------------------------------

@check("oracle_read_concept", f"{READ} (read_concept: raw text, frontmatter bytes, body; §3.2 unknown ID)",
       **for_tool("read_concept"))
def oracle_read_concept(ctx: CheckContext) -> None:
    """read_concept returns the file's own frontmatter and body (less exactly one trailing
    newline), its text is the whole file, and an ID the bundle lacks is concept_not_found."""
    for bundle in (dated_bundle(), sources_bundle(), cafe_bundle()):
        path = str(ctx.bundles.path_of(bundle))
        _check_unknown_id(ctx, bundle, path)
        for concept in bundle.concepts:
            outcome = success(ctx, {"bundle_path": path, "concept_id": concept.id})
            got, want = outcome.structured, oracle.expected_read(concept)
            problems = [k for k in ("id", "path", "frontmatter_yaml", "body") if got.get(k) != want[k]]
            projection = got.get("projection") or {}
            if concept.title and projection.get("title") != concept.title:
                problems.append("projection.title")
            if projection.get("stale_after") != oracle.valid_stale_after(concept.stale_after):
                problems.append("projection.stale_after")
            if outcome.texts and outcome.texts[0] != want["raw"]:
                problems.append("text (the file's raw text)")
            if problems:
                fail(f"read_concept {concept.id!r}: {problems} differ from the written file", outcome)


def _check_unknown_id(ctx: CheckContext, bundle: Bundle, path: str) -> None:
    missing = next(f"missing-{n}" for n in range(len(bundle.concepts) + 1) if f"missing-{n}" not in bundle.ids)
    outcome = ctx.call({"bundle_path": path, "concept_id": missing})
    require_result(outcome)
    error = outcome.structured if isinstance(outcome.structured, dict) else {}
    if not outcome.is_error or error.get("code") != "concept_not_found":
        fail(f"read_concept of an ID the bundle lacks ({missing!r}) must fail with concept_not_found, "
             f"not {said(outcome) if outcome.is_error else 'a result'}", outcome)
    steps = [d for d in error.get("diagnostics") or [] if isinstance(d, dict) and d.get("code") == "recovery_step"]
    if not any(d.get("field") == "concept_id" for d in steps):
        fail("concept_not_found must carry a recovery_step diagnostic on the field concept_id", outcome)


# ---- search_sections --------------------------------------------------------------------------

def sections_bundle() -> Bundle:
    return Bundle("sections", (
        Concept("m1", title="Needle guide", text="# Intro\n\nneedle and thread\n\n## More\n\nneedle again needle"),
        Concept("m2", title="Other", text="# Part\n\nthread only here\n\n## Needle\n\nneedle thread needle needle"),
        Concept("m3", title="Third", text="needle"),
        Concept("m4", title="Fourth", text="# Words\n\nno match at all"),
        Concept("m0", title="Zero", text="thread needle\n\n# Second\n\nthread"),
    ))


def _check_sections(ctx: CheckContext, bundle: Bundle, query: str, limit: int) -> None:
    path = ctx.bundles.path_of(bundle)
    outcome = success(ctx, {"bundle_path": str(path), "query": query, "limit": limit})
    out = outcome.structured
    hits = out.get("hits") or []
    terms = oracle.section_terms(query)
    problems = []
    if out.get("query") != query:
        problems.append("query echo differs")
    if out.get("terms") != terms:
        problems.append(f"terms {out.get('terms')} != {terms}")
    keys = [oracle.sections_order_key(h) for h in hits]
    if keys != sorted(keys):
        problems.append("hits are not ordered by score descending, then concept_id, then line_start")
    by_id = {c.id: c for c in bundle.concepts}
    for hit in hits:
        concept = by_id.get(hit.get("concept_id"))
        if concept is None:
            problems.append(f"hit names unknown concept {hit.get('concept_id')!r}")
            continue
        if hit.get("matched_terms") != terms:
            problems.append(f"{concept.id}: matched_terms {hit.get('matched_terms')} != all terms {terms}")
        if hit.get("content_sha256") != oracle.sha256_hex(oracle.file_bytes(concept)):
            problems.append(f"{concept.id}: content_sha256 is not the SHA-256 of the file")
        lines = oracle.file_bytes(concept).decode().split("\n")
        start, end = hit.get("line_start") or 0, hit.get("line_end") or 0
        if not (1 <= start <= end <= len(lines)):
            problems.append(f"{concept.id}: lines {start}-{end} outside the file")
        if hit.get("path") != concept.path:
            problems.append(f"{concept.id}: path {hit.get('path')!r}")
    found = {h.get("concept_id") for h in hits}
    must = oracle.concepts_with_words(bundle, terms, "body")
    may = oracle.concepts_with_words(bundle, terms, "anywhere")
    total = out.get("total")
    if not found <= may:
        problems.append(f"hits {sorted(found - may)} do not hold every query word")
    if _whole(total) and total <= limit and not must <= found:
        problems.append(f"concepts {sorted(must - found)} hold every word in a section but are missing")
    if not _whole(total) or total < len(hits) or out.get("truncated") != (total > len(hits)) \
            or len(hits) > limit or (total > len(hits) and len(hits) < limit):
        problems.append(f"total {total} / truncated {out.get('truncated')} / {len(hits)} hits / limit {limit}")
    if problems:
        fail(f"search_sections {query!r}: " + "; ".join(problems), outcome)


@check("oracle_search_sections", "spec/okf/tools.toml#search_sections (order, terms, matched_terms, hashes)",
       **for_tool("search_sections"))
def oracle_search_sections(ctx: CheckContext) -> None:
    """Sections holding every word, score descending then ID then line; hashes are the files'."""
    bundle = sections_bundle()
    for query, limit in (("needle", 20), ("needle", 2), ("thread needle", 20), ("NEEDLE Thread needle", 1),
                         ("absent", 5)):
        _check_sections(ctx, bundle, query, limit)
    _check_sections(ctx, wide_bundle(30, "wide30"), "needle hay", 100)


# ---- get_semantic_graph -----------------------------------------------------------------------

def graph_bundle() -> Bundle:
    return Bundle("graph", (
        Concept("g1", title="One", links=(Link("g2"), Link("g3", "fragment")),
                relations=(Relation("uses", "g2"), Relation("depends_on", "g3"), Relation("uses", "ghost"))),
        Concept("g2", title="Two", relations=(Relation("seeAlso", "g1"), Relation("uses", "g3"))),
        Concept("g3", title="Three", links=(Link("g1", "absolute"), Link("ghost", "broken"))),
    ))


def _iri(node: Any) -> str:
    if isinstance(node, dict):
        return str(node.get("@id", ""))
    return str(node or "")


def _local(iri: str) -> str:
    return iri[len("local:bundle:"):] if iri.startswith("local:bundle:") else iri


@check("oracle_semantic_graph", f"{READ} (v0.2 projection: a node per concept, every relation, @graph by @id)",
       **for_tool("get_semantic_graph"))
def oracle_semantic_graph(ctx: CheckContext) -> None:
    """The graph holds a node per concept, each resolved relation and link once, sorted by @id."""
    for bundle in (graph_bundle(), dated_bundle()):
        path = str(ctx.bundles.path_of(bundle))
        outcome = success(ctx, {"bundle_path": path})
        nodes = outcome.structured.get("@graph") or []
        ids = [n.get("@id") for n in nodes if isinstance(n, dict)]
        problems = []
        if ids != sorted(ids) or len(set(ids)) != len(ids):
            problems.append("@graph is not sorted by @id and deduplicated")
        concepts = {_local(n.get("@id", "")): n for n in nodes
                    if isinstance(n, dict) and n.get("@type") == "proj:Concept"}
        safe = {c.id for c in bundle.concepts if c.id.isascii() and c.id.isalnum()}
        if not safe <= set(concepts):
            problems.append(f"concept nodes missing: {sorted(safe - set(concepts))}")
        for cid in safe & set(concepts):
            title = bundle.concept(cid).title
            if title and concepts[cid].get("title") != title:
                problems.append(f"{cid}: title {concepts[cid].get('title')!r} != {title!r}")
        rels = set()
        for n in nodes:
            if isinstance(n, dict) and "relationType" in n and n.get("targetExists", {}).get("@value", True) is not False:
                rels.add((_local(_iri(n.get("relationSource"))), n.get("relationType"),
                          _local(_iri(n.get("relationTarget")))))
        want = {r for r in oracle.graph_relations(bundle) if r[0] in safe and r[2] in safe}
        if rels & want != want:
            problems.append(f"relations missing: {sorted(want - rels)}")
        refs = set()
        for cid, node in concepts.items():
            value = node.get("references")
            for item in value if isinstance(value, list) else [value] if value else []:
                refs.add((cid, _local(_iri(item))))
        want_refs = {r for r in oracle.graph_references(bundle) if r[0] in safe and r[1] in safe}
        refs = {r for r in refs if r[1] in bundle.ids}  # unresolved references may be listed as such
        if refs != want_refs:
            problems.append(f"references {sorted(refs)} != resolved links {sorted(want_refs)}")
        if problems:
            fail("get_semantic_graph: " + "; ".join(problems), outcome)


# ---- validate_bundle --------------------------------------------------------------------------

SEVERITY_RANK = {"ERROR": 0, "WARN": 1, "INFO": 2}


def broken_bundle() -> Bundle:
    """One concept with no frontmatter at all and one whose frontmatter is not YAML: both are ERRORs."""
    return Bundle("broken", (Concept("ok", title="Fine"),),
                  extra_files={"plain.md": "no frontmatter here\n", "bad.md": "---\ntype: [\n---\nbody\n"})


@check("oracle_validate_bundle", "spec/okf/tools.toml#validate_bundle (counts = diagnostics; ERROR → not conformant)",
       **for_tool("validate_bundle"))
def oracle_validate_bundle(ctx: CheckContext) -> None:
    """Counts equal the diagnostics by severity; broken files are ERRORs naming the file; order holds."""
    for bundle, must_fail in ((broken_bundle(), ("plain.md", "bad.md")), (dated_bundle(), ()), (graph_bundle(), ())):
        path = str(ctx.bundles.path_of(bundle))
        outcome = success(ctx, {"bundle_path": path})
        out = outcome.structured
        diags = out.get("diagnostics") or []
        count = {s: sum(1 for d in diags if d.get("severity") == s) for s in SEVERITY_RANK}
        conf, guide = out.get("conformance") or {}, out.get("guidance") or {}
        problems = []
        if conf.get("errors") != count["ERROR"] or guide.get("warnings") != count["WARN"] \
                or guide.get("info") != count["INFO"]:
            problems.append(f"counts {conf.get('errors')}/{guide.get('warnings')}/{guide.get('info')} != "
                            f"diagnostics {count}")
        if conf.get("conformant") != (count["ERROR"] == 0):
            problems.append("conformant must be true exactly when there is no ERROR")
        for name in must_fail:
            if not any(d.get("severity") == "ERROR" and d.get("file") == name for d in diags):
                problems.append(f"no ERROR diagnostic for {name}")
        keys = [(SEVERITY_RANK.get(d.get("severity"), 9), str(d.get("file", "")).encode(),
                 str(d.get("code", "")).encode(), str(d.get("spec_ref", "")).encode(),
                 str(d.get("field", "")).encode()) for d in diags]
        if keys != sorted(keys):
            problems.append("diagnostics are not ordered by severity, then file, code, spec_ref, field")
        files = len(bundle.concepts) + len(bundle.extra_files) + 1
        if out.get("scanned_files") != files:
            problems.append(f"scanned_files {out.get('scanned_files')} != {files} files written")
        if problems:
            fail("validate_bundle: " + "; ".join(problems), outcome)
