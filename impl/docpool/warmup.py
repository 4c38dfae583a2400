"""At server start, in the background: what each document pool's first search would otherwise pay.

A fresh server's first full-text search of a pool paid one-time costs besides the search: the
storage driver's import (psycopg; firebird-driver and the embedded engine: each 0.2-1 s on the
2-core test machine), the first connection, and loading the full-text index its import persisted
(the head only, for PostgreSQL and Firebird). ``start`` pays them once, for every distinct pool
the catalog names, in one daemon thread; ``serve`` answers once it is done (or after
``READY_WAIT_SECONDS``), and a search that comes earlier waits for the same import or cache
entry rather than doing the work twice.
A pool whose import persisted no index has it built here, not in its first search.
Failures are only logged: a pool that cannot be opened now fails its own calls as before.
The catalog is read once at start (``pool_locations``); only when it names a pool does the
thread load the storages: a server without document pools never loads them (numpy, the
drivers) unless a doc tool is called.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from knowspec.impl.docpool.catalog_store import CatalogTarget
from knowspec.impl.errors import ToolError

if TYPE_CHECKING:
    from knowspec.impl.docpool import catalog

log = logging.getLogger("knowspec.docpool.warmup")
# How long ``serve`` waits for the warm-up before it answers: a first search that arrives while
# the pools still warm waits for the same work, so the server is ready once they are (or later
# than this: an unreachable pool then fails its own calls, not the start).
READY_WAIT_SECONDS = 2.0


def locations(catalog_target: CatalogTarget) -> list[catalog.PoolLocation]:
    """One location per distinct pool of the catalog's databases (those with a document pool)."""
    from knowspec.impl.docpool import catalog

    seen: dict[tuple[str, str], catalog.PoolLocation] = {}
    for entry in catalog.list_databases(catalog_target):
        try:
            location = catalog.resolve_pool_location(catalog_target, entry.name)
        except ToolError:
            continue  # no document pool
        seen.setdefault((location.storage, location.dsn), location)
    return list(seen.values())


def pool_locations(catalog_target: CatalogTarget) -> list[catalog.PoolLocation]:
    """``locations``, or none when the catalog cannot be read: its calls then fail with their own
    errors, not the start. Read once at start: ``serve`` imports the document tools when there
    is a pool (the first search then does not pay for their modules), and ``warm`` opens them."""
    try:
        return locations(catalog_target)
    except Exception as exc:
        log.debug("pool warm-up skipped: %s", exc)
        return []


def warm(found: list[catalog.PoolLocation]) -> None:
    """Open each pool once and load its full-text index into the process's caches."""
    if not found:
        return
    from knowspec.impl.docpool import pools

    for location in found:
        try:
            with pools.open_location(location) as pool:
                pool.fulltext_index(pool.change_stamp())
        except Exception as exc:
            log.debug("pool warm-up of %s skipped: %s", location.docs_database, exc)


def start(found: list[catalog.PoolLocation]) -> threading.Thread:
    """``warm`` in a daemon thread (``serve`` waits for it at most ``READY_WAIT_SECONDS``)."""
    thread = threading.Thread(target=warm, args=(found,), daemon=True, name="knowspec-pool-warmup")
    thread.start()
    return thread
