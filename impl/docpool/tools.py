"""The 11 help_* / doc_* tool handlers (seed 001): argument routing, pool opening, rendering.

Each handler opens the pool it reads for this call only and closes it before returning. The
help pool (``netsim-help``) is read without authorization; document pools filter every topic
through the caller's access. doc_search / doc_get with ``collection = "netsim-help"`` read the
help pool; doc_collections lists the help pool's collections first. Array results are wrapped
as ``{"results": [...]}`` (the tool table's ``wrap``), so the text content is the seed's array.
Each handler takes its generated input model: the schema already applied defaults and bounds
and refused a call that names no topic (doc_get: ``slug``, or ``kind`` and ``key``; help_get_topic:
``slug``, ``form_class`` or ``islem_kodu``).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

from knowspec.generated.models.docpool.doc_collections_input_schema import DocCollectionsInput
from knowspec.generated.models.docpool.doc_entities_input_schema import DocEntitiesInput
from knowspec.generated.models.docpool.doc_entity_input_schema import DocEntityInput
from knowspec.generated.models.docpool.doc_get_input_schema import DocGetInput
from knowspec.generated.models.docpool.doc_links_input_schema import DocLinksInput
from knowspec.generated.models.docpool.doc_search_input_schema import DocSearchInput
from knowspec.generated.models.docpool.doc_stats_input_schema import DocStatsInput
from knowspec.generated.models.docpool.help_form_info_input_schema import HelpFormInfoInput
from knowspec.generated.models.docpool.help_get_topic_input_schema import HelpGetTopicInput
from knowspec.generated.models.docpool.help_search_input_schema import HelpSearchInput
from knowspec.generated.models.docpool.help_stats_input_schema import HelpStatsInput
from knowspec.generated.constants import SEARCH_MODE_FTS
from knowspec.impl.context import CallContext, ToolOutput
from knowspec.impl.docpool import entities, search, stats, topics
from knowspec.impl.docpool.acl import access_for
from knowspec.impl.docpool.pools import HELP_COLLECTION, document_pool, help_pool, requested_database
from knowspec.impl.docpool.storage.base import UNRESTRICTED, Access, PoolStorage
from knowspec.impl.errors import ToolError


@contextmanager
def _reading(opener: Callable[[], PoolStorage], operation: str) -> Iterator[PoolStorage]:
    """Open a pool for one call; a storage failure while answering is ``storage_error``: the
    storage names its driver's errors (``PoolStorage.driver_errors``), so every backend maps alike."""
    pool = opener()
    try:
        yield pool
    except pool.driver_errors as exc:
        raise ToolError("storage_error", f"{operation}: pool storage failed ({exc})", retryable=True) from exc
    finally:
        pool.close()


def _doc_pool(ctx: CallContext, database: str | None,
             collection: str | None = None) -> tuple[Callable[[], PoolStorage], Access]:
    """The pool a doc_* call reads and the access it reads with."""
    if collection == HELP_COLLECTION:
        return (lambda: help_pool(ctx)), UNRESTRICTED
    return (lambda: document_pool(ctx, database)), access_for(ctx)


def _agent_version(ctx: CallContext) -> str:
    return getattr(ctx.settings, "agent_version", "") or ""


def _results(rows: list[dict[str, Any]]) -> ToolOutput:
    return ToolOutput({"results": rows})


# -- doc_* ----------------------------------------------------------------------------------

def doc_collections(args: DocCollectionsInput, ctx: CallContext) -> ToolOutput:
    """Allowed collections, ``netsim-help`` (the help pool) first."""
    rows: list[dict[str, Any]] = []
    if ctx.settings.help_db_path.is_file():
        with _reading(lambda: help_pool(ctx), "doc_collections") as pool:
            rows += stats.collection_rows(pool, UNRESTRICTED)
    if requested_database(ctx, args.database):
        opener, access = _doc_pool(ctx, args.database)
        with _reading(opener, "doc_collections") as pool:
            rows += [r for r in stats.collection_rows(pool, access) if r["id"] != HELP_COLLECTION]
    rows.sort(key=lambda r: (r["id"] != HELP_COLLECTION,))
    return _results(rows)


def doc_search(args: DocSearchInput, ctx: CallContext) -> ToolOutput:
    collection = args.collection
    opener, access = _doc_pool(ctx, args.database, collection)
    with _reading(opener, "doc_search") as pool:
        ranked = search.search_pool(ctx, pool, args.query, access, mode=args.mode,
                                    limit=args.limit, collection=collection)
        links = pool.topic_links([r.topic_id for r in ranked])
    return _results([{
        "collection": r.collection, "slug": r.slug, "title": r.title, "breadcrumb": r.breadcrumb,
        "snippet": r.snippet, "score": r.score, "method": r.method,
        "links": [{"kind": l.kind, "key": l.key} for l in links.get(r.topic_id, [])],
    } for r in ranked])


def doc_get(args: DocGetInput, ctx: CallContext) -> ToolOutput:
    collection, slug, kind, key = args.collection, args.slug, args.kind, args.key
    opener, access = _doc_pool(ctx, args.database, collection)
    with _reading(opener, "doc_get") as pool:
        if slug:
            topic = pool.topic(slug, access, collection)
            missing = slug
        else:
            assert kind and key  # the schema's anyOf: slug, or kind and key
            topic = topics.topic_for_entity(pool, kind, key, access, collection)
            missing = f"{kind} {key}"
        if topic is None:
            raise topics.topic_not_found(missing)
        return ToolOutput(topics.doc_view(pool, topic, access))


def doc_entity(args: DocEntityInput, ctx: CallContext) -> ToolOutput:
    opener, access = _doc_pool(ctx, args.database)
    with _reading(opener, "doc_entity") as pool:
        return ToolOutput(entities.entity_view(pool, args.kind, args.key, access, _agent_version(ctx)))


def doc_entities(args: DocEntitiesInput, ctx: CallContext) -> ToolOutput:
    opener, _ = _doc_pool(ctx, args.database)
    with _reading(opener, "doc_entities") as pool:
        return _results(entities.entity_listing(pool, args.kind, args.q, args.limit))


def doc_links(args: DocLinksInput, ctx: CallContext) -> ToolOutput:
    opener, access = _doc_pool(ctx, args.database)
    with _reading(opener, "doc_links") as pool:
        return _results(topics.links_view(pool, args.kind, args.key, access))


def doc_stats(args: DocStatsInput, ctx: CallContext) -> ToolOutput:
    opener, access = _doc_pool(ctx, args.database)
    with _reading(opener, "doc_stats") as pool:
        return ToolOutput(stats.pool_stats(pool, access))


# -- help_* ---------------------------------------------------------------------------------

def help_search(args: HelpSearchInput, ctx: CallContext) -> ToolOutput:
    """doc_search over the help pool; ``module`` keeps topics linked to that module entity."""
    module = args.module
    with _reading(lambda: help_pool(ctx), "help_search") as pool:
        linked_to = None
        if module:
            linked_to = (entities.MODULE, entities.resolve(pool, entities.MODULE, module).key)
        ranked = search.search_pool(ctx, pool, args.query, UNRESTRICTED, mode=SEARCH_MODE_FTS,
                                    limit=args.limit, linked_to=linked_to)
        links = pool.topic_links([r.topic_id for r in ranked])
    return _results([{
        "slug": r.slug, "title": r.title, "breadcrumb": r.breadcrumb, "snippet": r.snippet, "score": r.score,
        "module": topics.first_key(links.get(r.topic_id, []), entities.MODULE),
        "form_class": topics.first_key(links.get(r.topic_id, []), entities.FORM),
    } for r in ranked])


def help_get_topic(args: HelpGetTopicInput, ctx: CallContext) -> ToolOutput:
    slug, form_class, islem = args.slug, args.form_class, args.islem_kodu
    with _reading(lambda: help_pool(ctx), "help_get_topic") as pool:
        if slug:
            topic, missing = pool.topic(slug, UNRESTRICTED), slug
        elif form_class:
            topic, missing = topics.topic_for_entity(pool, entities.FORM, form_class, UNRESTRICTED), form_class
        else:
            assert islem  # the schema's anyOf: slug, form_class or islem_kodu
            topic, missing = topics.topic_for_islem(pool, islem, UNRESTRICTED), islem
        if topic is None:
            raise topics.topic_not_found(missing)
        return ToolOutput(topics.help_view(pool, topic, UNRESTRICTED))


def help_form_info(args: HelpFormInfoInput, ctx: CallContext) -> ToolOutput:
    with _reading(lambda: help_pool(ctx), "help_form_info") as pool:
        return ToolOutput(entities.form_info(pool, args.form_class, _agent_version(ctx)))


def help_stats(args: HelpStatsInput, ctx: CallContext) -> ToolOutput:
    with _reading(lambda: help_pool(ctx), "help_stats") as pool:
        return ToolOutput(stats.pool_stats(pool, UNRESTRICTED))
