"""Users, roles and password hashing in the catalog (impl/docpool/auth.py)."""

from __future__ import annotations

import io
import sqlite3

import pytest

from knowspec.impl.docpool import auth, catalog_sqlite


@pytest.fixture()
def catalog(tmp_path):
    return tmp_path / "catalog.db"


def test_created_user_authenticates_with_its_password_only(catalog):
    auth.create_user(catalog, "ayse", "s3cret", ["editors"])
    assert auth.authenticate(catalog, "ayse", "s3cret") == auth.User("ayse", ("editors",))
    assert auth.authenticate(catalog, "ayse", "S3cret") is None
    assert auth.authenticate(catalog, "nobody", "s3cret") is None


def test_password_is_stored_salted_never_in_clear(catalog):
    auth.create_user(catalog, "a", "same-password")
    auth.create_user(catalog, "b", "same-password")
    with sqlite3.connect(catalog) as con:
        rows = con.execute('select salt, hash from "auth$user" order by name').fetchall()
    (salt_a, hash_a), (salt_b, hash_b) = rows
    assert salt_a != salt_b and hash_a != hash_b
    assert b"same-password" not in hash_a + hash_b


def test_user_names_are_case_insensitive_and_unique(catalog):
    auth.create_user(catalog, "Mehmet", "pw")
    assert auth.authenticate(catalog, "mehmet", "pw").name == "Mehmet"
    with pytest.raises(auth.AuthError):
        auth.create_user(catalog, "MEHMET", "other")


def test_sysadmin_role_exists_and_grants_are_idempotent(catalog):
    auth.create_user(catalog, "root", "pw")
    assert not auth.get_user(catalog, "root").is_sysadmin
    auth.grant_role(catalog, "root", "sysadmin")
    auth.grant_role(catalog, "root", "SYSADMIN")
    user = auth.get_user(catalog, "root")
    assert user.roles == ("SYSADMIN",) and user.is_sysadmin
    auth.revoke_role(catalog, "root", "SYSADMIN")
    assert not auth.get_user(catalog, "root").is_sysadmin


def test_grant_to_unknown_user_fails(catalog):
    with pytest.raises(auth.AuthError):
        auth.grant_role(catalog, "ghost", "SYSADMIN")


def test_schema_creation_is_idempotent(catalog):
    catalog_sqlite.connect(catalog).close()
    catalog_sqlite.connect(catalog).close()
    with sqlite3.connect(catalog) as con:
        roles = con.execute('select name from "auth$role" order by name').fetchall()
    assert roles == [("SYSADMIN",), ("WRITER",)]


def test_cli_user_add_reads_password_from_stdin(tmp_path, monkeypatch, capsys):
    from knowspec.impl.cli import main

    monkeypatch.setattr("sys.stdin", io.StringIO("pässword\n"))
    argv = ["user", "add", "admin", "--password-stdin", "--role", "SYSADMIN",
            "--appdir", str(tmp_path)]
    assert main(argv) == 0
    user = auth.authenticate(tmp_path / "catalog.db", "admin", "pässword")
    assert user is not None and user.is_sysadmin
    assert main(["user", "list", "--appdir", str(tmp_path)]) == 0
    assert "admin\tSYSADMIN" in capsys.readouterr().out


def test_cli_revokes_sets_passwords_and_removes_users(tmp_path, monkeypatch, capsys):
    from knowspec.impl.cli import main

    catalog = tmp_path / "catalog.db"
    auth.create_user(catalog, "fatma", "old", ["Finance", "WRITER"])
    assert main(["user", "revoke", "FATMA", "writer", "--appdir", str(tmp_path)]) == 0
    assert auth.get_user(catalog, "fatma").roles == ("Finance",)
    monkeypatch.setattr("sys.stdin", io.StringIO("new pw\n"))
    assert main(["user", "passwd", "fatma", "--password-stdin", "--appdir", str(tmp_path)]) == 0
    assert auth.authenticate(catalog, "fatma", "old") is None
    assert auth.authenticate(catalog, "fatma", "new pw") is not None
    assert main(["user", "remove", "Fatma", "--appdir", str(tmp_path)]) == 0
    assert auth.list_users(catalog) == []
    capsys.readouterr()
    for argv in (["user", "remove", "fatma"], ["user", "revoke", "fatma", "Finance"]):
        assert main([*argv, "--appdir", str(tmp_path)]) == 1
        assert "no such user 'fatma'" in capsys.readouterr().err
    auth.create_user(catalog, "dave", "pw", ["SYSADMIN"])
    assert main(["user", "revoke", "dave", "SYSADMN", "--appdir", str(tmp_path)]) == 1  # a typo is not a revoke
    assert "user 'dave' does not hold the role 'SYSADMN'" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin", io.StringIO("\n"))
    auth.create_user(catalog, "ali", "pw")
    assert main(["user", "passwd", "ali", "--password-stdin", "--appdir", str(tmp_path)]) == 1
    assert "password must not be empty" in capsys.readouterr().err


def test_a_removed_user_can_be_created_again_without_its_old_grants(catalog):
    auth.create_user(catalog, "ali", "pw", ["SYSADMIN"])
    auth.remove_user(catalog, "ali")
    assert auth.create_user(catalog, "ali", "pw2").roles == ()


@pytest.mark.parametrize("look_alike", ["sysadmın", "ſysadmin", "SYSADMİN", "wrıter", "ſYSADMIN"])
def test_a_role_that_only_looks_like_a_write_role_grants_nothing(catalog, look_alike):
    """Role names compare ASCII case-insensitively: Unicode case mappings (dotless ı, long ſ,
    dotted İ) do not turn another role into SYSADMIN or WRITER."""
    from knowspec.impl.rest.sessions import SessionStore

    user = auth.create_user(catalog, "mallory", "pw", [look_alike])
    assert user.roles == (look_alike,)
    assert not user.is_sysadmin and not auth.may_write(user.roles)
    assert not SessionStore(60).open("mallory", user.roles, None).is_sysadmin


@pytest.mark.parametrize("spelling", ["sysadmin", "SysAdmin", "writer", "Writer"])
def test_the_write_roles_are_granted_in_their_own_spelling_whatever_the_case(catalog, spelling):
    user = auth.create_user(catalog, "ana", "pw", [spelling])
    assert user.roles == (spelling.upper(),)
    assert auth.may_write(user.roles) and user.is_sysadmin == (spelling.upper() == "SYSADMIN")
