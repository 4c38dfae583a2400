"""Concept cards of search_concepts / get_neighbors, and the temporal inputs they depend on.

A card is ``{id, path, type, title, description, tags, status, trust, stale, stale_after,
status_state}`` (spec/okf/contract/read.md §2 "per-card fields", §3.5): text fields are ``""`` when
absent or invalid; ``stale`` is a boolean only when ``as_of`` was given *and* ``stale_after``
is valid under the selected profile (no list_concepts quirk here), never an invented claim.

The field rules themselves (status, trust, staleness, source validity, ``as_of`` parsing) are
the shared ones of ``projection`` and ``temporal``; this module only assembles them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from knowspec.impl.okf.concept import projection
from knowspec.impl.okf.concept import temporal


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


def card(concept: Any, choice: TemporalChoice) -> dict[str, Any]:
    """The card of one concept under the selected profile and as_of."""
    fm = concept.frontmatter
    status, state = projection.status_fields(fm)
    stale_after, stale = projection.staleness(fm, choice.profile, choice.as_of)
    return {
        "id": concept.id,
        "path": concept.path,
        "type": concept.type or "",
        "title": concept.title or "",
        "description": concept.description or "",
        "tags": list(concept.tags),
        "status": status,
        "trust": projection.trust_tier(fm),
        "stale": stale,
        "stale_after": stale_after,
        "status_state": state,
    }


def valid_sources(concept: Any) -> list[dict[str, str]]:
    """``{id, resource, title}`` of the concept's valid sources under the date profile.

    get_neighbors judges provenance with date-profile validity whatever profile was chosen.
    """
    return [
        {"id": s["id"], "resource": s["resource"], "title": s["title"]}
        for s in projection.valid_sources(concept, temporal.DATE_PROFILE)
    ]
