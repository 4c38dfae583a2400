"""Oracle checks for the OKF read tools other than search_concepts/get_neighbors.

Each check writes its own bundles (``fixtures/model.py``) and compares the target's answers with
``oracles/okf_reads.py``: list_concepts cards and staleness at the day and instant boundaries,
read_concept raw text and parts and its whole projection (``oracles/okf_cards.py``), search_sections
hits (``oracles/okf_sections.py``: sections, BM25, snippets) and fingerprints, get_semantic_graph
nodes and relations, validate_bundle counts against its diagnostics and a known error. The cards of
search_concepts and get_neighbors are judged in ``okf_cards.py``.
"""

from __future__ import annotations

import json
from typing import Any

from knowspec.conformance.checks.common import (
    SCORE_TOLERANCE, advertised_only, fail, require_result, said, score_differs, unsuccessful,
)
from knowspec.conformance.checks.registry import CheckContext, check, tools_named
from knowspec.conformance.fixtures.model import Bundle, Concept, Link, Relation, Section, Source
from knowspec.conformance.fixtures.strategies import (assets_bundle, bundles, cafe_bundle, cards_bundle,
                                                     computations_bundle, neighbors_bundle, sources_bundle,
                                                     stamped_bundle, wide_bundle, windows_bundle)
from knowspec.conformance.oracles import okf_cards as cards
from knowspec.conformance.oracles import okf_legacy_graph as legacy_graph
from knowspec.conformance.oracles import okf_reads as oracle
from knowspec.conformance.oracles import okf_sections as sections
from knowspec.conformance.oracles import okf_strict as strict
from knowspec.conformance.oracles.go_encoding import go_text_problem
from knowspec.conformance.oracles.okf_assets import asset_problems
from knowspec.conformance.oracles.okf_computations import contract_problems
from knowspec.conformance.oracles.okf_graph_children import child_problems, concept_id_of, iri_of
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


def temporal_cases() -> list[tuple[Bundle, dict[str, Any]]]:
    """Bundles with the temporal arguments each is called with: no as_of (stale null), the day
    before, of and after a date stale_after, and the instant boundary under the instant profile."""
    out: list[tuple[Bundle, dict[str, Any]]] = []
    for bundle, boundary in ((cards_bundle(), "2025-03-01"), (dated_bundle(), "2025-03-01")):
        out.append((bundle, {}))
        out += [(bundle, {"as_of": as_of}) for as_of, _ in oracle.day_boundaries(boundary)]
    out += [(instant_bundle(), {"as_of": as_of, "temporal_profile": INSTANT})
            for as_of, _ in oracle.instant_boundaries("2025-01-10T12:00:00+02:00")]
    out += [(bundle, {}) for bundle in (cafe_bundle(), sources_bundle(), neighbors_bundle())]
    return out


# ---- list_concepts ----------------------------------------------------------------------------

def _compare_cards(ctx: CheckContext, bundle: Bundle, args: dict[str, Any], profile: str,
                   fresh: bool = False) -> None:
    path = str(ctx.bundles.path_of(bundle, fresh=fresh))
    outcome = success(ctx, {"bundle_path": path, **args})
    got = outcome.structured.get("concepts")
    want = [cards.expected_list_card(card, bundle.concept(card["id"]))
            for card in oracle.expected_cards(bundle, args.get("as_of"), profile)]
    if not isinstance(got, list) or len(got) != len(want):
        fail(f"list_concepts returned {len(got) if isinstance(got, list) else got} cards for "
             f"{len(want)} concepts", outcome)
    for card, expected in zip(got, want):
        diff = {k: card.get(k) for k in expected if card.get(k) != expected[k]}
        if diff:
            fail(f"list_concepts card {expected['id']!r} (as_of {args.get('as_of')}, {profile}): {diff} "
                 f"!= {({k: expected[k] for k in diff})}", outcome)
    if ctx.require_tool().text_fallback == "custom":
        problems = [custom_text_problem(ctx, outcome, summary) for summary in oracle.legacy_summaries(bundle)]
        problem = None if None in problems else problems[0]
        if problem:
            fail(f"list_concepts text is not the legacy summary of the same cards in the same order ({problem})",
                 outcome)


def custom_text_problem(ctx: CheckContext, outcome: CallOutcome, expected: Any) -> str | None:
    """Why the one text item is not ``expected`` as the family's encoder writes it (``go``: the
    bytes of Go's json.Marshal, keys in the given order; any other: the same JSON value), or None."""
    if len(outcome.texts) != 1:
        return f"{len(outcome.texts)} text items, expected one"
    text = outcome.texts[0]
    if ctx.require_tool().text_encoder == "go":
        return go_text_problem(text, expected)
    try:
        same = json.loads(text) == expected
    except ValueError:
        same = False
    return None if same else "a different JSON value"


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
    for bundle in (cafe_bundle(), sources_bundle(), wide_bundle(30, "wide30"), cards_bundle(), stamped_bundle(),
                   windows_bundle(), computations_bundle()):
        _compare_cards(ctx, bundle, {}, "date-3fcbb9f")
    _compare_cards(ctx, windows_bundle(), {"temporal_profile": INSTANT}, INSTANT)

    def test(bundle: Bundle) -> None:
        _compare_cards(ctx, bundle, {"as_of": "2001-06-15"}, "date-3fcbb9f", fresh=True)

    ctx.run_property(bundles(), test, max_examples=max(2, ctx.config.max_examples // 3))


# ---- read_concept -----------------------------------------------------------------------------

@check("oracle_read_concept", f"{READ}#3.2 (raw text, frontmatter bytes, body, every projection field the "
       "frontmatter fixes, legacy_fallback; unknown ID)", **for_tool("read_concept"))
def oracle_read_concept(ctx: CheckContext) -> None:
    """read_concept returns the file's own frontmatter and body (less exactly one trailing
    newline), its text is the whole file, the projection is the frontmatter's typed view
    (``oracles/okf_cards.py``), and an ID the bundle lacks is concept_not_found."""
    for bundle, profile in ((dated_bundle(), None), (sources_bundle(), None), (cafe_bundle(), None),
                            (cards_bundle(), None), (stamped_bundle(), None), (instant_bundle(), INSTANT),
                            (windows_bundle(), None), (windows_bundle(), INSTANT), (computations_bundle(), None)):
        path = str(ctx.bundles.path_of(bundle))
        _check_unknown_id(ctx, bundle, path)
        for concept in bundle.concepts:
            _check_read(ctx, concept, {"bundle_path": path, "concept_id": concept.id}
                        | ({"temporal_profile": profile} if profile else {}))


def _check_read(ctx: CheckContext, concept: Concept, args: dict[str, Any]) -> None:
    outcome = success(ctx, args)
    got, want = outcome.structured, oracle.expected_read(concept)
    problems = [k for k in ("id", "path", "frontmatter_yaml", "body") if got.get(k) != want[k]]
    if outcome.texts and outcome.texts[0] != want["raw"]:
        problems.append("text (the file's raw text)")
    profile = args.get("temporal_profile", cards.DEFAULT_PROFILE)
    projection = cards.expected_projection(concept, profile)
    written = cards.inherited_windows_cleared(got.get("projection"), concept, profile)
    problems += [f"projection.{field} {_short(value)} != {_short(expected)}"
                 for field, (value, expected) in cards.field_differences(written, projection).items()]
    if got.get("legacy_fallback") != cards.legacy_fallback(concept):
        problems.append(f"legacy_fallback {got.get('legacy_fallback')} != {cards.legacy_fallback(concept)} (a v0.1 "
                        "fallback only without the key it stands in for: generated, sources)")
    if problems:
        fail(f"read_concept {concept.id!r} ({args.get('temporal_profile', 'date-3fcbb9f')}) differs from the "
             f"written file:" + _listed(problems), outcome)


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


def section_rules_bundle() -> Bundle:
    """The section and ranking rules one at a time: a preamble before the first heading, ATX levels
    1-3 (one with closing #s), a Setext heading over a fenced `# not a heading`, a heading at the
    body start, a whitespace-only preamble (dropped), a term in a title and in a heading, a first
    match past 80 runes of non-ASCII text in a section over 512 runes, ß against SS, a CRLF body,
    empty ATX headings (no section) and a two-line Setext heading (its lines' text joined), a
    frontmatter of ten lines, and a log and an asset that count in the fingerprint only."""
    retry = Concept(
        "retry", title="Retry guide", description="How retries wait", tags=("ops", "net"),
        sources=(Source("https://example.com/retry", id="rfc", title="Retry RFC"),),
        text="Preamble before any heading mentions jitter once.\n\n# Retry policy\n\nDeadline permits jitter.\n\n"
             "## Backoff ##\n\nBackoff adds jitter between attempts, and more jitter.\n\n### Limits\n\n"
             "Three attempts at most.\n\nSetext heading\n==============\n\nCalm text under a setext heading.\n\n"
             "```text\n# not a heading jitter\n```\n\nTail after the fence.")
    return Bundle("section-rules", (
        retry,
        Concept("jitter-notes", title="Jitter notes",
                text="# Overview\n\nPlain words only.\n\n## Jitter\n\nJitter spreads load."),
        Concept("blank-start", title="Blank start", text="   \n\n# Only heading\n\nText with jitter and deadline."),
        Concept("far", title="Far match", text="Ünïcödé " * 15 + "Straße jitter " + "tail " * 120),
        Concept("plain", title="Plain", text="Deadline only, no other words."),
        Concept("crlf", title="Windows", text="# Windows\r\nCRLF line with jitter\r\n\r\n## Second\r\nmore jitter"),
        Concept("odd-headings", title="Odd headings",
                text="Intro jitter\n\n#\n\nafter an empty heading\n\n## ##\n\nmore jitter\n\n"
                     "Line one\nline two jitter\n===\n\nunder a two-line heading"),
    ), extra_files={"log.md": "# Log\n\njitter jitter\n", "assets/jitter.txt": "jitter & <b>\n"})


MAX_LISTED = 4           # hit problems listed in one failure, one a line


def _section_problems(hits: list, expected: list[dict], limit: int) -> list[str]:
    """Hits against the oracle's first ``limit`` sections (ties already cut by concept ID and
    line_start): the same sections, each with the heading, line_end, snippet and score (within
    ``SCORE_TOLERANCE``) the bundle's bytes give."""
    matching = {(e["concept_id"], e["line_start"]) for e in expected}
    want = {(e["concept_id"], e["line_start"]): e for e in expected[:limit]}
    got = {(h.get("concept_id"), h.get("line_start")): h for h in hits if isinstance(h, dict)}
    problems = [f"{cid} L{start}: " + (f"matches, but is not among the first {limit} by score, concept_id, line_start"
                                       if (cid, start) in matching else "no section holding every term starts there")
                for cid, start in got if (cid, start) not in want]
    for key, w in want.items():
        h = got.get(key)
        if h is None:
            problems.append(f"{key[0]} L{key[1]}-{w['line_end']} ({w['heading']!r}) is missing")
            continue
        where = f"{key[0]} L{key[1]}"
        for field in ("heading", "line_end", "snippet"):
            if h.get(field) != w[field]:
                problems.append(f"{where}: {field} {_short(h.get(field))} != {_short(w[field])}")
        score = h.get("score")
        if score_differs(score, w["score"]):
            problems.append(f"{where}: score {score} != BM25 {w['score']:.12g} (relative tolerance {SCORE_TOLERANCE})")
    return problems


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


def _listed(problems: list[str]) -> str:
    more = [f"… and {len(problems) - MAX_LISTED} more"] if len(problems) > MAX_LISTED else []
    shown = problems[:MAX_LISTED] + more
    return "".join("\n  " + p for p in shown)


def _check_sections(ctx: CheckContext, bundle: Bundle, query: str, limit: int) -> None:
    path = ctx.bundles.path_of(bundle)
    outcome = success(ctx, {"bundle_path": str(path), "query": query, "limit": limit})
    out = outcome.structured
    hits = out.get("hits") or []
    terms = oracle.section_terms(query)
    expected = oracle.expected_section_hits(bundle, query)
    problems = []
    if out.get("query") != query:
        problems.append("query echo differs")
    if out.get("terms") != terms:
        problems.append(f"terms {out.get('terms')} != {terms}")
    if out.get("snapshot_revision") != sections.snapshot_revision(sections.captured_files(path)):
        problems.append("snapshot_revision is not the SHA-256 of the [{path,size,sha256}] records of every file")
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
    total = out.get("total")
    if total != len(expected):
        problems.append(f"total {total} != {len(expected)} sections holding every term")
    if not _whole(total) or total < len(hits) or out.get("truncated") != (total > len(hits)) \
            or len(hits) > limit or (total > len(hits) and len(hits) < limit):
        problems.append(f"total {total} / truncated {out.get('truncated')} / {len(hits)} hits / limit {limit}")
    hit_problems = _section_problems(hits, expected, limit)
    if problems or hit_problems:
        fail(f"search_sections {query!r} (limit {limit}):" + (" " + "; ".join(problems) if problems else "")
             + _listed(hit_problems), outcome)


@check("oracle_search_sections", f"{READ}#3.7 (sections, lines, headings, BM25 scores, snippets, order, terms, "
       "hashes, snapshot_revision)", **for_tool("search_sections"))
def oracle_search_sections(ctx: CheckContext) -> None:
    """Each hit is a section the suite cut from the files it wrote, with that section's lines,
    heading, snippet and BM25 score; order, totals and both fingerprints as the contract says."""
    for bundle, queries in (
        (sections_bundle(), (("needle", 20), ("needle", 2), ("thread needle", 20), ("NEEDLE Thread needle", 1),
                             ("absent", 5))),
        (section_rules_bundle(), (("jitter", 20), ("jitter", 3), ("STRASSE", 5), ("jitter deadline", 20),
                                  ("heading", 20), ("deadline", 20), ("oneline", 5))),
        (wide_bundle(30, "wide30"), (("needle hay", 100),)),
    ):
        for query, limit in queries:
            _check_sections(ctx, bundle, query, limit)


# ---- get_semantic_graph -----------------------------------------------------------------------

def graph_bundle() -> Bundle:
    return Bundle("graph", (
        Concept("g1", title="One", links=(Link("g2"), Link("g3", "fragment")),
                relations=(Relation("uses", "g2"), Relation("depends_on", "g3"), Relation("uses", "ghost"))),
        Concept("g2", title="Two", relations=(Relation("seeAlso", "g1"), Relation("uses", "g3"))),
        Concept("g3", title="Three", links=(Link("g1", "absolute"), Link("ghost", "broken"))),
    ))


def links_bundle() -> Bundle:
    """Every link form, repeated and self links, broken ones (``index`` is never a concept);
    relations to fragments declared once or not at all; subresources with relations of their own;
    a legacy ``timestamp``."""
    return Bundle("graph-links", (
        Concept("l1", title="Links", links=(
            Link("l2"), Link("l2"), Link("l1"), Link("l2", "fragment"), Link("l3", "query"), Link("gone", "broken"),
            Link("index", "broken"), Link("l2", "external"), Link("l2", "anchor"), Link("l2", "code_span"),
            Link("l2", "fenced"), Link("l2", "directory"), Link("l3", "absolute")),
            relations=(Relation("uses", "l2"), Relation("uses", "l3", "part"), Relation("uses", "l2", "nope"),
                       Relation("cites", "gone"))),
        Concept("l2", title="Sections", sections=(
            Section("s1", (Relation("uses", "l1"), Relation("cites", "l3", "part"))),
            Section("s2", (Relation("uses", "gone"),)))),
        Concept("l3", title="Part", fragments=("part",), timestamp="2025-01-02T03:04:05Z"),
    ))


def _plain(concept_id: str) -> bool:
    """An ID whose IRI is the same with or without percent-encoding (ASCII letters and digits)."""
    return concept_id.isascii() and concept_id.isalnum()


def _concept_nodes(nodes: list) -> dict[str, dict]:
    """The graph's ``proj:Concept`` nodes by concept ID (the IRI's local part, percent-decoded)."""
    return {concept_id_of(n.get("@id", "")): n for n in nodes
            if isinstance(n, dict) and n.get("@type") == "proj:Concept"}


def _concept_node_problems(bundle: Bundle, concepts: dict[str, dict], args: dict[str, Any] | None = None) -> list[str]:
    """What the concept nodes say wrongly, under the call's temporal profile and as_of."""
    profile, as_of = (args or {}).get("temporal_profile", cards.DEFAULT_PROFILE), (args or {}).get("as_of")
    return [f"{c.id}: {key} {got!r} != {want!r}" for c in bundle.concepts if c.id in concepts
            for key, (got, want) in cards.graph_concept_differences(concepts[c.id], c, profile, as_of).items()]


GRAPH_PROFILES = {cards.DEFAULT_PROFILE: "skosovsky/okf-v0.2", INSTANT: "skosovsky/okf-v0.2-instant"}


def _temporal_graph_problems(nodes: list, bundle: Bundle, args: dict[str, Any]) -> list[str]:
    """The projection's profile, each concept node's staleAfter, stalenessAsOf and stale, and the
    children (sources valid for the profile, their dates and windows)."""
    profile = args.get("temporal_profile", cards.DEFAULT_PROFILE)
    projection = [n.get("profile") for n in nodes if isinstance(n, dict) and n.get("@type") == "proj:Projection"]
    problems = [] if projection == [GRAPH_PROFILES[profile]] else [
        f"Projection profile {projection} != [{GRAPH_PROFILES[profile]!r}]"]
    return problems + _concept_node_problems(bundle, _concept_nodes(nodes), args) + child_problems(nodes, bundle, profile)


def _legacy_text_problems(ctx: CheckContext, outcome: CallOutcome, bundle: Bundle) -> list[str]:
    """What breaks the legacy JSON-LD text, for a family whose text fallback is custom."""
    if ctx.require_tool().text_fallback != "custom":
        return []
    if len(outcome.texts) != 1:
        return [f"{len(outcome.texts)} text items, expected the legacy JSON-LD"]
    return [f"text (legacy JSON-LD): {p}" for p in
            legacy_graph.legacy_problems(outcome.texts[0], bundle, ctx.require_tool().text_encoder)]


@check("oracle_semantic_graph", f"{READ} (v0.2 projection: a node per concept, its staleness as of a date or an "
       "instant, every relation, its provenance nodes, @graph by @id)", **for_tool("get_semantic_graph"))
def oracle_semantic_graph(ctx: CheckContext) -> None:
    """The graph holds a node per concept with its provenance nodes, each resolved relation and
    link once, sorted by @id."""
    for bundle in (graph_bundle(), dated_bundle(), links_bundle(), cards_bundle(), stamped_bundle()):
        path = str(ctx.bundles.path_of(bundle))
        outcome = success(ctx, {"bundle_path": path})
        nodes = outcome.structured.get("@graph") or []
        ids = [n.get("@id") for n in nodes if isinstance(n, dict)]
        problems = []
        if ids != sorted(ids) or len(set(ids)) != len(ids):
            problems.append("@graph is not sorted by @id and deduplicated")
        concepts = _concept_nodes(nodes)
        safe = {c.id for c in bundle.concepts if _plain(c.id)}
        if not safe <= set(concepts):
            problems.append(f"concept nodes missing: {sorted(safe - set(concepts))}")
        problems += _concept_node_problems(bundle, concepts)
        refs = set()
        for cid, node in concepts.items():
            value = node.get("references")
            for item in value if isinstance(value, list) else [value] if value else []:
                refs.add((cid, concept_id_of(iri_of(item))))
        want_refs = {r for r in oracle.graph_references(bundle) if r[0] in safe and _plain(r[1])}
        refs = {r for r in refs if _plain(r[1])}
        if refs != want_refs:
            problems.append(f"references {sorted(refs)} != the targets of resolved links, broken ones "
                            f"included, {sorted(want_refs)}")
        problems += child_problems(nodes, bundle)
        problems += _legacy_text_problems(ctx, outcome, bundle)
        if problems:
            fail("get_semantic_graph: " + "; ".join(problems[:6]), outcome)
    windows = [(windows_bundle(), {}), (windows_bundle(), {"temporal_profile": INSTANT})]
    for bundle, args in temporal_cases() + windows:
        outcome = success(ctx, {"bundle_path": str(ctx.bundles.path_of(bundle)), **args})
        problems = _temporal_graph_problems(outcome.structured.get("@graph") or [], bundle, args)
        if problems:
            fail(f"get_semantic_graph {args}: " + "; ".join(problems[:6]), outcome)

    def test(bundle: Bundle) -> None:
        outcome = success(ctx, {"bundle_path": str(ctx.bundles.path_of(bundle, fresh=True))})
        nodes = outcome.structured.get("@graph") or []
        concepts = _concept_nodes(nodes)
        problems = _concept_node_problems(bundle, concepts) + child_problems(nodes, bundle)
        if not bundle.ids <= set(concepts):
            problems.append(f"concept nodes missing: {sorted(bundle.ids - set(concepts))}")
        problems += _legacy_text_problems(ctx, outcome, bundle)
        if problems:
            fail("get_semantic_graph: " + "; ".join(problems[:6]), outcome)

    ctx.run_property(bundles(), test, max_examples=max(2, ctx.config.max_examples // 3))


@check("oracle_graph_assets", f"{READ} (Resource values: each concept's and source's resourceKind and "
       "resourceNode, one ReferencedAsset per bundle path a local value names, exists, the namings)",
       since=2, **for_tool("get_semantic_graph"))
def oracle_graph_assets(ctx: CheckContext) -> None:
    """Resource kinds by the first rule that applies, and the assets local values name, on the
    assets bundle (every rule) and on generated bundles."""
    def test(bundle: Bundle, fresh: bool) -> None:
        outcome = success(ctx, {"bundle_path": str(ctx.bundles.path_of(bundle, fresh=fresh))})
        problems = asset_problems(outcome.structured.get("@graph") or [], bundle)
        if problems:
            fail("get_semantic_graph: " + "; ".join(problems[:6]), outcome)

    test(assets_bundle(), False)
    test(computations_bundle(), False)
    ctx.run_property(bundles(), lambda bundle: test(bundle, True), max_examples=max(2, ctx.config.max_examples // 3))


@check("oracle_graph_computations", f"{READ} §1.11 (one AttestedComputationContract for an exact type "
       "Attested Computation, none for another: runtime, computationMode, receiptField; its ComputationParameters)",
       **for_tool("get_semantic_graph"))
def oracle_graph_computations(ctx: CheckContext) -> None:
    """Contracts in file and inline mode, with and without parameters, a bare one, and a type
    that differs only in case, on the computations bundle."""
    bundle = computations_bundle()
    outcome = success(ctx, {"bundle_path": str(ctx.bundles.path_of(bundle))})
    problems = contract_problems(outcome.structured.get("@graph") or [], bundle)
    if problems:
        fail("get_semantic_graph: " + "; ".join(problems[:6]), outcome)


# ---- validate_bundle --------------------------------------------------------------------------

SEVERITY_RANK = {"ERROR": 0, "WARN": 1, "INFO": 2}


def broken_bundle() -> Bundle:
    """One concept with no frontmatter at all and one whose frontmatter is not YAML: both are ERRORs."""
    return Bundle("broken", (Concept("ok", title="Fine"),),
                  extra_files={"plain.md": "no frontmatter here\n", "bad.md": "---\ntype: [\n---\nbody\n"})


@check("oracle_validate_bundle", "spec/okf/tools.toml#validate_bundle (counts = diagnostics; ERROR → not conformant; "
       f"strict temporal findings, {READ} §2)", **for_tool("validate_bundle"))
def oracle_validate_bundle(ctx: CheckContext) -> None:
    """Counts equal the diagnostics by severity; broken files are ERRORs naming the file; order
    holds; strict mode reports each malformed date and window and each reached boundary."""
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
        text_problem = custom_text_problem(ctx, outcome, oracle.legacy_report(out))
        if text_problem:
            problems.append(f"text is not the legacy report of the same diagnostics ({text_problem})")
        if problems:
            fail("validate_bundle: " + "; ".join(problems), outcome)
    for bundle, args in _strict_cases():
        outcome = success(ctx, {"bundle_path": str(ctx.bundles.path_of(bundle)), "strict": True, **args})
        problems = strict.strict_problems(outcome.structured.get("diagnostics") or [], bundle,
                                          args.get("temporal_profile", cards.DEFAULT_PROFILE), args.get("as_of"))
        if problems:
            fail(f"validate_bundle strict {args}: " + _listed(problems), outcome)


def _strict_cases() -> list[tuple[Bundle, dict[str, Any]]]:
    """Strict runs: malformed dates and windows under both profiles, stale as of the days around a
    date boundary and around an instant."""
    out: list[tuple[Bundle, dict[str, Any]]] = [(windows_bundle(), {}), (windows_bundle(), {"temporal_profile": INSTANT})]
    out += [(dated_bundle(), {"as_of": as_of}) for as_of, _ in oracle.day_boundaries("2025-03-01")]
    out += [(instant_bundle(), {"as_of": as_of, "temporal_profile": INSTANT})
            for as_of, _ in oracle.instant_boundaries("2025-01-10T12:00:00+02:00")]
    return out
