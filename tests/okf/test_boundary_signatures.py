"""The bodies' boundary signatures: never drop a body holding the query; signed in bulk (numpy,
in the helper process) and in process (a few changed bodies) exactly as the rule says."""

from __future__ import annotations


import pytest
from hypothesis import given, settings, strategies as st

from knowspec.impl.okf.search import boundary_signatures as bs
from knowspec.impl.okf.search import boundary_signing as signing
from knowspec.impl.okf.search import row_bitmaps as rb

BODY = st.text(alphabet="ab1_-. \n)é", max_size=40)
NEEDLE = st.text(alphabet="ab1_-. \x00\né€", min_size=1, max_size=5)


def _columns(bodies: list[bytes]) -> bytes:
    return signing.sign(bodies)


def _row_bits(columns: bytes, n_rows: int, row: int) -> list[int]:
    """The bits row ``row`` has in ``columns``."""
    stride = (n_rows + 7) // 8
    return [bit for bit in range(bs.BITS) if columns[bit * stride + row // 8] >> (row % 8) & 1]


def _kept(bodies: list[bytes], needle: bytes) -> list[int]:
    return list(rb.rows(bs.narrow(_columns(bodies), len(bodies), rb.every_row(len(bodies)), needle)))


@settings(max_examples=200, deadline=None)
@given(st.lists(BODY, max_size=8), NEEDLE)
def test_signatures_never_drop_a_body_holding_the_query(texts, needle):
    bodies = [t.encode() for t in texts]
    query = needle.encode()
    assert {row for row, body in enumerate(bodies) if query in body} <= set(_kept(bodies, query))


def test_signatures_drop_bodies_without_the_join():
    assert _kept([b"sql warehouse", b"sql and warehouse", b"warehouse sql"], b"sql warehouse") == [0]


def test_signatures_tell_a_join_apart_by_the_two_bytes_either_side():
    bodies = [b"create table", b"the table", b"one note tab"]  # the same trigram "e t" in each
    assert _kept(bodies, b"create table") == [0, 2]  # "te ta"


@settings(max_examples=200, deadline=None)
@given(st.lists(BODY, max_size=12))
def test_a_body_signed_in_process_has_the_bits_the_bulk_signer_gives_it(texts):
    """The rule has two implementations, numpy's for whole builds and the scalar one for a few
    changed bodies and for queries: they must set the same bits."""
    bodies = [t.encode() for t in texts]
    signed = signing.sign(bodies)
    assert [_row_bits(signed, len(bodies), row) for row in range(len(bodies))] == list(map(bs.body_bits, bodies))


@settings(max_examples=50, deadline=None)
@given(st.lists(BODY, min_size=1, max_size=20))
def test_columns_hold_for_each_bit_the_rows_that_have_it(texts):
    bodies = [t.encode() for t in texts]
    columns, stride = _columns(bodies), (len(bodies) + 7) // 8
    assert len(columns) == bs.BITS * stride
    for bit in range(0, bs.BITS, 97):
        column = rb.of_bytes(columns[bit * stride:(bit + 1) * stride])
        assert list(rb.rows(column)) == [row for row, body in enumerate(bodies) if bit in bs.body_bits(body)]


@pytest.mark.parametrize("chunk_bodies", [1, 8, 16, 256])
def test_bodies_signed_in_chunks_equal_bodies_signed_one_by_one(monkeypatch, chunk_bodies):
    bodies = [f"{'-' if i % 3 else ''}w{i} x-{i}. y{'.' if i % 2 else ''}".encode() for i in range(50)] + [b"", b"a b", b"."]
    monkeypatch.setattr(signing, "_CHUNK_BODIES", chunk_bodies)
    whole = signing.sign(bodies)
    assert [_row_bits(whole, len(bodies), row) for row in range(len(bodies))] == [
        _row_bits(signing.sign([body]), 1, 0) for body in bodies]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(BODY, st.one_of(st.none(), BODY)), min_size=1, max_size=12))
def test_spliced_rows_equal_a_signing_from_scratch(pairs):
    before = [old.encode() for old, _ in pairs]
    after = [(new if new is not None else old).encode() for old, new in pairs]
    fresh = {row: bs.body_bits(after[row]) for row, (_, new) in enumerate(pairs) if new is not None}
    assert bs.splice(_columns(before), len(before), fresh) == _columns(after)
