"""A layered map is ``{**base, **changes}``: same entries, same order, however it is chained."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from knowspec.impl.okf import layered_map
from knowspec.impl.okf.layered_map import LayeredMap

keys = st.text(alphabet="abcdefgh", min_size=1, max_size=3)
maps = st.dictionaries(keys, st.integers(), max_size=40)


@given(maps, st.lists(maps, min_size=1, max_size=6), st.lists(keys, max_size=10))
def test_chained_layers_read_like_the_chained_dict_merges(base, changes, probes):
    expected: dict = dict(base)
    layered: LayeredMap | dict = base
    for step in changes:
        expected = {**expected, **step}
        layered = LayeredMap(layered, step)
        for key in probes + list(step):  # lookups before any iteration, on the layers
            assert (key in layered) == (key in expected)
            assert layered.get(key, "none") == expected.get(key, "none")
        assert len(layered) == len(expected)
    assert list(layered.items()) == list(expected.items())
    assert list(layered) == list(expected) and layered == expected


def test_lookups_leave_the_layers_unflattened_and_iteration_flattens_once():
    base = {f"k{i}": i for i in range(1000)}
    layered = LayeredMap(LayeredMap(base, {"k1": -1}), {"k2": -2, "new": 7})
    assert (layered["k1"], layered["k2"], layered["k3"], layered["new"]) == (-1, -2, 3, 7)
    assert not layered.flattened and layered.flat() is layered.flat()
    assert layered.flattened
    assert base["k1"] == 1 and "new" not in base  # the base is never written


def test_changes_past_their_share_of_the_base_are_flattened_at_once():
    base = {i: i for i in range(layered_map.CHANGES_SHARE * 100)}
    small = LayeredMap(base, {i: -i for i in range(layered_map.MIN_CHANGES)})
    assert not small.flattened
    assert LayeredMap(base, {i: -i for i in range(101)}).flattened
    assert LayeredMap(small, {i: 0 for i in range(64, 101)}).flattened  # the chain's changes count together


def test_a_missing_key_raises_key_error():
    with pytest.raises(KeyError):
        LayeredMap({"a": 1}, {"b": 2})["c"]
