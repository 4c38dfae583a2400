"""Users, roles and the SYSADMIN role, kept in the catalog (a SQLite file or a PostgreSQL database).

The REST surface logs people in against these tables; the roles a user holds become the
``Caller.roles`` that the document-pool ACL compares with ``doc$acl.principal``. Passwords are
stored as salted scrypt hashes (a per-user random salt, parameters stored beside the hash so they
can be raised later) and compared in constant time. The rules are here; the ``auth$`` rows live
in the catalog's store (``catalog_store.py``), created idempotently when it is first opened.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import secrets
import sys
from dataclasses import dataclass, field, replace
from typing import Callable

from knowspec.impl.docpool.catalog_store import CatalogRows, CatalogTarget, CatalogUnavailable, open_catalog
from knowspec.impl.rules.fold import ascii_lower

SYSADMIN = "SYSADMIN"
# Over HTTP the OKF write and apply tools (write_concept, apply_*) need WRITER or SYSADMIN;
# every other signed-in user may only read. A stdio caller is the local user and may write.
WRITER = "WRITER"
WRITE_ROLES = frozenset({SYSADMIN, WRITER})

# scrypt cost: n=2**14, r=8, p=1 needs 16 MiB and ~50 ms, enough to slow guessing. Stored with
# each hash, so raising it later keeps old hashes valid (tests lower SCRYPT_N for speed).
SCRYPT_N = 2**14
SCRYPT_R = 8
SCRYPT_P = 1
_HASH_BYTES = 32
_SALT_BYTES = 16

# Role names compare ASCII case-insensitively, as every catalog name does: ``str.upper`` would
# also map look-alikes (dotless ``ı``, long ``ſ``) onto SYSADMIN and WRITER.
_WRITE_ROLE_BY_KEY = {ascii_lower(role): role for role in WRITE_ROLES}


def may_write(roles: tuple[str, ...] | list[str]) -> bool:
    """Whether a signed-in user with ``roles`` may call the OKF write and apply tools."""
    return any(ascii_lower(role) in _WRITE_ROLE_BY_KEY for role in roles)


def holds_sysadmin(roles: tuple[str, ...] | list[str]) -> bool:
    return any(ascii_lower(role) == ascii_lower(SYSADMIN) for role in roles)


class AuthError(ValueError):
    """A user or role operation that cannot be done (unknown user, duplicate, bad name)."""


@dataclass(frozen=True)
class User:
    name: str
    roles: tuple[str, ...]
    # the stored password hash a login checked (``authenticate`` only): a session is opened only
    # while it is still the user's, so a password changed or a user removed mid-login opens none
    credential: bytes = field(default=b"", compare=False, repr=False)

    @property
    def is_sysadmin(self) -> bool:
        return holds_sysadmin(self.roles)


def hash_password(password: str, salt: bytes, params: str) -> bytes:
    """The scrypt hash of ``password`` under ``salt`` and ``params`` (``"n,r,p"``)."""
    n, r, p = (int(x) for x in params.split(","))
    return hashlib.scrypt(
        password.encode("utf-8"), salt=salt, n=n, r=r, p=p, maxmem=128 * 1024 * 1024,
        dklen=_HASH_BYTES,
    )


def _new_hash(password: str) -> tuple[bytes, bytes, str]:
    salt = secrets.token_bytes(_SALT_BYTES)
    params = f"{SCRYPT_N},{SCRYPT_R},{SCRYPT_P}"
    return salt, hash_password(password, salt, params), params


def _is_name(name: str) -> bool:
    """The rule for user and role names: 1-128 characters, no whitespace or control character."""
    return 0 < len(name) <= 128 and not any(ch.isspace() or ord(ch) < 32 for ch in name)


def _check_name(kind: str, name: str) -> str:
    name = name.strip()
    if not _is_name(name):
        raise AuthError(f"invalid {kind} name {name!r}")
    return name


def create_user(
    catalog: CatalogTarget, name: str, password: str, roles: tuple[str, ...] | list[str] = ()
) -> User:
    """Create a user with a password and optional roles; fails if the user exists."""
    name = _check_name("user", name)
    if not password:
        raise AuthError("password must not be empty")
    salt, digest, params = _new_hash(password)
    with open_catalog(catalog).transaction(atomic=True) as rows:
        if not rows.add_user(name, salt, digest, params):
            raise AuthError(f"user {name!r} already exists")
        rows.remove_sessions_of(name)  # none of a removed namesake's may become this user's
        for role in roles:
            _grant(rows, name, role)
    return get_user(catalog, name)  # type: ignore[return-value]


def _grant(rows: CatalogRows, user: str, role: str) -> None:
    role = _check_name("role", role)
    role = _WRITE_ROLE_BY_KEY.get(ascii_lower(role), role)  # the two write roles in their spelling
    if rows.user(user) is None:
        raise AuthError(f"no such user {user!r}")
    rows.add_role(role)
    rows.add_user_role(user, role)


def grant_role(catalog: CatalogTarget, user: str, role: str) -> None:
    """Give ``user`` the role ``role`` (the role is created when new)."""
    with open_catalog(catalog).transaction(atomic=True) as rows:
        _grant(rows, user, role)


def revoke_role(catalog: CatalogTarget, user: str, role: str) -> bool:
    """Take ``role`` from ``user``; the user's live sessions lose it at their next use (each use
    reads the roles afresh, ``rest.sessions``). Whether the user held it."""
    with open_catalog(catalog).transaction(atomic=True) as rows:
        return rows.remove_user_role(user, role)


def _stored_name(rows: CatalogRows, user: str) -> str:
    row = rows.user(user)
    if row is None:
        raise AuthError(f"no such user {user!r}")
    return row[0]


def remove_user(catalog: CatalogTarget, name: str) -> None:
    """Remove a user, its grants and every session it holds, in one transaction: a token it had
    is refused from its next use on, by every server sharing the catalog."""
    with open_catalog(catalog).transaction(atomic=True) as rows:
        stored = _stored_name(rows, name)
        rows.remove_user(stored)  # first: a login's session insert holds the user's row until it commits
        rows.remove_sessions_of(stored)


def set_password(catalog: CatalogTarget, name: str, password: str) -> None:
    """Give a user a new password and end its sessions (one taken with the old is ended too)."""
    if not password:
        raise AuthError("password must not be empty")
    salt, digest, params = _new_hash(password)
    with open_catalog(catalog).transaction(atomic=True) as rows:
        stored = _stored_name(rows, name)
        rows.set_password(stored, salt, digest, params)
        rows.remove_sessions_of(stored)


def _user(rows: CatalogRows, name: str) -> User | None:
    row = rows.user(name)
    return None if row is None else User(row[0], tuple(rows.roles_of(row[0])))


def get_user(catalog: CatalogTarget, name: str) -> User | None:
    """The user with its roles (stored spelling), or ``None``."""
    with open_catalog(catalog).transaction() as rows:
        return _user(rows, name)


def list_users(catalog: CatalogTarget) -> list[User]:
    with open_catalog(catalog).transaction() as rows:
        return [u for u in (_user(rows, n) for n in rows.user_names()) if u is not None]


# A fixed dummy record so that an unknown user costs as much time as a wrong password.
_DUMMY_SALT = b"\x00" * _SALT_BYTES
_DUMMY_PARAMS = f"{SCRYPT_N},{SCRYPT_R},{SCRYPT_P}"


def authenticate(catalog: CatalogTarget, name: str, password: str) -> User | None:
    """The user when ``password`` is right, else ``None`` (same cost for unknown users)."""
    row = None
    if _is_name(name):  # no user has another name (and PostgreSQL text cannot even hold a NUL)
        with open_catalog(catalog).transaction() as rows:
            row = rows.user(name)
    if row is None:
        hmac.compare_digest(hash_password(password, _DUMMY_SALT, _DUMMY_PARAMS), b"\x01" * 32)
        return None
    stored_name, salt, digest, params = row
    if not hmac.compare_digest(hash_password(password, salt, params), digest):
        return None
    user = get_user(catalog, stored_name)
    return None if user is None else replace(user, credential=digest)


# --- CLI: `knowspec user add NAME --password-stdin --role SYSADMIN` ---------------------------


def add_user_parser(subparsers: argparse._SubParsersAction) -> None:
    """Mount ``add``, ``grant``, ``revoke``, ``passwd``, ``remove`` and ``list`` under the lead's
    ``user`` command."""
    from knowspec.impl.cli import add_settings_options

    add = subparsers.add_parser("add", help="create a user (password read from stdin)")
    add.add_argument("name")
    add.add_argument(
        "--password-stdin", action="store_true", required=True,
        help="read the password from the first line of standard input",
    )
    add.add_argument("--role", action="append", default=[],
                     help="role to grant (repeatable): SYSADMIN (admin commands and OKF writes), "
                          "WRITER (OKF writes over HTTP), or any ACL role")
    add_settings_options(add, catalog_only=True)
    add.set_defaults(func=_cmd_add)

    grant = subparsers.add_parser("grant", help="grant a role to an existing user")
    grant.add_argument("name")
    grant.add_argument("role")
    add_settings_options(grant, catalog_only=True)
    grant.set_defaults(func=_cmd_grant)

    revoke = subparsers.add_parser("revoke", help="take a role from a user (its sessions lose it at once)")
    revoke.add_argument("name")
    revoke.add_argument("role")
    add_settings_options(revoke, catalog_only=True)
    revoke.set_defaults(func=_cmd_revoke)

    passwd = subparsers.add_parser("passwd", help="set a user's password (read from stdin); ends its sessions")
    passwd.add_argument("name")
    passwd.add_argument("--password-stdin", action="store_true", required=True,
                        help="read the new password from the first line of standard input")
    add_settings_options(passwd, catalog_only=True)
    passwd.set_defaults(func=_cmd_passwd)

    remove = subparsers.add_parser("remove", help="remove a user, its roles and its sessions")
    remove.add_argument("name")
    add_settings_options(remove, catalog_only=True)
    remove.set_defaults(func=_cmd_remove)

    lst = subparsers.add_parser("list", help="list users and their roles")
    add_settings_options(lst, catalog_only=True)
    lst.set_defaults(func=_cmd_list)


def _catalog(args: argparse.Namespace) -> CatalogTarget:
    from knowspec.impl.cli import settings_from

    return settings_from(args).catalog


def _cmd_add(args: argparse.Namespace) -> int:
    password = sys.stdin.readline().rstrip("\r\n")

    def add() -> str:
        user = create_user(_catalog(args), args.name, password, args.role)
        return f"user {user.name} created with roles: {', '.join(user.roles) or '(none)'}"
    return _report(add)


def _cmd_grant(args: argparse.Namespace) -> int:
    def grant() -> str:
        grant_role(_catalog(args), args.name, args.role)
        return f"granted {args.role} to {args.name}"
    return _report(grant)


def _cmd_revoke(args: argparse.Namespace) -> int:
    def revoke() -> str:
        catalog = _catalog(args)
        if get_user(catalog, args.name) is None:
            raise AuthError(f"no such user {args.name!r}")
        if not revoke_role(catalog, args.name, args.role):  # a misspelt SYSADMIN must not read as done
            raise AuthError(f"user {args.name!r} does not hold the role {args.role!r}")
        return f"revoked {args.role} from {args.name}"
    return _report(revoke)


def _cmd_passwd(args: argparse.Namespace) -> int:
    password = sys.stdin.readline().rstrip("\r\n")

    def passwd() -> str:
        set_password(_catalog(args), args.name, password)
        return f"password of {args.name} set; its sessions ended"
    return _report(passwd)


def _cmd_remove(args: argparse.Namespace) -> int:
    def remove() -> str:
        remove_user(_catalog(args), args.name)
        return f"user {args.name} removed; its sessions ended"
    return _report(remove)


def _report(action: Callable[[], str]) -> int:
    """Run a user command: its line on stdout (exit 0), or its error on stderr (exit 1)."""
    try:
        said = action()
    except (AuthError, CatalogUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(said)
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    for user in list_users(_catalog(args)):
        print(f"{user.name}\t{','.join(user.roles)}")
    return 0
