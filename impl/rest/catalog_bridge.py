"""The catalog questions the REST surface asks, answered by ``impl/docpool/catalog.py``.

Kept in one module so that login and the admin statement share one adapter to the catalog's
API, and so that catalog failures become envelope codes in one place.
"""

from __future__ import annotations

from typing import Any

from knowspec.impl.docpool import catalog
from knowspec.impl.errors import ToolError, diagnostic


def require_registered(settings, database: str) -> None:
    """``pool_unavailable`` 'database is not registered' unless the catalog knows ``database``."""
    if catalog.get_database(settings.catalog, database) is None:
        raise ToolError(
            "pool_unavailable", "database is not registered",
            diagnostics=[diagnostic("pool_unavailable", "database is not registered",
                                    field="/database", spec_ref="seeds/001_doc_pools#document-pool")],
        )


def execute_admin_sql(settings, statement: str) -> dict[str, Any]:
    """Run ``ALTER DATABASE <db> SET DOCUMENTS ...``: the only statement the server accepts."""
    try:
        alter = catalog.parse_alter_documents(statement)
    except catalog.CatalogError as exc:
        raise ToolError("invalid_request", f"unsupported statement: {exc}") from None
    return _apply(settings, alter)


def set_documents(settings, database: str, documents: str, related: str | None) -> dict[str, Any]:
    """The structured form of the same statement (names need no quoting)."""
    return _apply(settings, catalog.AlterDocuments(database, documents, related))


def _apply(settings, alter: "catalog.AlterDocuments") -> dict[str, Any]:
    try:
        entry = catalog.set_documents(settings.catalog, alter)
    except catalog.CatalogError as exc:
        raise ToolError("pool_unavailable", str(exc)) from None
    return {
        "database": entry.name,
        "documents": entry.documents,
        "documentsDb": entry.documents_db,
    }
