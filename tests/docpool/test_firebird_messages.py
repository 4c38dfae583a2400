"""Firebird reads through ``firebird_messages``: the same rows as the driver's own path, the
driver's errors for values it does not pack, BLOBs of any length."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from knowspec.impl.docpool.catalog import PoolLocation
from knowspec.impl.docpool.storage import firebird
from storages import fb_dsn, fb_ready  # noqa: F401

pytestmark = pytest.mark.firebird

PROBE = ("create table t_probe (id bigint not null primary key, s varchar(100), i integer, d double precision, "
         "b blob sub_type text, bin blob sub_type binary, c char(3))")
SELECT = "select id, s, i, d, b, bin, c from t_probe where id = ? and (s = ? or s is null)"
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)


@pytest.fixture(scope="module")
def probe_dsn(tmp_path_factory, fb_ready):
    dsn = fb_dsn(tmp_path_factory.mktemp("fb-messages"), "probe")
    con = firebird.ensure_pool(dsn)
    con.cursor().execute(PROBE)
    con.commit()
    con.close()
    yield dsn
    firebird.close_connections()


def _pool(dsn):
    return firebird.open_pool(PoolLocation("db", "db", "FIREBIRD", dsn))


def _insert(dsn, row) -> None:
    con = firebird.connect(dsn)
    try:
        c = "null" if row[6] is None else "?"  # the driver fails a NULL parameter for a CHAR(3)
        con.cursor().execute(f"insert into t_probe(id, s, i, d, b, bin, c) values (?, ?, ?, ?, ?, ?, {c})",
                             [v for k, v in enumerate(row) if k < 6 or v is not None])
        con.commit()
    finally:
        con.close()


def _driver_rows(dsn, sql, params):
    con = firebird.connect(dsn)
    try:
        cur = con.cursor()
        cur.execute(sql, list(params))
        return [tuple(firebird._value(v) for v in r) for r in cur.fetchall()]
    finally:
        con.close()


_ids = iter(range(1, 10**9))


@hsettings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(s=st.none() | TEXT, i=st.none() | st.integers(-2**31, 2**31 - 1),
       d=st.none() | st.floats(allow_nan=False), b=st.none() | st.text(max_size=300).filter(lambda t: "\x00" not in t),
       bin=st.none() | st.binary(max_size=300), c=st.none() | st.text(alphabet="abc ", max_size=3))
def test_rows_read_through_the_message_layout_equal_the_drivers(probe_dsn, s, i, d, b, bin, c):
    row = (next(_ids), s, i, d, b, bin, c)
    _insert(probe_dsn, row)
    params = [row[0], s if s is not None else ""]
    with _pool(probe_dsn) as pool:
        assert pool._prepared(SELECT)[1] is not None  # the layout path, not the driver's
        assert pool._rows(SELECT, params) == _driver_rows(probe_dsn, SELECT, params)


def test_a_blob_longer_than_one_segment_reads_whole(probe_dsn):
    text = "çok uzun metin " * 20000  # ~300 KB in UTF8: several 64 KB segments
    _insert(probe_dsn, (10**9 + 1, "long", 1, 1.0, text, bytes(range(256)) * 700, "abc"))
    with _pool(probe_dsn) as pool:
        (got,) = pool._rows("select b, bin from t_probe where id = ?", [10**9 + 1])
    assert got == (text, bytes(range(256)) * 700)


def test_a_value_too_long_for_its_parameter_fails_as_the_driver_fails(probe_dsn):
    sql = "select id from t_probe where s = cast(? as varchar(5))"
    with _pool(probe_dsn) as pool:
        assert pool._prepared(sql)[1] is not None
        with pytest.raises(pool.driver_errors):  # the engine's truncation error, not a ValueError
            pool._rows(sql, ["x" * 50])
        assert pool._rows(sql, ["short"]) == []  # the statement still serves the next call


def test_a_value_of_another_type_takes_the_drivers_conversion(probe_dsn):
    _insert(probe_dsn, (10**9 + 2, "conv", 7, 2.5, "", b"", "x"))
    with _pool(probe_dsn) as pool:
        assert pool._rows("select s from t_probe where id = ?", [str(10**9 + 2)]) == [("conv",)]


def test_bulk_insert_stores_what_it_is_given_and_fails_an_overlong_value_as_the_driver_does(probe_dsn):
    import firebird.driver as driver

    rows = [(2 * 10**9 + k, None if k == 2 else f"é{k}", k, k / 3, "metin " * k, bytes([k]) * k)
            for k in range(1, 5)]
    con = firebird.connect(probe_dsn)
    try:
        cur = con.cursor()
        firebird.bulk_insert(cur, "insert into t_probe(id, s, i, d, b, bin) values (?, ?, ?, ?, ?, ?)", rows)
        got = firebird.select_rows(cur, "select id, s, i, d, b, bin from t_probe where id > ? order by id",
                                   [2 * 10**9])
        assert got == rows
        with pytest.raises(driver.Error):  # the engine's truncation error, not a ValueError
            firebird.bulk_insert(cur, "insert into t_probe(id, s) values (?, ?)", [(3 * 10**9, "x" * 101)])
    finally:
        con.rollback()
        con.close()


def test_narrowed_casts_each_text_parameter_to_its_longest_value_only():
    sql = "insert into t(a, b, c, d) values (?, ?, cast(? as varchar(1000)), ?)"
    rows = [(1, "çok", "x" * 300, b"\x00"), (2, None, "y", b"")]
    assert firebird.narrowed(sql, ["int", "varying", "varying", "blob"], rows) == (
        "insert into t(a, b, c, d) values (?, cast(? as varchar(4)), cast(cast(? as varchar(512)) as varchar(1000)), ?)")
    texts = [(1, "a", "b", "{\"k\": 1}"), (2, "a", "b", None)]  # a text BLOB: the engine makes it from the text
    assert firebird.narrowed(sql, ["int", "varying", "varying", "blob"], texts).endswith(
        "cast(? as varchar(8)))")
    long_text = [(1, "a", "b", "x" * (firebird.MAX_CAST_CHARS + 1))]
    assert firebird.narrowed(sql, ["int", "varying", "varying", "blob"], long_text).endswith(", ?)")
    assert firebird.narrowed(sql, ["int", "varying", "varying", "blob"], [(1, b"bytes", "x", b"")]) == sql
    assert firebird.narrowed(sql, ["int", "varying", "varying", "blob"],
                             [(1, "x" * (firebird.MAX_CAST_CHARS + 1), "x", b"")]) == sql


_bulk_ids = iter(range(4 * 10**9, 5 * 10**9))


@hsettings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.none() | st.text(alphabet=st.characters(blacklist_categories=("Cs",),
                                                                  blacklist_characters="\x00"), max_size=100),
                      min_size=1, max_size=8))
def test_bulk_insert_through_narrowed_parameters_stores_every_text_exactly(probe_dsn, texts):
    rows = [(next(_bulk_ids), t, t) for t in texts]
    sql = "insert into t_probe(id, s, b) values (?, ?, ?)"
    con = firebird.connect(probe_dsn)
    try:
        cur = con.cursor()
        firebird.bulk_insert(cur, sql, rows)
        got = firebird.select_rows(cur, "select id, s, b from t_probe where id between ? and ? order by id",
                                   [rows[0][0], rows[-1][0]])
        assert got == rows
    finally:
        con.rollback()
        con.close()


def test_topics_with_short_and_long_bodies_store_every_body_exactly(probe_dsn):
    """Short bodies go in as VARCHAR parameters, longer ones as BLOBs written here: both exact."""
    bodies = ["kısa gövde", "uzun ğövde " * (firebird.MAX_CAST_CHARS // 5), "", "ç" * firebird.MAX_CAST_CHARS]
    rows = [(7 * 10**9 + k, "c", f"s{k}", "t", "b", "", "", "", "text/markdown", None, body)
            for k, body in enumerate(bodies)]
    con = firebird.connect(probe_dsn)
    try:
        cur = con.cursor()
        firebird._insert(cur, "topics", dict(firebird.INSERTS)["topics"], rows)
        got = firebird.select_rows(cur, "select body_md from doc$topic where id >= ? order by id", [7 * 10**9])
        assert [b for (b,) in got] == bodies
    finally:
        con.rollback()
        con.close()
