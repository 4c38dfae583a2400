"""Values derived from a bundle snapshot (search indexes, edge indexes, JSON-LD renders), kept in
the runtime's ``okf.derived`` cache: key (root, what), stamp the snapshot revision.

Its own module so that the tools and the graph renderer share it without importing each other.
"""

from __future__ import annotations

from typing import Any, Callable

from knowspec.impl import runtime as process
from knowspec.impl.errors import ToolError

MAX_DERIVED = 256  # values derived from snapshots (indexes, renders), all roots together


def per_snapshot(snapshot: Any, name: str, build: Callable[[], Any]) -> Any:
    """A value derived from the snapshot, built once per revision (the runtime's
    ``okf.derived`` cache: key root and ``name``, stamp the revision).

    A ``resource_limit`` raised while building is remembered too: the same snapshot would hit
    the same bound again, so later calls fail at once instead of rebuilding.
    """
    def remembered_build() -> Any:
        try:
            return build()
        except ToolError as exc:
            if exc.code != "resource_limit":
                raise
            return exc.detached()  # its traceback's frames hold the half-built value

    value = derived_cache(process.current()).get((getattr(snapshot, "root", None), name),
                                                    getattr(snapshot, "revision", None), remembered_build)
    if isinstance(value, ToolError):
        raise value.detached()
    return value


def derived_cache(runtime: process.Runtime) -> process.Cache:
    """Values derived from a snapshot, keyed by (root, what), stamped with the revision."""
    return runtime.cache("okf.derived", max_entries=MAX_DERIVED, sizeof=_derived_size)


def _derived_size(value: Any) -> int:
    nbytes = getattr(value, "nbytes", None)
    if callable(nbytes):
        return nbytes()
    return len(value) if isinstance(value, (str, bytes)) else 0
