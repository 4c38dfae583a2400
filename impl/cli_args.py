"""Argument validators for every ``knowspec`` command: one-line errors before any work starts.

Each validator is an argparse ``type=``: it returns the parsed value or raises
``argparse.ArgumentTypeError`` with a sentence a person can act on, which the CLI prints as
one line and exits 2. Checks that need two arguments at once (a DSN depends on its storage)
raise :class:`UsageError`, which the CLI answers the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Callable

STORAGES = ("SQLITE", "POSTGRESQL", "FIREBIRD")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class UsageError(Exception):
    """A bad combination of arguments: printed as one line, exit code 2."""


@lru_cache(maxsize=1)
def _collection_rule() -> tuple[re.Pattern[str], int]:
    """The contract's CollectionId pattern and length, from the generated doc_search schema."""
    text = (resources.files("knowspec.generated") / "schemas" / "docpool" / "doc_search.input.json").read_text("utf-8")
    rule = json.loads(text)["$defs"]["CollectionId"]
    return re.compile(rule["pattern"]), int(rule.get("maxLength", 64))


def collection_name(value: str) -> str:
    pattern, max_length = _collection_rule()
    if not pattern.search(value) or len(value) > max_length:
        raise argparse.ArgumentTypeError(
            f"invalid collection name {value!r}: use lower-case letters, digits and '-', starting with a letter "
            f"or digit ({pattern.pattern}), at most {max_length} characters")
    return value


def storage_name(value: str) -> str:
    upper = value.strip().upper()
    if upper not in STORAGES:
        raise argparse.ArgumentTypeError(f"unknown storage {value!r}: choose SQLITE, POSTGRESQL or FIREBIRD")
    return upper


def log_level(value: str) -> str:
    upper = value.strip().upper()
    if upper not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"unknown log level {value!r}: choose {', '.join(LOG_LEVELS)}")
    return upper


def host_port(value: str) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` (loopback) or ``[IPv6]:PORT`` → (host, port)."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or (host.startswith("[") != host.endswith("]")):
        raise argparse.ArgumentTypeError(
            f"expected HOST:PORT, e.g. 127.0.0.1:8765 or [::1]:8765, got {value!r}")
    number = int(port)
    if number > 65535:
        raise argparse.ArgumentTypeError(f"port {number} is out of range (0-65535)")
    return host.strip("[]") or "127.0.0.1", number


def positive_float(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {value!r}") from None
    if not number > 0 or number == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value!r}")
    return number


def whole_number(option: str, unit: str, low: int, high: int) -> Callable[[str], int]:
    """An argparse type for ``option``: a whole number of ``unit`` from ``low`` to ``high``."""
    def parse(value: str) -> int:
        try:
            number = int(value.strip().replace("_", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number of {unit}, got {value!r}") from None
        if not low <= number <= high:
            raise argparse.ArgumentTypeError(f"{option} must be between {low} and {high}, got {number}")
        return number

    parse.__name__ = option.lstrip("-").replace("-", "_")  # argparse names the type in its errors
    return parse


# ``serve --workers``: processes; ``--mcp-sessions-per-caller``: at most the SDK's table of
# sessions; ``--vector-candidates``: rows the approximate index proposes per matrix, at least
# the 80 the seed's rule keeps.
worker_count = whole_number("--workers", "worker processes", 1, 64)
session_quota = whole_number("--mcp-sessions-per-caller", "sessions", 1, 10_000)
candidate_count = whole_number("--vector-candidates", "candidate rows", 80, 10_000_000)


def raised_limit(default: int, what: str):
    """A validator for an operator's raised limit: a whole number at least the contract's
    ``default`` (the limits can be raised, never lowered below the contract)."""
    def check(value: str) -> int:
        try:
            number = int(value.strip().replace("_", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number of {what}, got {value!r}") from None
        if number < default:
            raise argparse.ArgumentTypeError(
                f"expected at least the contract's {default} {what} (limits can only be raised), got {value!r}")
        return number

    return check


def existing_dir(value: str) -> Path:
    path = Path(value).expanduser()
    if not path.exists():
        raise argparse.ArgumentTypeError(f"folder not found: {value}")
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"not a folder: {value}")
    return path


def existing_file(value: str) -> Path:
    path = Path(value).expanduser()
    if not path.exists():
        raise argparse.ArgumentTypeError(f"file not found: {value}")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"not a file: {value}")
    return path


def existing_file_or_bare_name(value: str) -> Path:
    """A file path that must exist, or a bare file name the command looks up in APPDIR later."""
    path = Path(value).expanduser()
    return path if path.parent == Path(".") and not value.startswith(".") else existing_file(value)


def writable_folder(value: str) -> Path:
    """A folder that exists or can be made (its nearest existing parent is writable)."""
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"not a folder: {value}")
    existing = next(p for p in (path, *path.absolute().parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"cannot write into {existing}" + ("" if existing == path else f" (for {value})"))
    return path


def writable_file(value: str) -> Path:
    """A file to (re)write: its folder must exist and be writable; it must not be a folder."""
    path = Path(value).expanduser()
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"is a folder, expected a file name: {value}")
    folder = path.absolute().parent
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"folder not found: {folder} (create it first)")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"cannot write into folder {folder}")
    return path


_PG_KEYWORD = re.compile(r"^\s*[A-Za-z_]+\s*=")


def check_dsn(storage: str, dsn: str) -> str:
    """The DSN checked against its storage's form; :class:`UsageError` says what was expected."""
    dsn = dsn.strip()
    if not dsn:
        raise UsageError("--dsn is empty")
    if storage == "SQLITE":
        if dsn.startswith(("postgres://", "postgresql://")) or _PG_KEYWORD.match(dsn):
            raise UsageError(f"--dsn {dsn!r} looks like a PostgreSQL conninfo, but --storage is SQLITE "
                             "(give the pool file's path)")
        folder = Path(dsn).expanduser().absolute().parent
        if not folder.is_dir():
            raise UsageError(f"--dsn: folder not found: {folder}")
    elif storage == "POSTGRESQL":
        if not (dsn.startswith(("postgres://", "postgresql://")) or _PG_KEYWORD.match(dsn)):
            raise UsageError(f"--dsn {dsn!r} is not a PostgreSQL conninfo: use postgresql://user@host/db "
                             "or 'host=... dbname=...'")
    return dsn

