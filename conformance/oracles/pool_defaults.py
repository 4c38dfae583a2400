"""Input defaults, restated from the contract: what a call omitting an argument must answer.

A call that leaves out an argument with a schema ``default`` must answer exactly as the same call
naming that value (spec/docpool/contract.md §5: doc_search ``mode`` fts and ``limit`` 10,
help_search ``limit`` 10, doc_entities ``limit`` 20). The probes search for what the suite's pool
holds more of than the default limit, so a server ignoring the default (all rows, or 5) differs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from knowspec.conformance.contract import ToolContract
from knowspec.conformance.generate import resolved
from knowspec.conformance.pool_fixture import PoolFixture, run_tag


@dataclass(frozen=True)
class DefaultProbe:
    """One argument left out of ``arguments`` versus named with its ``default``; ``matches`` is how
    many rows the fixture holds for the call, ``limit`` the limit in force in both calls."""

    tool: str
    argument: str
    default: Any
    arguments: dict[str, Any]
    matches: int
    limit: int | None

    @property
    def omitted(self) -> dict[str, Any]:
        return {k: v for k, v in self.arguments.items() if k != self.argument}

    @property
    def named(self) -> dict[str, Any]:
        return {**self.arguments, self.argument: self.default}

    @property
    def expected_count(self) -> int:
        """Rows both calls return: all matches, cut at the limit in force."""
        return self.matches if self.limit is None else min(self.matches, self.limit)

    @property
    def discriminates(self) -> bool:
        """Whether the fixture holds more rows than a default limit, so ignoring it shows."""
        return self.argument != "limit" or self.matches > self.default


def input_defaults(tool: ToolContract) -> dict[str, Any]:
    """The ``default`` of every top-level input property (``$ref``s followed)."""
    out = {}
    for name, prop in tool.input_properties.items():
        schema = resolved(tool.input_schema, prop) if isinstance(prop, dict) else {}
        if "default" in schema:
            out[name] = schema["default"]
    return out


def _search_arguments(tool: str, docs: PoolFixture, help_pool: PoolFixture | None) -> tuple[dict[str, Any], int] | None:
    """A query every topic of one collection matches (the run tag begins each topic's own word and
    words of 3+ characters match as prefixes), with how many topics that is."""
    if tool == "doc_search":
        return {"query": run_tag(docs.token), "collection": docs.open_id}, len(docs.topics_in(docs.open_id))
    if tool == "help_search" and help_pool is not None:
        return {"query": run_tag(help_pool.token)}, len(help_pool.topics)
    if tool == "doc_entities":
        return {"q": docs.token}, sum(1 for e in docs.entities if docs.token in e.key.lower())
    return None


def default_probes(tool: ToolContract, docs: PoolFixture, help_pool: PoolFixture | None) -> list[DefaultProbe]:
    """One probe per defaulted argument; the other defaulted arguments are named in both calls, so
    each comparison isolates one default."""
    found = _search_arguments(tool.name, docs, help_pool)
    defaults = input_defaults(tool)
    if found is None or not defaults:
        return []
    base, matches = found
    probes = []
    for argument, value in sorted(defaults.items()):
        others = {k: v for k, v in defaults.items() if k != argument}
        limit = value if argument == "limit" else others.get("limit")
        probes.append(DefaultProbe(tool.name, argument, value, {**base, **others}, matches, limit))
    return probes


def row_keys(tool: str, rows: list[Any]) -> list[tuple[Any, ...]]:
    """What identifies a row, in answer order: a topic by collection and slug, an entity by collection, kind and key."""
    fields = {"doc_search": ("collection", "slug"), "help_search": ("slug",),
              "doc_entities": ("collection", "kind", "key")}[tool]
    return [tuple(r.get(f) for f in fields) if isinstance(r, dict) else (r,) for r in rows]
