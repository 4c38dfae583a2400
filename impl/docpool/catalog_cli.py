"""`knowspec pool register|alter|databases`: the catalog (the seed's MASTER) from the command line."""

from __future__ import annotations

import argparse
import json
import sys

from knowspec.impl.docpool import catalog
from knowspec.impl.docpool.catalog_store import CatalogUnavailable
from knowspec.impl.errors import ToolError


def add_db_parser(subparsers: argparse._SubParsersAction) -> None:
    from knowspec.impl.cli import add_settings_options
    from knowspec.impl.cli_args import storage_name

    reg = subparsers.add_parser("register", help="register a database and its storage in the catalog")
    reg.add_argument("name", help="database name")
    reg.add_argument("--storage", required=True, type=storage_name, help="SQLITE, POSTGRESQL or FIREBIRD")
    reg.add_argument("--dsn", required=True, help="SQLite file (a bare file name is in APPDIR), PostgreSQL conninfo, "
                                                  "or Firebird database/DSN")
    add_settings_options(reg, catalog_only=True)
    reg.set_defaults(func=_register)

    alter = subparsers.add_parser("alter", help="run ALTER DATABASE <db> SET DOCUMENTS INTERNAL | DATABASE <other> | OFF")
    alter.add_argument("statement", help='e.g. "ALTER DATABASE shop SET DOCUMENTS INTERNAL"')
    add_settings_options(alter, catalog_only=True)
    alter.set_defaults(func=_alter)

    listing = subparsers.add_parser("databases", help="list registered databases and their document settings")
    add_settings_options(listing, catalog_only=True)
    listing.set_defaults(func=_list)


def _settings(args):
    from knowspec.impl.cli import settings_from

    settings = settings_from(args)
    if settings.catalog_url is None:
        settings.catalog_path.parent.mkdir(parents=True, exist_ok=True)
    return settings


def _print_entry(action) -> int:
    try:
        entry = action()
    except (catalog.CatalogError, CatalogUnavailable, ToolError) as exc:
        print(f"knowspec: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(entry.__dict__, default=str))
    return 0


def _register(args: argparse.Namespace) -> int:
    from knowspec.impl.cli_args import check_dsn

    settings = _settings(args)
    dsn = check_dsn(args.storage, str(settings.in_appdir(check_dsn(args.storage, args.dsn)))
                    if args.storage == "SQLITE" else args.dsn)
    return _print_entry(lambda: catalog.register_database(settings.catalog, args.name, args.storage, dsn))


def _alter(args: argparse.Namespace) -> int:
    target = _settings(args).catalog
    return _print_entry(lambda: catalog.execute_alter(target, args.statement))


def _list(args: argparse.Namespace) -> int:
    """One JSON line per database on stdout; none registered is said on stderr (stdout stays a
    list a script can read)."""
    entries = catalog.list_databases(_settings(args).catalog)
    for entry in entries:
        print(json.dumps(entry.__dict__, default=str))
    if not entries:
        print("no database is registered in this catalog (knowspec pool register NAME ...)", file=sys.stderr)
    return 0
