"""IMPORTDOC: bring one collection of a source pool into a database's document pool.

The seed's contract, in the order it is checked:
1. ``database``, ``collection`` and ``path`` are all required: a missing one is a 400
   (``ToolError invalid_request``), nothing is touched;
2. an invalid collection name, a missing source file or a collection absent from the source is a
   202 ``{result: false, message}`` and the target pool is not even opened (byte-identical);
   over REST the source must be a file inside the operator's import folder
   (``settings.import_path``, ``serve --import-dir``; a relative path names a file there): any
   other path gets one fixed refusal that never says whether the file exists; a source whose
   ``doc$`` objects are views rather than the schema's tables is refused too;
3. the database must be registered with a document pool (the catalog's errors otherwise);
4. the pool's ``doc_import.sql`` recipe (``recipe.import_collection``) then deletes and rewrites
   only that collection in one transaction, rebuilds FTS and refreshes ``doc$entity_kind`` and the
   general recipe; on any error it rolls back and nothing changes (``storage_error``).
Success is 200 ``{result: true, collection, topics, chunks, docsDb, source}``.
"""

from __future__ import annotations

import argparse
import importlib
import sqlite3
import sys
from contextlib import closing
from pathlib import Path
from typing import Any, Callable

from knowspec.impl.docpool import catalog, pools, recipe
from knowspec.impl.errors import ToolError, diagnostic
from knowspec.impl.progress import PhaseProgress, Report

PARAMS = ("database", "collection", "path")


def require_params(params: Any) -> None:
    """400 for a missing (or empty, or non-string) IMPORTDOC parameter, named in the message."""
    if not isinstance(params, dict):
        raise ToolError("invalid_request", "params is required: {database, collection, path}")
    missing = [name for name in PARAMS if not isinstance(params.get(name), str) or not params[name]]
    if missing:
        raise ToolError(
            "invalid_request",
            f"{missing[0]} is required",
            diagnostics=[diagnostic("invalid_request", f"{m} is required", field=f"/params/{m}")
                         for m in missing],
        )


def refused(message: str) -> dict[str, Any]:
    """The 202 answer: nothing was imported and the target is untouched."""
    return {"result": False, "message": message}


OUTSIDE_IMPORT_DIR = "source must be a pool file inside the server's import folder"


def confined_source(import_dir: Path, source_path: str) -> Path | None:
    """``source_path`` inside ``import_dir`` (a relative path names a file there), symlinks
    resolved, or ``None`` when it lies outside. Decided from the path alone, never by looking
    at the file, so the answer for an outside path says nothing about what exists there."""
    try:
        root = import_dir.resolve()
        candidate = Path(source_path)
        if not candidate.is_absolute():
            candidate = root / candidate
        real = candidate.resolve()
    except (OSError, ValueError, RuntimeError):
        return None
    if real == root or not real.is_relative_to(root):
        return None
    return real


def source_refusal(source: Path, collection: str, shown: str | None = None) -> str | None:
    """Why ``source`` cannot provide ``collection`` (checked read-only), or ``None``.

    ``shown`` is how the source is named in the message (default: the path itself).
    """
    name = shown if shown is not None else str(source)
    try:
        present = source.is_file()
    except (OSError, ValueError):  # a name too long, or with a NUL byte, names no file
        present = False
    if not present:
        return f"source pool not found: {name}"
    uri = source.absolute().as_uri() + "?mode=ro"
    try:
        with closing(sqlite3.connect(uri, uri=True)) as con:
            views = [row[0] for row in con.execute(
                "select name from sqlite_master where type <> 'table' and type <> 'index' "
                "and type <> 'trigger' and lower(name) like 'doc$%'")]
            if views:
                return (f"source is not a document pool: {name} has {views[0]} as a view, "
                        "the pool schema needs tables")
            computed = _computed_column(con)
            if computed is not None:  # a view by another name: its values are made as they are read
                return (f"source is not a document pool: {name} has {computed} as a generated column, "
                        "the pool schema needs stored values")
            virtual = _virtual_table(con)
            if virtual is not None:  # e.g. FTS5 with external content over a view: the same
                return (f"source is not a document pool: {name} has {virtual} as a virtual table, "
                        "the pool schema needs stored values")
            repeated = _repeated_key(con, collection)
            if repeated is not None:  # the recipe's joins would multiply rows (N topics x N chunks)
                return f"source is not a document pool: {name} repeats {repeated}, a key of the pool schema"
            wrong = stored_value_fault(con, collection)
            if wrong is not None:
                return f"source holds {wrong} in collection {collection}"
            found = con.execute(
                'select count(*) from "doc$collection" where id = ?', [collection]
            ).fetchone()[0]
    except sqlite3.DatabaseError as exc:
        return f"source is not a document pool: {name} ({exc})"
    if not found:
        return f"collection {collection} not found in source {name}"
    return None


def _computed_column(con: sqlite3.Connection) -> str | None:
    """The first generated column of a ``doc$`` table as ``table.column``, or ``None``: a 131 KB
    source whose ``body_md`` was ``printf('%.*c', 300000000, 'x')`` wrote 1.8 GB into the pool."""
    tables = [row[0] for row in con.execute(
        "select name from sqlite_master where type = 'table' and lower(name) like 'doc$%' order by name")]
    for table in tables:
        quoted = table.replace('"', '""')
        for column in con.execute(f'pragma table_xinfo("{quoted}")'):
            if column[6] in (2, 3):  # hidden: 2 = generated virtual, 3 = generated stored
                return f"{table}.{column[1]}"
    return None


# The tables the import recipe (spec/docpool/sql/doc_import.sql) reads from a source.
RECIPE_TABLES = ("doc$collection", "doc$topic", "doc$chunk", "doc$link", "doc$acl", "doc$topic_vec", "doc$chunk_vec",
                 "doc$entity", "doc$entity_rel", "doc$alias", "doc$entity_kind", "doc$meta")
MAX_TEXT_BYTES = 16 << 20  # a topic body or a chunk text
MAX_NOTE_BYTES = 1 << 20   # a description, an entity's attributes, a recipe value
MAX_NAME_BYTES = 64 << 10  # any other text: titles, headings, keys, names
# (what, table, the collection's rows of it, {column: bytes}): bytes of the value as stored, as a
# blob, since SQLite's length() of a text stops at its first NUL (a 40 MiB body after a NUL passed).
_OF_TOPICS = 'x join "doc$topic" t on t.id = x.topic_id where t.collection = :c'
TEXT_CAPS = (
    ("a collection's row", '"doc$collection" x where x.id = :c',
     {c: MAX_NAME_BYTES for c in ("id", "title", "kind", "erisim", "generated", "help_url_v3")}),
    ("a topic", '"doc$topic" x where x.collection = :c',
     {**{c: MAX_NAME_BYTES for c in ("slug", "title", "breadcrumb", "category", "source_uri", "mime", "mtime")},
      "description": MAX_NOTE_BYTES, "body_md": MAX_TEXT_BYTES}),
    ("a chunk", '"doc$chunk" ' + _OF_TOPICS, {"title": MAX_NAME_BYTES, "heading": MAX_NAME_BYTES,
                                              "body": MAX_TEXT_BYTES}),
    ("a link", '"doc$link" ' + _OF_TOPICS, {c: MAX_NAME_BYTES for c in ("kind", "key", "source")}),
    ("an ACL entry", '"doc$acl" ' + _OF_TOPICS, {"principal": MAX_NAME_BYTES}),
    ("an entity", '"doc$entity" x where x.collection = :c',
     {"kind": MAX_NAME_BYTES, "key": MAX_NAME_BYTES, "title": MAX_NAME_BYTES, "attrs": MAX_NOTE_BYTES}),
    ("an entity relation", '"doc$entity_rel" x where x.collection = :c',
     {c: MAX_NAME_BYTES for c in ("from_kind", "from_key", "rel", "to_kind", "to_key")}),
    ("an alias", '"doc$alias" x where x.collection = :c', {c: MAX_NAME_BYTES for c in ("kind", "alias", "key")}),
    ("an entity kind", '"doc$entity_kind" x where x.collection = :c',
     {c: MAX_NAME_BYTES for c in ("kind", "title", "key_rule", "url_template")}),
    ("a recipe row", "\"doc$meta\" x where x.collection in ('', :c)", {"name": MAX_NAME_BYTES, "value": MAX_NOTE_BYTES}),
)


def _virtual_table(con: sqlite3.Connection) -> str | None:
    """The first table the recipe reads that is a virtual table, or None: an FTS5 table with
    external content over a view of ``printf('%.*c', 5000000, 'T')`` titles wrote 80 MB from a
    151 KB source."""
    kinds = {name.lower(): sql or "" for name, sql in con.execute("select name, sql from sqlite_master where type = 'table'")}
    return next((t for t in RECIPE_TABLES if kinds.get(t, "").lstrip().upper().startswith("CREATE VIRTUAL")), None)


# (the key, a query finding one repeated): the pool schema's keys the recipe relies on.
SOURCE_KEYS = (
    ("doc$topic.id", 'select 1 from "doc$topic" group by id having count(*) > 1 limit 1'),
    ("doc$chunk.id", 'select 1 from "doc$chunk" group by id having count(*) > 1 limit 1'),
    ("a slug in doc$topic", 'select 1 from "doc$topic" where collection = :c group by slug having count(*) > 1 limit 1'),
    ("a topic's chunk ord in doc$chunk", 'select 1 from "doc$chunk" x join "doc$topic" t on t.id = x.topic_id '
                                         "where t.collection = :c group by x.topic_id, x.ord having count(*) > 1 limit 1"),
)


def _repeated_key(con: sqlite3.Connection, collection: str) -> str | None:
    """The first key of the pool schema a source repeats, else None: 500 topics with id 1 and 500
    chunks of topic 1 (a 622 KB source without the schema's keys) wrote 250,000 chunks, and
    Firebird, whose tables lack the other two keys, took two topics of one slug (one never read)."""
    return next((key for key, sql in SOURCE_KEYS if con.execute(sql, {"c": collection}).fetchone() is not None), None)


def stored_value_fault(con: sqlite3.Connection, collection: str) -> str | None:
    """What of ``collection`` (in the pool ``con`` reads) a pool must not hold, else None: a
    text past its cap or not UTF-8, a value of the wrong type, a confidence that is no number.
    IMPORTDOC refuses such a source and ``pool build`` such a pool."""
    return _oversized_text(con, collection) or _not_utf8(con, collection) or _not_a_number(con, collection)


def _not_a_number(con: sqlite3.Connection, collection: str) -> str | None:
    """A link or alias whose confidence is no finite number (``'high'`` broke every search of a
    SQLite pool; ``1e999``, every doc_get), else None."""
    checks = (("a link", '"doc$link" ' + _OF_TOPICS), ("an alias", '"doc$alias" x where x.collection = :c'))
    wrong = "typeof(x.confidence) not in ('integer', 'real') or abs(x.confidence) > 1.7976931348623157e308"
    return next((f"{what} whose confidence is not a finite number" for what, rows in checks
                 if con.execute(f"select 1 from {rows} and ({wrong}) limit 1", {"c": collection}).fetchone()), None)


def _oversized_text(con: sqlite3.Connection, collection: str) -> str | None:
    """What of the collection holds a text past its cap (``TEXT_CAPS``), named with the cap, else
    None: doc_get read a 200 MB body whole before its answer was refused, about a gigabyte of
    server memory per call, and 30 MiB titles made each search hit 90 MB."""
    def faults(column: str, cap: int) -> list[tuple[str, str]]:
        return [(f"typeof(x.\"{column}\") not in ('text', 'null')", f"{column} is not text"),  # SQLite keeps any type
                (f'length(cast(x."{column}" as blob)) > {cap}', f"{column} is over {_size(cap)}")]
    return _first_text_fault(con, collection, faults)


def _is_utf8(value: bytes | None) -> bool:
    if value is None:
        return True
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _not_utf8(con: sqlite3.Connection, collection: str) -> str | None:
    """What of the collection holds a text that is not UTF-8, else None: SQLite keeps any bytes
    as text; a SQLite import then failed with a storage error naming no row, and a pool that took
    one from another writer failed every read of it."""
    con.create_function("knowspec_is_utf8", 1, _is_utf8, deterministic=True)

    def faults(column: str, cap: int) -> list[tuple[str, str]]:
        quoted = f'x."{column}"'
        return [(f"(typeof({quoted}) = 'text' and not knowspec_is_utf8(cast({quoted} as blob)))",
                 f"{column} is not UTF-8 text")]
    return _first_text_fault(con, collection, faults)


def _first_text_fault(con: sqlite3.Connection, collection: str,
                      faults: Callable[[str, int], list[tuple[str, str]]]) -> str | None:
    """``"<row> whose <fault>"`` for the first text column of ``TEXT_CAPS`` with a fault, else None.

    ``faults(column, cap)`` gives (SQL condition on ``x``, how it is said) pairs; one query a
    table tells whether any row has any, so a clean source costs a scan a table."""
    for what, rows, caps in TEXT_CAPS:
        checks = [fault for column, cap in caps.items() for fault in faults(column, cap)]
        either = " or ".join(condition for condition, _ in checks)
        if con.execute(f"select 1 from {rows} and ({either}) limit 1", {"c": collection}).fetchone() is None:
            continue
        for condition, said in checks:
            if con.execute(f"select 1 from {rows} and {condition} limit 1", {"c": collection}).fetchone():
                return f"{what} whose {said}"
    return None


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB" if n >= 1 << 10 else f"{n} bytes"


def resolve_target(settings, database: str) -> catalog.PoolLocation:
    """The pool IMPORTDOC writes, or the catalog's error (not registered, no pool, ...)."""
    return catalog.resolve_pool_location(settings.catalog, database)


def importer_for(location: catalog.PoolLocation, progress: Report | None = None
                 ) -> Callable[[Path, str], recipe.ImportResult]:
    """How to import into ``location``: the SQLite recipe (which reports ``progress``), else the
    storage module's ``import_collection(dsn, source, collection) -> recipe.ImportResult`` (same refusals)."""
    if location.storage == "SQLITE":
        return lambda source, collection: recipe.import_collection(location.dsn, source, collection,
                                                                   progress=progress)
    module_import = _storage_command(location, "import_collection", "IMPORTDOC into")
    return lambda source, collection: module_import(location.dsn, source, collection)


def import_collection(settings, database: str, collection: str, source_path: str, *,
                      confine: bool = False, progress: Report | None = None) -> dict[str, Any]:
    """Import ``collection`` from the pool file ``source_path`` into ``database``'s pool.

    ``confine`` (REST): the source must lie in ``settings.import_path``. The command line runs as
    the local user, who may name any file they can read.
    """
    require_params({"database": database, "collection": collection, "path": source_path})
    if not recipe.COLLECTION_NAME.fullmatch(collection):
        return refused(f"invalid collection name {collection!r}: must match ^[a-z0-9][a-z0-9-]*$")
    if collection == pools.HELP_COLLECTION:  # doc_search would list its hits as the help pool's
        return refused(f"collection {collection} is the help pool's name; give the documents another")
    if confine:
        source = confined_source(settings.import_path, source_path)
        if source is None:
            return refused(OUTSIDE_IMPORT_DIR)
        shown = source.relative_to(settings.import_path.resolve()).as_posix()
        reason = source_refusal(source, collection, shown=f"{shown} in the import folder")
    else:
        source = Path(source_path).expanduser()
        reason = source_refusal(source, collection)
    if reason:
        return refused(reason)
    target = resolve_target(settings, database)
    run_import = importer_for(target, progress)
    try:
        done = run_import(source, collection)
    except recipe.ImportRefused as exc:
        return refused(str(exc))
    except ToolError:
        raise
    except Exception as exc:  # any storage failure: the import's transaction rolled back
        raise ToolError(
            "storage_error",
            f"import of {collection} into {database} failed, nothing changed: {exc}",
        ) from exc
    return {
        "result": True,
        "collection": done.collection,
        "topics": done.topics,
        "chunks": done.chunks,
        "docsDb": target.docs_database,
        "source": source_path if confine else str(source),
    }


# --- CLI: `knowspec pool import --database DB --collection C SOURCE` ------------------------


def add_pool_import_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Mount ``import`` under the lead's ``pool`` command; ``--database`` names the target."""
    from knowspec.impl.cli import add_settings_options

    cmd = subparsers.add_parser(
        "import", help="import one collection of a source pool into a database's document pool"
    )
    from knowspec.impl.cli_args import collection_name, existing_file_or_bare_name

    cmd.add_argument("--collection", required=True, type=collection_name,
                     help="collection id: lower-case letters, digits and '-' (^[a-z0-9][a-z0-9-]*$)")
    cmd.add_argument("source", type=existing_file_or_bare_name,
                     help="source pool file (SQLite, schema v2); a bare file name is read from APPDIR")
    add_settings_options(cmd)  # --appdir, --catalog, ... and --database
    _require_database(cmd, "registered database whose document pool receives the collection")
    cmd.set_defaults(func=_cmd_import)
    return cmd


def _require_database(cmd: argparse.ArgumentParser, help_text: str) -> None:
    """Make the shared ``--database`` option the command's required target."""
    for action in cmd._actions:
        if "--database" in action.option_strings:
            action.required = True
            action.help = help_text


def _cmd_import(args: argparse.Namespace) -> int:
    from knowspec.impl.cli import settings_from

    settings = settings_from(args)
    from knowspec.impl.cli_args import UsageError

    source = settings.in_appdir(args.source)
    if not source.is_file():
        raise UsageError(f"file not found: {source}")
    try:
        with PhaseProgress("pool import") as report:
            outcome = import_collection(settings, args.database, args.collection, str(source), progress=report)
    except ToolError as exc:
        print(f"pool import failed: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    if not outcome["result"]:
        print(f"pool import: nothing imported: {outcome['message']}", file=sys.stderr)
        return 2
    print(
        f"imported {outcome['collection']}: {outcome['topics']} topics, "
        f"{outcome['chunks']} chunks into {outcome['docsDb']} from {outcome['source']}",
        file=sys.stdout,
    )
    return 0


# --- CLI: `knowspec pool remove --database DB --collection C` -------------------------------

def remove(settings, database: str, collection: str) -> tuple[catalog.PoolLocation, recipe.RemovedCollection]:
    """Remove ``collection`` from ``database``'s pool in one transaction (``ImportRefused`` when
    the pool does not hold it; nothing changes then)."""
    location = resolve_target(settings, database)
    if location.storage == "SQLITE":
        if not recipe.holds_pool_schema(location.dsn):  # never make a pool (or a WAL file) here
            raise recipe.absent_collection(collection)
        return location, recipe.remove_collection(location.dsn, collection)
    return location, _storage_command(location, "remove_collection", "removing a collection from")(location.dsn, collection)


def _storage_command(location: catalog.PoolLocation, name: str, what: str) -> Callable[..., Any]:
    """The storage module's ``name`` for a pool that is not SQLite, or ``not_implemented``."""
    module_name = pools.STORAGE_OPENERS.get(location.storage, "")
    try:
        return getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError, ValueError):
        raise ToolError("not_implemented", f"{what} {location.storage} storage is not available in this server") from None


def add_pool_remove_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Mount ``remove`` under the lead's ``pool`` command; ``--database`` names the pool."""
    from knowspec.impl.cli import add_settings_options
    from knowspec.impl.cli_args import collection_name

    cmd = subparsers.add_parser("remove", help="remove one collection from a database's document pool")
    cmd.add_argument("--collection", required=True, type=collection_name, help="the collection to remove")
    add_settings_options(cmd)
    _require_database(cmd, "registered database whose document pool loses the collection")
    cmd.set_defaults(func=_cmd_remove)
    return cmd


def _cmd_remove(args: argparse.Namespace) -> int:
    from knowspec.impl.cli import settings_from

    def run() -> str:
        location, done = remove(settings_from(args), args.database, args.collection)
        return f"removed {done.collection} from {location.docs_database}: {done.topics} topics, {done.chunks} chunks"
    return _pool_command("remove", run)


def _pool_command(name: str, run: Callable[[], str]) -> int:
    """Run a ``pool`` command: its line on stdout (exit 0); a refusal (2) or an error (1) on
    stderr, nothing changed either way (its transaction rolled back)."""
    try:
        said = run()
    except recipe.ImportRefused as exc:
        print(f"pool {name}: nothing changed: {exc}", file=sys.stderr)
        return 2
    except ToolError as exc:
        print(f"pool {name} failed: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    except Exception as exc:  # the storage's error
        print(f"pool {name} failed, nothing changed: {exc}", file=sys.stderr)
        return 1
    print(said, file=sys.stdout)
    return 0


# --- CLI: `knowspec pool reindex --database DB` ---------------------------------------------

def reindex(settings, database: str) -> catalog.PoolLocation:
    """Persist the full-text index of ``database``'s pool again, in one transaction (a pool
    imported before imports persisted it would otherwise build it in its first search)."""
    location = resolve_target(settings, database)
    if location.storage == "SQLITE":
        if not Path(location.dsn).is_file():  # never create a pool here
            raise ToolError("pool_unavailable", f"document pool not imported ({location.docs_database})")
        recipe.reindex(location.dsn)
        return location
    _storage_command(location, "reindex", "reindexing")(location.dsn)
    return location


def add_pool_reindex_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Mount ``reindex`` under the lead's ``pool`` command; ``--database`` names the pool."""
    from knowspec.impl.cli import add_settings_options

    cmd = subparsers.add_parser(
        "reindex", help="persist a database's full-text index again (pools imported before it was persisted)")
    add_settings_options(cmd)
    _require_database(cmd, "registered database whose document pool is reindexed")
    cmd.set_defaults(func=_cmd_reindex)
    return cmd


def _cmd_reindex(args: argparse.Namespace) -> int:
    import time

    from knowspec.impl.cli import settings_from

    def run() -> str:
        start = time.perf_counter()
        location = reindex(settings_from(args), args.database)
        return f"reindexed {location.docs_database} ({location.storage.lower()}) in {time.perf_counter() - start:.1f} s"
    return _pool_command("reindex", run)
