"""Idle SQLite reader connections (``docpool.pools``): reused only for the very same file.

A call's pool connection waits for the next call instead of being closed; these tests pin that
it is handed out again only while the path names the same file, that a connection left inside
a transaction is never reused (it would pin an old snapshot), and that the idle set is bounded.
"""

from __future__ import annotations

import shutil

import pytest

from docpool_sample import SAMPLE
from knowspec.impl import runtime as process
from knowspec.impl.docpool import pools
from knowspec.impl.docpool.builder import build_pool
from knowspec.impl.docpool.storage.base import UNRESTRICTED


@pytest.fixture
def readers():
    runtime = process.Runtime()
    yield pools._IdleReaders(runtime)
    runtime.close()


def idle(readers) -> list[tuple[str, object]]:
    """(file key, connection) of every idle connection, least recently used file first."""
    return [(key, con) for key in readers.cache.keys() for con in readers.cache.peek(key)]


@pytest.fixture(scope="module")
def pool_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("readers") / "pool.db"
    build_pool(SAMPLE, path, "netsim-help", title="v1", erisim="herkes")
    return path


def test_a_closed_pool_lends_its_connection_to_the_next_open_of_the_same_file(readers, pool_file):
    first = readers.open(pool_file, "pool")
    con = first._con
    first.close()
    second = readers.open(pool_file, "pool")
    assert second._con is con
    assert second.collections(UNRESTRICTED)[0].title == "v1"
    second.close()


def test_two_open_pools_never_share_a_connection(readers, pool_file):
    a, b = readers.open(pool_file, "pool"), readers.open(pool_file, "pool")
    assert a._con is not b._con
    a.close()
    b.close()


def test_a_replaced_file_gets_a_new_connection_and_its_new_content(readers, pool_file, tmp_path):
    path = tmp_path / "help.db"
    shutil.copy(pool_file, path)
    old = readers.open(path, "help")
    old_con = old._con
    old.close()
    build_pool(SAMPLE, tmp_path / "next.db", "netsim-help", title="v2", erisim="herkes")
    (tmp_path / "next.db").replace(path)
    new = readers.open(path, "help")
    assert new._con is not old_con
    assert new.collections(UNRESTRICTED)[0].title == "v2"
    new.close()
    assert idle(readers) and all(con is not old_con for _, con in idle(readers))


def test_a_connection_left_in_a_transaction_is_closed_not_reused(readers, pool_file):
    pool = readers.open(pool_file, "pool")
    con = pool._con
    con.execute('select count(*) from "doc$topic"').fetchone()
    pool._release(con)  # handed back with the pool's read transaction still open
    again = readers.open(pool_file, "pool")
    assert again._con is not con
    again.close()


def test_a_closed_pool_hands_its_connection_back_outside_its_read_transaction(readers, pool_file):
    pool = readers.open(pool_file, "pool")
    con = pool._con
    assert con.in_transaction  # one snapshot for the call
    pool.close()
    assert not con.in_transaction
    again = readers.open(pool_file, "pool")
    assert again._con is con
    again.close()


def test_idle_connections_are_bounded_per_file_and_in_files(readers, pool_file, tmp_path):
    opened = []
    for i in range(readers.MAX_IDLE_FILES + 3):
        path = tmp_path / f"p{i}.db"
        shutil.copy(pool_file, path)
        opened.append(readers.open(path, f"p{i}"))
    opened += [readers.open(pool_file, "pool") for _ in range(readers.IDLE_PER_FILE + 2)]
    for pool in opened:
        pool.close()
    kept = idle(readers)
    assert len(readers.cache) == readers.MAX_IDLE_FILES
    assert sum(key == str(pool_file.absolute()) for key, _ in kept) == readers.IDLE_PER_FILE
    assert readers.cache.keys()[:-1] == [str((tmp_path / f"p{i}.db").absolute())
                                         for i in range(4, readers.MAX_IDLE_FILES + 3)]


def test_closing_a_pool_twice_gives_its_connection_back_once(readers, pool_file):
    pool = readers.open(pool_file, "pool")
    pool.close()
    pool.close()
    assert len(idle(readers)) == 1
    a, b = readers.open(pool_file, "pool"), readers.open(pool_file, "pool")
    assert a._con is not b._con
    a.close()
    b.close()


def test_concurrent_calls_answer_what_serial_calls_answer(tmp_path):
    """Idle readers and catalog lookups are shared by every worker thread of the server."""
    from concurrent.futures import ThreadPoolExecutor

    from docpool_sample import call, make_env

    env = make_env(tmp_path)
    asks = [("doc_search", {"query": q}) for q in ("stok", "fatura", "kalem", "depo", "cari")]
    asks += [("doc_collections", {}), ("help_search", {"query": "stok"}), ("doc_stats", {})]
    serial = [call(tool, env.ctx(), **kw) for tool, kw in asks]
    with ThreadPoolExecutor(6) as pool:
        rounds = list(pool.map(lambda i: call(asks[i % len(asks)][0], env.ctx(), **asks[i % len(asks)][1]),
                               range(12 * len(asks))))
    assert rounds == [serial[i % len(asks)] for i in range(12 * len(asks))]


def test_taking_one_idle_connection_leaves_its_spares_idle(readers, pool_file):
    a, b = readers.open(pool_file, "pool"), readers.open(pool_file, "pool")
    a.close()
    b.close()
    again = readers.open(pool_file, "pool")
    assert len(idle(readers)) == 1
    spare = idle(readers)[0][1]
    assert spare.execute("select 1").fetchone()[0] == 1  # still open
    again.close()
