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


def test_prose_bodies_are_kept_in_well_under_their_plain_bytes():
    words = "the delta table keeps a transaction log of every commit to its files".split()
    bodies = [" ".join(words[(i + k) % len(words)] for k in range(600)).encode() for i in range(50)]
    stored = FoldedBodies.of(bodies)
    assert stored.nbytes() < sum(map(len, bodies)) / 3


def test_signatures_made_in_several_passes_equal_one_signing_of_all(monkeypatch):
    monkeypatch.setattr(bs, "CHUNK_BYTES", 40)
    passes = []
    real = bs._sign_chunk
    monkeypatch.setattr(bs, "_sign_chunk", lambda out, bodies: passes.append(len(bodies)) or real(out, bodies))
    entries = [(f"c{i}", sc.SearchableConcept.of(f"c{i}", "", "", [], f"sql warehouse {i} " * (i + 1)))
               for i in range(30)]
    index = sci.ConceptSearchIndex(entries)
    assert index.search(case_fold("warehouse 7 sql"), 10).hits == [("c7", "body")]
    assert len(passes) > 5  # the stored bodies were signed in several passes
    monkeypatch.setattr(bs, "CHUNK_BYTES", 1 << 30)
    assert (index.boundaries == bs.sign(list(index.bodies))).all()
