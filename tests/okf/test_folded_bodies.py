"""The search index's folded bodies: kept compressed, given back byte for byte."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from knowspec.impl.okf.search import boundary_signatures as bs
from knowspec.impl.okf.search import concepts as sc
from knowspec.impl.okf.search import concepts_index as sci
from knowspec.impl.okf.search.folded_bodies import FoldedBodies
from knowspec.impl.rules.text import case_fold

BODIES = st.lists(st.binary(max_size=300) | st.text(alphabet="ab é\u00df-", max_size=300).map(str.encode), max_size=12)


@settings(max_examples=200, deadline=None)
@given(BODIES)
def test_every_body_comes_back_as_it_was_given(bodies):
    stored = FoldedBodies.of(bodies)
    assert len(stored) == len(bodies)
    assert list(stored) == bodies
    assert [stored[row] for row in reversed(range(len(bodies)))] == bodies[::-1]


@settings(max_examples=200, deadline=None)
@given(BODIES)
def test_stored_rows_carried_into_a_new_store_come_back_unchanged(bodies):
    first = FoldedBodies.of(bodies)
    order = list(reversed(range(len(bodies))))
    carried = FoldedBodies([first.stored(row) for row in order])
    assert list(carried) == [bodies[row] for row in order]


@settings(max_examples=200, deadline=None)
@given(BODIES, st.binary(min_size=1, max_size=4))
def test_holding_finds_exactly_the_bodies_that_contain_the_needle(bodies, needle):
    stored = FoldedBodies.of(bodies)
    rows = np.arange(len(bodies))
    assert stored.holding(rows, needle) == [row for row, body in enumerate(bodies) if needle in body]
    odd = rows[1::2]
    assert stored.holding(odd, needle) == [row for row in odd.tolist() if needle in bodies[row]]


@settings(max_examples=200, deadline=None)
@given(BODIES, st.integers(min_value=1, max_value=400))
def test_batches_give_every_body_once_in_order(bodies, max_bytes):
    batches = list(FoldedBodies.of(bodies).batches(max_bytes))
    assert [body for _, batch in batches for body in batch] == bodies
    assert [first for first, _ in batches] == [sum(len(b) for _, b in batches[:k]) for k in range(len(batches))]
    assert all(sum(map(len, batch)) >= max_bytes for _, batch in batches[:-1])  # only the last one short


def test_prose_bodies_are_kept_in_well_under_their_plain_bytes():
    words = "the delta table keeps a transaction log of every commit to its files".split()
    bodies = [" ".join(words[(i + k) % len(words)] for k in range(600)).encode() for i in range(50)]
    stored = FoldedBodies.of(bodies)
    assert stored.nbytes() < sum(map(len, bodies)) / 3


def test_signatures_made_in_several_batches_equal_one_signing_of_all(monkeypatch):
    monkeypatch.setattr(bs, "CHUNK_BYTES", 40)
    entries = [(f"c{i}", sc.SearchableConcept.of(f"c{i}", "", "", [], f"sql warehouse {i} " * (i + 1)))
               for i in range(30)]
    index = sci.ConceptSearchIndex(entries)
    assert len(list(index.bodies.batches(bs.CHUNK_BYTES))) > 5
    assert index.search(case_fold("warehouse 7 sql"), 10).hits == [("c7", "body")]
    assert (index.boundaries == bs.sign(list(index.bodies))).all()
