"""The catalog's database registry and ALTER DATABASE ... SET DOCUMENTS."""

from __future__ import annotations

import sqlite3

import pytest

from knowspec.impl import runtime as process
from knowspec.impl.docpool import catalog
from knowspec.impl.errors import ToolError


@pytest.mark.parametrize("command, expected", [
    ("ALTER DATABASE sales SET DOCUMENTS INTERNAL", ("sales", "INTERNAL", None)),
    ("alter database Sales set documents off;", ("Sales", "OFF", None)),
    ("ALTER DATABASE sales SET DOCUMENTS DATABASE docs", ("sales", "DATABASE", "docs")),
    ('ALTER DATABASE "my db" SET DOCUMENTS DATABASE "other db"', ("my db", "DATABASE", "other db")),
    ("  ALTER   DATABASE x\nSET DOCUMENTS   INTERNAL  ", ("x", "INTERNAL", None)),
])
def test_parse_alter_documents(command, expected):
    a = catalog.parse_alter_documents(command)
    assert (a.database, a.mode, a.other) == expected


@pytest.mark.parametrize("command", [
    "ALTER DATABASE sales SET DOCUMENTS", "ALTER DATABASE sales SET DOCUMENTS DATABASE",
    "ALTER DATABASE sales SET DOCUMENTS ON", "DROP TABLE x", "", "ALTER DATABASE a; SET DOCUMENTS OFF",
])
def test_parse_alter_documents_rejects(command):
    with pytest.raises(catalog.CatalogError):
        catalog.parse_alter_documents(command)


def test_register_is_idempotent_and_keeps_documents(tmp_path):
    cat = tmp_path / "catalog.db"
    catalog.register_database(cat, "sales", "sqlite", str(tmp_path / "a.db"))
    catalog.execute_alter(cat, "ALTER DATABASE SALES SET DOCUMENTS INTERNAL")
    entry = catalog.register_database(cat, "Sales", "SQLITE", str(tmp_path / "b.db"))
    assert (entry.name, entry.storage, entry.documents) == ("sales", "SQLITE", "INTERNAL")
    assert entry.dsn.endswith("b.db")
    assert [e.name for e in catalog.list_databases(cat)] == ["sales"]


def test_alter_needs_registered_databases(tmp_path):
    cat = tmp_path / "catalog.db"
    catalog.register_database(cat, "sales", "SQLITE", "x.db")
    with pytest.raises(catalog.CatalogError, match="database is not registered"):
        catalog.execute_alter(cat, "ALTER DATABASE nope SET DOCUMENTS INTERNAL")
    with pytest.raises(catalog.CatalogError, match="database is not registered"):
        catalog.execute_alter(cat, "ALTER DATABASE sales SET DOCUMENTS DATABASE nope")


def test_catalog_tables_coexist_with_other_modules(tmp_path):
    cat = tmp_path / "catalog.db"
    con = sqlite3.connect(cat)
    con.execute('create table "auth$user"(name text)')
    con.close()
    catalog.register_database(cat, "sales", "SQLITE", "x.db")
    names = {r[0] for r in sqlite3.connect(cat).execute("select name from sqlite_master where type='table'")}
    assert {"auth$user", "db$database"} <= names


def test_resolve_through_another_database(tmp_path):
    cat = tmp_path / "catalog.db"
    catalog.register_database(cat, "sales", "SQLITE", "sales.db")
    catalog.register_database(cat, "docs", "POSTGRESQL", "host=x dbname=y")
    catalog.execute_alter(cat, "ALTER DATABASE sales SET DOCUMENTS DATABASE docs")
    loc = catalog.resolve_pool_location(cat, "SALES")
    assert (loc.database, loc.docs_database, loc.storage, loc.dsn) == ("sales", "docs", "POSTGRESQL", "host=x dbname=y")


def test_resolve_without_catalog_file_is_not_registered(tmp_path):
    with pytest.raises(ToolError) as err:
        catalog.resolve_pool_location(tmp_path / "missing.db", "sales")
    assert (err.value.code, err.value.message) == ("pool_unavailable", "database is not registered")
    assert not (tmp_path / "missing.db").exists()


def test_resolve_sees_a_change_committed_after_its_cached_answer(tmp_path):
    cat = tmp_path / "catalog.db"
    catalog.register_database(cat, "sales", "SQLITE", "sales.db")
    catalog.execute_alter(cat, "ALTER DATABASE sales SET DOCUMENTS INTERNAL")
    assert catalog.resolve_pool_location(cat, "sales").dsn == "sales.db"
    catalog.register_database(cat, "sales", "SQLITE", "moved.db")
    assert catalog.resolve_pool_location(cat, "sales").dsn == "moved.db"
    catalog.execute_alter(cat, "ALTER DATABASE sales SET DOCUMENTS OFF")
    with pytest.raises(ToolError, match="has no document pool"):
        catalog.resolve_pool_location(cat, "sales")
    with pytest.raises(ToolError, match="database is not registered"):
        catalog.resolve_pool_location(cat, "later")
    catalog.register_database(cat, "later", "SQLITE", "later.db")
    catalog.execute_alter(cat, "ALTER DATABASE later SET DOCUMENTS INTERNAL")
    assert catalog.resolve_pool_location(cat, "later").dsn == "later.db"


def test_resolve_sees_a_catalog_file_replaced_by_another(tmp_path):
    cat, other = tmp_path / "catalog.db", tmp_path / "next.db"
    for path, dsn in ((cat, "old.db"), (other, "new.db")):
        catalog.register_database(path, "sales", "SQLITE", dsn)
        catalog.execute_alter(path, "ALTER DATABASE sales SET DOCUMENTS INTERNAL")
    assert catalog.resolve_pool_location(cat, "sales").dsn == "old.db"
    other.replace(cat)
    assert catalog.resolve_pool_location(cat, "sales").dsn == "new.db"
    cat.unlink()
    with pytest.raises(ToolError, match="database is not registered"):
        catalog.resolve_pool_location(cat, "sales")


def test_cached_catalog_connections_are_bounded(tmp_path):
    for i in range(catalog.MAX_OPEN_CATALOGS + 3):
        path = tmp_path / f"catalog{i}.db"
        catalog.register_database(path, "sales", "SQLITE", f"{i}.db")
        catalog.execute_alter(path, "ALTER DATABASE sales SET DOCUMENTS INTERNAL")
        assert catalog.resolve_pool_location(path, "sales").dsn == f"{i}.db"
    assert len(catalog._database_reads(process.current())) == catalog.MAX_OPEN_CATALOGS
