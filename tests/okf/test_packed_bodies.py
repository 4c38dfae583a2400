"""The search index's compressed bodies give back every body exactly and find exactly the rows
whose body holds a needle, however rows fall into blocks or are copied from a previous index."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from knowspec.impl.okf.search import packed_bodies as pb

bodies_st = st.lists(st.binary(max_size=40) | st.text(alphabet="ab \x00é", max_size=3000).map(str.encode), max_size=30)


@settings(max_examples=200, deadline=None)
@given(bodies_st)
def test_packed_bodies_give_back_every_body(bodies):
    packed = pb.pack(bodies)
    assert len(packed) == len(bodies)
    assert list(packed) == bodies
    assert [packed[row] for row in range(len(bodies))] == bodies
    assert pb.Unpacked(packed)[1:len(bodies):2] == bodies[1::2]


@settings(max_examples=200, deadline=None)
@given(bodies_st, st.data())
def test_holding_is_exactly_the_rows_whose_body_holds_the_needle(bodies, data):
    packed = pb.pack(bodies)
    rows = data.draw(st.lists(st.integers(0, max(len(bodies) - 1, 0)), unique=True)) if bodies else []
    needle = data.draw(st.sampled_from([b"a", b"ab", b"b a", "é".encode(), b"a" * 9, b"zz"]))
    found = packed.holding(np.array(rows, dtype=np.intp), needle)
    assert found == sorted(row for row in rows if needle in bodies[row])


@settings(max_examples=200, deadline=None)
@given(bodies_st, st.data())
def test_a_rebuilt_index_has_the_copied_and_fresh_bodies_in_row_order(bodies, data):
    previous = pb.pack(bodies)
    picks = data.draw(st.lists(st.integers(-1, len(bodies) - 1) if bodies else st.just(-1), max_size=40))
    sources = [row if row >= 0 else b"fresh %d" % i for i, row in enumerate(picks)]
    expected = [bodies[s] if isinstance(s, int) else s for s in sources]
    assert list(pb.pack_rows(sources, previous)) == expected


def test_an_unchanged_run_of_rows_reuses_its_packed_block_as_it_is():
    bodies = [b"x" * 3000 + b"%d" % i for i in range(12)]
    previous = pb.pack(bodies)
    assert len(previous.block_sizes) > 2
    rebuilt = pb.pack_rows([*range(6), b"changed", *range(7, 12)], previous)
    kept = {bytes(previous.packed_block(b)) for b in range(len(previous.block_sizes))}
    reused = [b for b in range(len(rebuilt.block_sizes)) if bytes(rebuilt.packed_block(b)) in kept]
    assert len(reused) >= len(previous.block_sizes) - 2  # only the block holding row 6 (and a tail) is packed anew
    assert list(rebuilt) == [*bodies[:6], b"changed", *bodies[7:]]


def test_packing_halves_plain_text_at_least():
    bodies = [b"the delta table holds the rows of the lakehouse, partitioned by date %d\n" % i * 20 for i in range(50)]
    assert pb.pack(bodies).nbytes() * 2 < sum(map(len, bodies))
