"""Admin statements over REST: ALTER DATABASE ... SET DOCUMENTS through the catalog executor."""

from __future__ import annotations


import pytest

from knowspec.impl.config import Settings
from knowspec.impl.docpool import catalog
from knowspec.impl.errors import ToolError
from knowspec.impl.rest.admin import documents_setting
from knowspec.impl.rest.catalog_bridge import execute_admin_sql, require_registered, set_documents


@pytest.fixture()
def settings(tmp_path):
    s = Settings(appdir=tmp_path)
    catalog.register_database(s.catalog_path, "sales", "SQLITE", str(tmp_path / "sales.db"))
    catalog.register_database(s.catalog_path, "hr", "SQLITE", str(tmp_path / "hr.db"))
    return s


@pytest.mark.parametrize(
    "params, setting",
    [
        ({"database": "hr", "documents": "INTERNAL"}, ("hr", "INTERNAL", None)),
        ({"database": "hr", "documents": "OFF"}, ("hr", "OFF", None)),
        ({"database": "hr", "documents": "DATABASE", "related": "sales"}, ("hr", "DATABASE", "sales")),
    ],
)
def test_structured_params_become_the_setting(params, setting):
    assert documents_setting(params) == setting


def test_database_mode_needs_related_and_others_refuse_it():
    with pytest.raises(ToolError) as err:
        documents_setting({"database": "hr", "documents": "DATABASE"})
    assert err.value.code == "invalid_request"
    with pytest.raises(ToolError):
        documents_setting({"database": "hr", "documents": "OFF", "related": "sales"})


def test_structured_setting_needs_no_quoting(settings):
    catalog.register_database(settings.catalog_path, 'odd "name" db', "SQLITE", "x.db")
    result = set_documents(settings, 'odd "name" db', "DATABASE", "sales")
    assert result == {"database": 'odd "name" db', "documents": "DATABASE", "documentsDb": "sales"}


def test_statement_applies_and_answers_the_new_setting(settings):
    result = execute_admin_sql(settings, "alter database hr set documents database sales;")
    assert result == {"database": "hr", "documents": "DATABASE", "documentsDb": "sales"}
    location = catalog.resolve_pool_location(settings.catalog_path, "hr")
    assert (location.docs_database, location.dsn) == ("sales", str(settings.appdir / "sales.db"))


@pytest.mark.parametrize("sql", ["DROP TABLE x", "ALTER DATABASE hr SET DOCUMENTS", "select 1", ""])
def test_any_other_statement_is_invalid_request(settings, sql):
    with pytest.raises(ToolError) as err:
        execute_admin_sql(settings, sql)
    assert err.value.code == "invalid_request"


def test_unregistered_database_in_statement_is_pool_unavailable(settings):
    with pytest.raises(ToolError) as err:
        execute_admin_sql(settings, "ALTER DATABASE hr SET DOCUMENTS DATABASE nosuch")
    assert err.value.code == "pool_unavailable"
    assert catalog.get_database(settings.catalog_path, "hr").documents == ""


def test_require_registered_accepts_known_databases_only(settings):
    require_registered(settings, "SALES")
    with pytest.raises(ToolError) as err:
        require_registered(settings, "nosuch")
    assert err.value.message == "database is not registered"
