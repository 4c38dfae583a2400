"""Throwaway database engines for the storage tests and benchmarks (not a benchmark itself).

- ``PgCluster``: a PostgreSQL cluster made with ``initdb`` / ``pg_ctl`` in a fresh temporary
  folder, listening on a unix socket only (no TCP), fsync off; ``stop()`` removes it. As root,
  ``initdb`` runs as the ``postgres`` user (it refuses root) and the folder is handed to it.
- ``fresh_pg_database``: a new empty database in that cluster.
- Firebird needs nothing started: ``storage.firebird.load_engine()`` loads the embedded engine
  of the ``firebird-embedded`` wheel, and a pool is a database file.

Used by ``tests/docpool/storages.py`` (the ``pg_dsn`` fixture) and
``benchmarks/docpool_storages.py``; import it with ``benchmarks/`` on ``sys.path``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path


def pg_bindir() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl`` (``pg_config --bindir``, else Debian's), or None."""
    try:
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        out = ""
    for cand in [out, *sorted(str(p) for p in Path("/usr/lib/postgresql").glob("*/bin"))]:
        if cand and (Path(cand) / "initdb").is_file() and (Path(cand) / "pg_ctl").is_file():
            return Path(cand)
    return None


def as_postgres(cmd: list[str]) -> list[str]:
    """initdb refuses to run as root: run it as the ``postgres`` user then."""
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


class PgCluster:
    """A throwaway PostgreSQL cluster: ``start()`` returns its DSN, ``stop()`` deletes it.

    Also a context manager (``with PgCluster() as dsn``)."""

    def __init__(self, bindir: Path | None = None) -> None:
        self.bindir = bindir or pg_bindir()
        self.base: Path | None = None
        self.dsn = ""

    @property
    def available(self) -> bool:
        return self.bindir is not None

    def start(self) -> str:
        if self.bindir is None:
            raise RuntimeError("PostgreSQL binaries (initdb, pg_ctl) are absent: run scripts/ci-services")
        base = Path(tempfile.mkdtemp(prefix="knowspec-pg-"))
        self.base = base
        if os.geteuid() == 0:
            shutil.chown(base, "postgres", "postgres")
        port = str(20000 + os.getpid() % 20000)  # names the socket file only (no TCP)
        data = base / "data"
        try:
            subprocess.run(as_postgres([str(self.bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A",
                                        "trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"]),
                           check=True, capture_output=True)
            opts = (f"-k {base} -p {port} -c listen_addresses='' -c fsync=off -c synchronous_commit=off "
                    "-c full_page_writes=off")
            subprocess.run(as_postgres([str(self.bindir / "pg_ctl"), "-D", str(data), "-l", str(base / "pg.log"),
                                        "-w", "-t", "30", "-o", opts, "start"]), check=True, capture_output=True)
        except BaseException:
            shutil.rmtree(base, ignore_errors=True)
            self.base = None
            raise
        self.dsn = f"host={base} port={port} user=postgres dbname=postgres"
        return self.dsn

    def stop(self) -> None:
        """Close this process's connection pools, stop the server (immediate) and delete the folder."""
        if self.base is None:
            return
        from knowspec.impl.docpool import catalog_postgres
        from knowspec.impl.docpool.storage import postgres

        postgres.close_pools()
        catalog_postgres.close_pools()
        subprocess.run(as_postgres([str(self.bindir / "pg_ctl"), "-D", str(self.base / "data"), "-m", "immediate",
                                    "-w", "stop"]), capture_output=True)
        shutil.rmtree(self.base, ignore_errors=True)
        self.base = None

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def fresh_pg_database(pg_dsn: str, name: str) -> str:
    """A new empty database named ``name`` next to ``pg_dsn`` (or, when not allowed, ``pg_dsn``
    with its ``ivd$docs`` schema dropped), so an import starts from an empty pool."""
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    with psycopg.connect(pg_dsn, autocommit=True) as con:
        try:
            con.execute(sql.SQL("drop database if exists {}").format(sql.Identifier(name)))
            con.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
        except psycopg.Error:
            con.execute('drop schema if exists "ivd$docs" cascade')
            return pg_dsn
    return make_conninfo(**{**conninfo_to_dict(pg_dsn), "dbname": name})
