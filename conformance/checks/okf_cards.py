"""Oracle checks of the concept cards outside list_concepts: search_concepts hits and get_neighbors.

differential_search and differential_neighbors judge which concepts and edges come back; these
checks judge what each returned card says about its concept, field by field, against
``oracles/okf_cards.py`` under the call's own as_of and temporal_profile (read.md §2, §3.5, §3.6).
"""

from __future__ import annotations

from typing import Any, Callable

from knowspec.conformance.checks.common import fail
from knowspec.conformance.checks.okf_oracles import READ, for_tool, success, temporal_cases
from knowspec.conformance.checks.registry import CheckContext, check
from knowspec.conformance.fixtures.model import Bundle
from knowspec.conformance.fixtures.strategies import bundles
from knowspec.conformance.oracles import okf_cards as cards
from knowspec.conformance.target import CallOutcome

DATE = "date-3fcbb9f"
MAX_LISTED = 4   # card problems listed in one failure, one a line


def card_problems(where: str, got: Any, concept_id: str, bundle: Bundle, args: dict[str, Any]) -> list[str]:
    """The differences between one returned card and the card of ``concept_id`` in ``bundle``."""
    if concept_id not in bundle.ids:
        return [f"{where}: names {concept_id!r}, which the bundle lacks"]
    want = cards.concept_card(bundle.concept(concept_id), args.get("as_of"), args.get("temporal_profile", DATE))
    return [f"{where} ({concept_id!r}): {field} {got_value!r} != {want_value!r}"
            for field, (got_value, want_value) in cards.field_differences(got, want).items()]


def _report(tool: str, args: dict[str, Any], problems: list[str], outcome: CallOutcome) -> None:
    if problems:
        shown = problems[:MAX_LISTED] + ([f"… and {len(problems) - MAX_LISTED} more"]
                                         if len(problems) > MAX_LISTED else [])
        temporal = {k: v for k, v in args.items() if k in ("as_of", "temporal_profile")}
        fail(f"{tool} cards {temporal or '(no as_of)'} differ from the concepts written:"
             + "".join("\n  " + p for p in shown), outcome)


# ---- search_concepts --------------------------------------------------------------------------

def _check_search_cards(ctx: CheckContext, bundle: Bundle, args: dict[str, Any], path: str) -> None:
    """One search per concept ID (an ID always matches its own concept), every hit's card judged."""
    for concept in bundle.concepts:
        call = {"bundle_path": path, "query": concept.id, "limit": 100, **args}
        outcome = success(ctx, call)
        problems = []
        for n, hit in enumerate(outcome.structured.get("hits") or []):
            card = hit.get("concept") if isinstance(hit, dict) else None
            cid = card.get("id") if isinstance(card, dict) else None
            problems += card_problems(f"hits[{n}].concept", card, str(cid), bundle, args)
        _report("search_concepts", call, problems, outcome)


@check("oracle_search_cards", f"{READ}#3.5 (each hit's card: type, title, description, tags, status, "
       "status_state, trust, stale_after, stale under the call's as_of)", **for_tool("search_concepts"))
def oracle_search_cards(ctx: CheckContext) -> None:
    """Every search hit carries its concept's card as the frontmatter gives it."""
    _on_every_case(ctx, _check_search_cards)


def _on_every_case(ctx: CheckContext, judge: Callable[[CheckContext, Bundle, dict[str, Any], str], None]) -> None:
    """``judge`` on the temporal fixtures at each ``as_of``, then on generated bundles."""
    for bundle, args in temporal_cases():
        judge(ctx, bundle, args, str(ctx.bundles.path_of(bundle)))

    def test(bundle: Bundle) -> None:
        judge(ctx, bundle, {"as_of": "2001-06-15"}, str(ctx.bundles.path_of(bundle, fresh=True)))

    ctx.run_property(bundles(max_concepts=4), test, max_examples=max(2, ctx.config.max_examples // 3))


# ---- get_neighbors ----------------------------------------------------------------------------

def concept_part(ref: str) -> str:
    """The concept ID of a relation ref (read.md §1.2): ``\\#`` is a ``#`` of the ID, the first
    unescaped ``#`` starts the fragment."""
    out, i = [], 0
    while i < len(ref):
        if ref.startswith("\\#", i):
            out.append("#")
            i += 2
        elif ref[i] == "#":
            break
        else:
            out.append(ref[i])
            i += 1
    return "".join(out)


def edge_ends(edge: dict[str, Any]) -> tuple[str, str]:
    """The concepts an edge's cards describe: plain IDs for navigation, ref concept parts for relations."""
    ends = (str(edge.get("from", "")), str(edge.get("to", "")))
    return (concept_part(ends[0]), concept_part(ends[1])) if edge.get("kind") == "relation" else ends


def _check_neighbor_cards(ctx: CheckContext, bundle: Bundle, args: dict[str, Any], path: str) -> None:
    """Neighbours of every concept, both directions: the focus card and both cards of each edge."""
    for concept in bundle.concepts:
        call = {"bundle_path": path, "concept_id": concept.id, "direction": "both", "limit": 100, **args}
        outcome = success(ctx, call)
        out = outcome.structured
        problems = card_problems("concept", out.get("concept"), concept.id, bundle, args)
        for n, edge in enumerate(out.get("edges") or []):
            if not isinstance(edge, dict):
                continue
            source, target = edge_ends(edge)
            problems += card_problems(f"edges[{n}].source", edge.get("source"), source, bundle, args)
            problems += card_problems(f"edges[{n}].target", edge.get("target"), target, bundle, args)
        _report("get_neighbors", call, problems, outcome)


@check("oracle_neighbor_cards", f"{READ}#3.6 (the focus card and both edge cards, those of the concept part of "
       "a relation ref, under the call's as_of)", **for_tool("get_neighbors"))
def oracle_neighbor_cards(ctx: CheckContext) -> None:
    """The selected concept's card and each edge end's card are their concepts' cards."""
    _on_every_case(ctx, _check_neighbor_cards)
