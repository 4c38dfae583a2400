"""Concept cards of search_concepts / get_neighbors, and the temporal inputs they depend on.

A card is ``{id, path, type, title, description, tags, status, trust, stale, stale_after,
status_state}`` (spec/okf/contract/read.md §2 "per-card fields", §3.5): text fields are ``""`` when
absent or invalid; ``stale`` is a boolean only when ``as_of`` was given *and* ``stale_after``
is valid under the selected profile (no list_concepts quirk here), never an invented claim.

The field rules themselves (status, trust, staleness, source validity, ``as_of`` parsing) are
the shared ones of ``projection`` and ``temporal``; this module only assembles them. The part of
a card that ``as_of`` does not change (:data:`CardBase`, list_concepts' too) is made once per
concept and revision (:class:`CardBases`): it reads the frontmatter, which the snapshot loads
again from the bytes on each use rather than keep.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from knowspec.impl import runtime as process
from knowspec.impl.context import CallContext
from knowspec.impl.okf.concept import projection
from knowspec.impl.okf.concept import temporal

MAX_CARD_SETS = 16  # (root, profile) pairs whose card bases are kept

# The as_of-independent values of a card, in card order: status, status_state, trust,
# stale_after, generated_at, source_count, computation, legacy_derived (a tuple: a bundle keeps
# one per concept, and a dict each was ~1 MiB more on databricks-okf).
CardBase = tuple[Any, ...]


@dataclass(frozen=True)
class TemporalChoice:
    """The selected profile and the validated ``as_of`` (``None`` when not given)."""

    profile: str
    as_of: temporal.AsOf | None = None

    @property
    def as_of_echo(self) -> str | None:
        return self.as_of.echo if self.as_of is not None else None


def temporal_choice(profile: str, as_of: str | None) -> TemporalChoice:
    """Parse ``as_of`` under the profile (``invalid_request`` when it does not fit)."""
    return TemporalChoice(profile, temporal.parse_as_of(as_of, profile))


def card_base(concept: Any, profile: str) -> CardBase:
    """The as_of-independent part of a card (:data:`CardBase`). Its parts cut the frontmatter
    and the body from the concept's bytes several times: they are read from the file once."""
    with concept.bytes_in_hand():
        fm = concept.frontmatter
        status, state = projection.status_fields(fm)
        return (status, state, projection.trust_tier(fm), projection.stale_after(fm, profile),
                projection.generated_at(fm), len(projection.valid_sources(concept, profile)),
                projection.computation_summary(concept), projection.legacy_flags(concept))


def _shared_parts(base: CardBase, alike: dict[str, Any]) -> CardBase:
    """``base`` with each of its mappings replaced by an equal one already kept, if any.

    Bases are read, never changed (a card copies their mappings), and most concepts of a
    bundle have the same status state, computation summary and legacy flags."""
    return tuple(alike.setdefault(repr(value), value) if type(value) is dict else value for value in base)


class CardBases:
    """The card bases of one revision under one profile, made as concepts are asked (a search's
    hits, a neighbourhood, every concept for list_concepts). A base is used only for the Concept
    object it was made from."""

    def __init__(self, profile: str, carried: dict[str, tuple[Any, CardBase]]) -> None:
        self.profile = profile
        self._held = carried  # path -> (Concept, its base)
        self._alike: dict[str, Any] = {}

    def of(self, concept: Any) -> CardBase:
        held = self._held.get(concept.path)
        if held is None or held[0] is not concept:
            held = (concept, _shared_parts(card_base(concept, self.profile), self._alike))
            self._held[concept.path] = held
        return held[1]

    def of_all(self, concepts: Iterable[Any], check_cancelled: Callable[[], None]) -> list[CardBase]:
        """:meth:`of` every concept, in order: all made before the caller builds anything from
        them, so that the kept bases do not sit among a big answer's transient objects (Python
        returns an arena only once nothing in it lives: interleaved, list_concepts left 5.8 MiB
        more resident on databricks-okf)."""
        out = []
        for index, concept in enumerate(concepts):
            if index % 256 == 0:
                check_cancelled()
            out.append(self.of(concept))
        return out

    def carried_to(self, snapshot: Any) -> "CardBases":
        """Bases for ``snapshot``'s revision: those of its very same (unchanged) Concept objects."""
        carried = {}
        for concept in snapshot.concepts.values():
            held = self._held.get(concept.path)
            if held is not None and held[0] is concept:
                carried[concept.path] = held
        return CardBases(self.profile, carried)


def card_bases(snapshot: Any, profile: str, ctx: CallContext) -> CardBases:
    """The card bases of ``snapshot`` under ``profile``, kept per root and revision (runtime
    cache ``okf.cards``); a new revision starts from the previous one's unchanged concepts."""
    cache = process.of(ctx).cache("okf.cards", max_entries=MAX_CARD_SETS)
    key = (snapshot.root, profile)
    previous = cache.peek(key)  # taken before ``get``, which drops a stale entry before it builds

    def build() -> CardBases:
        return CardBases(profile, {}) if previous is None else previous.carried_to(snapshot)

    return cache.get(key, snapshot.revision, build)


def card(concept: Any, choice: TemporalChoice, base: CardBase) -> dict[str, Any]:
    """The card of one concept under the selected profile and as_of (``base``: its
    :func:`card_base` under that profile)."""
    status, state, trust, stale_after = base[:4]
    stale = projection.stale_at(stale_after, choice.profile, choice.as_of)
    return {
        "id": concept.id,
        "path": concept.path,
        "type": concept.type or "",
        "title": concept.title or "",
        "description": concept.description or "",
        "tags": list(concept.tags),
        "status": status,
        "trust": trust,
        "stale": stale,
        "stale_after": stale_after,
        "status_state": dict(state),
    }


def valid_sources(concept: Any) -> list[dict[str, str]]:
    """``{id, resource, title}`` of the concept's valid sources under the date profile.

    get_neighbors judges provenance with date-profile validity whatever profile was chosen.
    """
    return [
        {"id": s["id"], "resource": s["resource"], "title": s["title"]}
        for s in projection.valid_sources(concept, temporal.DATE_PROFILE)
    ]
