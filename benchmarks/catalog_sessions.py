"""Two servers sharing one PostgreSQL catalog (issue #18 goal 3, its shared-catalog part).

Correctness first: two ``serve --http`` processes name the same ``--catalog postgresql://...``;
logins are made on A and used on B, logouts on B and tried on A, and every one must be
honoured (any miss fails the run). Then the cost: a REST/MCP request checks its session in the
catalog, so with PostgreSQL that is a network round trip. The floor is one bare round trip
(``select 1`` in autocommit on a connection of the same pool, same process, same run); the figure is
``SessionStore.get`` (read the row, record the use at most once a second); the bound is 2x
the floor. The SQLite file's ``get`` is printed beside it for scale. The PostgreSQL server is a
throwaway cluster on a Unix socket (``engines.PgCluster``); the machine is shared, so the
ratio of one run is the figure to trust.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import httpx2 as httpx

sys.path.insert(0, str(Path(__file__).parent))

from common import free_port, goal, percentiles, wait_healthy, write_results  # noqa: E402
from docpool_setup import machine_load  # noqa: E402
from engines import PgCluster, fresh_pg_database  # noqa: E402

GOAL_RATIO = 2.0
USER, PASSWORD = "bench", "bench-password"


def as_url(dsn: str) -> str:
    from psycopg.conninfo import conninfo_to_dict

    parts = conninfo_to_dict(dsn)
    dbname = parts.pop("dbname", "")
    return f"postgresql:///{urllib.parse.quote(dbname)}?{urllib.parse.urlencode(parts)}"


def _timed(fn, calls: int) -> list[float]:
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def session_costs(url: str, sqlite_file: Path, calls: int) -> dict:
    from knowspec.impl.docpool.catalog_postgres import postgres_catalog
    from knowspec.impl.rest.sessions import SessionStore

    pg = SessionStore(3600, idle_seconds=1800, catalog=url)
    lite = SessionStore(3600, idle_seconds=1800, catalog=sqlite_file)
    pg_token, lite_token = pg.open(USER, (), None).token, lite.open(USER, (), None).token
    pool = postgres_catalog(url).pool

    def round_trip() -> None:
        with pool.connection() as con:
            con.autocommit = True  # one statement, one round trip: nothing cheaper reaches the server
            con.execute("select 1").fetchone()
            con.autocommit = False

    for fn in (round_trip, lambda: pg.get(pg_token), lambda: lite.get(lite_token)):
        _timed(fn, 50)  # warm
    floor, figure, sqlite = (_timed(round_trip, calls), _timed(lambda: pg.get(pg_token), calls),
                             _timed(lambda: lite.get(lite_token), calls))
    row = goal("session check in a PostgreSQL catalog vs one round trip (p50)", statistics.median(floor),
               statistics.median(figure), GOAL_RATIO, "ms")
    return {"goal": row, "round_trip": percentiles(floor), "postgres_get": percentiles(figure),
            "sqlite_get": percentiles(sqlite)}


def _server(url: str, appdir: Path, port: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "knowspec.impl.cli", "serve", "--http", f"127.0.0.1:{port}",
                             "--appdir", str(appdir), "--catalog", url],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def two_servers(url: str, root: Path, rounds: int) -> dict:
    """Logins on A used on B, logouts on B tried on A: every one must be honoured."""
    ports = [free_port(), free_port()]
    procs = [_server(url, root / name, port) for name, port in zip("ab", ports)]
    bases = [f"http://127.0.0.1:{port}" for port in ports]
    honoured = ended = 0
    try:
        for base, proc in zip(bases, procs):
            wait_healthy(base, proc)
        with httpx.Client(base_url=bases[0], timeout=30) as a, httpx.Client(base_url=bases[1], timeout=30) as b:
            for _ in range(rounds):
                token = a.post("/ClientREST/Login", json={"user": USER, "password": PASSWORD}).json()["token"]
                headers = {"authorization": f"Bearer {token}"}
                honoured += b.post("/ClientREST/DocCollections", headers=headers, json={}).status_code != 401
                b.post("/ClientREST/Logout", headers=headers)
                ended += a.post("/ClientREST/DocCollections", headers=headers, json={}).status_code == 401
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(30)
    print(f"two servers, one PostgreSQL catalog: logins on A honoured by B {honoured}/{rounds}, "
          f"logouts on B seen by A {ended}/{rounds}", flush=True)
    return {"rounds": rounds, "logins_honoured": honoured, "logouts_seen": ended,
            "holds": honoured == rounds and ended == rounds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="session checks timed per store")
    parser.add_argument("--rounds", type=int, default=20, help="login/logout rounds across the two servers")
    args = parser.parse_args(argv)

    from knowspec.impl.docpool import auth, catalog_postgres

    load_start = machine_load()
    with PgCluster() as dsn, tempfile.TemporaryDirectory(prefix="knowspec-catalog-bench-") as tmp:
        url = as_url(fresh_pg_database(dsn, "knowspec_catalog_bench"))
        auth.SCRYPT_N = 2**10  # login cost is not measured here (params are stored with the hash)
        auth.create_user(url, USER, PASSWORD)
        root = Path(tmp)
        costs = session_costs(url, root / "catalog.db", args.calls)
        shared = two_servers(url, root, args.rounds)
        catalog_postgres.close_pools()
    data = {"load_start": load_start, "load_end": machine_load(), **costs, "two_servers": shared}
    write_results("catalog_sessions", data)
    return 0 if shared["holds"] else 1


if __name__ == "__main__":
    sys.exit(main())
