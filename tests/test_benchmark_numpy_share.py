"""The pure-Python probes of ``benchmarks/okf_numpy_share.py`` do the work they are timed against:
the same body postings as the index's builder, and signature bits that a body holding a query
always has (so a query's bits narrow its candidates as the product's signatures do)."""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import given, settings, strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from okf_numpy_share import numpy_postings, probe_bits, probe_postings_map, python_signatures  # noqa: E402

TEXT = st.text(alphabet="ab1_-. \nxé", max_size=24).map(str.encode)


@settings(max_examples=100, deadline=None)
@given(st.lists(TEXT, max_size=8))
def test_the_postings_probe_gives_the_builders_postings(bodies):
    built = numpy_postings(bodies)
    expected = {token: built.rows[built.offsets[i]:built.offsets[i + 1]].tolist()
                for i, token in enumerate(built.tokens())}
    assert probe_postings_map(bodies) == expected


@settings(max_examples=200, deadline=None)
@given(TEXT, TEXT, TEXT)
def test_a_body_holding_a_query_has_every_bit_of_the_query(before, query, after):
    assert probe_bits(query, body=False) <= probe_bits(before + query + after)


def test_each_bodys_bits_are_set_in_its_row_of_the_bitmaps():
    bodies = [b"merge partition", b"delta-table", b"noseparators"]
    columns = python_signatures(bodies)
    for row, body in enumerate(bodies):
        for column in range(4096):
            assert bool(columns[column][row >> 3] & (1 << (row & 7))) == (column in probe_bits(body))
    assert probe_bits(b"merge partition", body=False)  # a two-word query has bits to narrow with
