"""A mapping that is ``{**base, **changes}`` without copying ``base``.

A one-concept write makes a new snapshot (and its validation findings and revision index) that
differs from the last in a few entries of maps keyed by every file of the bundle. Copying those
maps was most of a preview's cost at 50,000 concepts (server CPU 18.4-18.8 ms, 7.1-7.6 without
the copies; about 1 ms of the 5 at 5,000, ``benchmarks/okf_write.py --sizes 5000,50000``): the
write cost the bundle, not the change. A ``LayeredMap`` keeps the previous map as its base and
the changed entries beside it; looking a key up reads the changes, then the base. The flat dict
is made once, when something iterates (a read tool walking every document pays the copy it paid
before; a write, which only looks keys up, never does).

Chains stay short: a map layered on a layered map that was never flattened shares that one's
base and merges the two change sets; once the changes pass a sixteenth of the base (and a floor
of 64 entries) the new map is flattened at once, so a lookup is never more than two dict probes
and the base holds at most that share of replaced values alive.
"""

from __future__ import annotations

from typing import Any, ItemsView, Iterator, KeysView, Mapping, TypeVar, ValuesView

K = TypeVar("K")
V = TypeVar("V")

MIN_CHANGES = 64  # changes kept beside the base up to this many, whatever the base's size
CHANGES_SHARE = 16  # ... or up to a 1/CHANGES_SHARE of the base's entries


class LayeredMap(Mapping[K, V]):
    """``{**base, **changes}`` in content and order; ``base`` is not copied and never changed."""

    __slots__ = ("_base", "_changes", "_flat", "_size")

    def __init__(self, base: Mapping[K, V], changes: Mapping[K, V]) -> None:
        if isinstance(base, LayeredMap):
            if base._flat is not None:
                base = base._flat
            else:
                changes = {**base._changes, **changes}
                base = base._base
        self._base: Mapping[K, V] = base
        self._changes: dict[K, V] = dict(changes)
        self._size = len(base) + sum(1 for key in self._changes if key not in base)
        self._flat: dict[K, V] | None = None
        if len(self._changes) > max(MIN_CHANGES, len(base) // CHANGES_SHARE):
            self.flat()

    def flat(self) -> dict[K, V]:
        """The merged dict (made once; the map's lookups then read it)."""
        flat = self._flat
        if flat is None:
            flat = self._flat = {**self._base, **self._changes}
            self._base, self._changes = flat, {}  # the replaced values of the base are let go
        return flat

    @property
    def flattened(self) -> bool:
        """Whether the merged dict has been made."""
        return self._flat is not None

    def __getitem__(self, key: K) -> V:
        flat = self._flat
        if flat is not None:
            return flat[key]
        changes = self._changes
        if key in changes:
            return changes[key]
        return self._base[key]

    def get(self, key: K, default: Any = None) -> Any:
        flat = self._flat
        if flat is not None:
            return flat.get(key, default)
        changes = self._changes
        if key in changes:
            return changes[key]
        return self._base.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._changes or key in self._base

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[K]:
        return iter(self.flat())

    def keys(self) -> KeysView[K]:
        return self.flat().keys()

    def values(self) -> ValuesView[V]:
        return self.flat().values()

    def items(self) -> ItemsView[K, V]:
        return self.flat().items()

    def __repr__(self) -> str:
        return f"LayeredMap({self.flat()!r})"


def flat(mapping: Mapping[K, V]) -> dict[K, V] | Mapping[K, V]:
    """``mapping`` as a dict when it is a layered map (C-level lookups for a loop of many), else as it is."""
    return mapping.flat() if isinstance(mapping, LayeredMap) else mapping
