"""The SQLite catalog file holds password hashes and session digests: only its owner may read it,
and a file that cannot be opened is a storage failure worth a retry, never an internal error."""

from __future__ import annotations

import os
import stat
import sys

import pytest

from knowspec.impl.docpool import auth, catalog
from knowspec.impl.docpool.catalog_sqlite import SqliteCatalog
from knowspec.impl.docpool.catalog_store import CatalogUnavailable
from knowspec.impl.errors import ToolError
from knowspec.impl import runtime as process

posix_modes = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@posix_modes
def test_a_new_catalog_is_readable_by_its_owner_alone_whatever_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        auth.create_user(tmp_path / "catalog.db", "ann", "pw", [])
    finally:
        os.umask(old)
    assert _mode(tmp_path / "catalog.db") == 0o600
    assert all(_mode(p) & 0o077 == 0 for p in tmp_path.glob("catalog.db*"))  # its journal files too


@posix_modes
def test_a_catalog_made_readable_by_others_is_narrowed_when_opened(tmp_path):
    target = tmp_path / "catalog.db"
    auth.create_user(target, "ann", "pw", [])
    target.chmod(0o644)
    assert auth.get_user(target, "ann") is not None
    assert _mode(target) == 0o600


def test_a_catalog_that_cannot_be_opened_is_unavailable_not_an_internal_error(tmp_path):
    (tmp_path / "catalog.db").mkdir()  # sqlite cannot open a folder, as when no descriptor is left
    with pytest.raises(CatalogUnavailable):
        with SqliteCatalog(tmp_path / "catalog.db").transaction() as rows:
            rows.user("ann")
    blocked = tmp_path / "file"
    blocked.write_text("")
    with pytest.raises(CatalogUnavailable):  # its folder cannot be made
        with SqliteCatalog(blocked / "catalog.db", keep_connections=True).transaction() as rows:
            rows.user("ann")


def test_a_doc_tool_whose_catalog_cannot_be_opened_answers_storage_error(tmp_path):
    (tmp_path / "catalog.db").mkdir()
    with process.activated(), pytest.raises(ToolError) as caught:
        catalog.resolve_pool_location(tmp_path / "catalog.db", "shop")
    assert caught.value.code == "storage_error" and caught.value.retryable
    assert str(tmp_path) not in caught.value.message
