"""JSON text in short slices, so a worker thread encoding a huge answer lets the event loop run.

CPython switches threads only between bytecodes: a single ``json.dumps`` or pydantic dump of a
55 MiB value holds the GIL for its whole length (measured: the loop did not tick for 1.7 s while
a worker thread encoded one answer). Encoding big strings, lists and objects piece by piece keeps
every hold short. The text is the same JSON (compact; non-ASCII kept as is, or escaped with
``ensure_ascii``).
"""

from __future__ import annotations

import gc
import json
from typing import Any, Iterator

PIECE_WEIGHT = 4096  # one piece: about this many values, or 64 times as many characters
STRING_SLICE = 1 << 18  # characters escaped per call for a long string
GROUP = 64  # members weighed together before any is weighed alone

_DUMPS = {ascii_only: json.JSONEncoder(ensure_ascii=ascii_only, separators=(",", ":"), allow_nan=False).encode
          for ascii_only in (False, True)}


def weight(value: Any, limit: int = PIECE_WEIGHT) -> int:
    """Values in ``value`` plus its strings' length / 64, counted level by level until they pass ``limit``.

    A level's members come from one ``gc.get_referents`` call (strings and numbers have none), so
    the walk runs in C but for one pass over each level's strings: a value-by-value walk in
    Python cost two thirds of the encoding it was meant to slice. A value met twice counts
    twice, as the encoder writes it twice; a cycle passes ``limit`` and is left to the encoder.
    """
    level = [value]
    values = characters = 0
    while level:
        values += len(level)
        characters += sum([len(v) for v in level if v.__class__ is str])
        if values + (characters >> 6) > limit:
            break
        level = gc.get_referents(*level)
    return values + (characters >> 6)


def json_pieces(value: Any, ensure_ascii: bool = False) -> Iterator[str]:
    """``value`` as JSON text, in pieces that each took a short time to encode.

    Raises TypeError/ValueError on what JSON cannot carry (non-string keys, NaN, other types).
    """
    _dumps = _DUMPS[ensure_ascii]
    if weight(value, PIECE_WEIGHT) <= PIECE_WEIGHT:
        yield _dumps(value)
    elif isinstance(value, str):
        yield '"'
        for start in range(0, len(value), STRING_SLICE):
            yield _dumps(value[start:start + STRING_SLICE])[1:-1]
        yield '"'
    elif isinstance(value, dict):
        yield "{"
        yield from _members(value.items(), True, ensure_ascii)
        yield "}"
    elif isinstance(value, (list, tuple)):
        yield "["
        yield from _members(value, False, ensure_ascii)
        yield "]"
    else:
        yield _dumps(value)


def _members(members: Any, is_object: bool, ensure_ascii: bool) -> Iterator[str]:
    """Comma-separated members; light ones are encoded together, heavy ones piece by piece."""
    _dumps = _DUMPS[ensure_ascii]
    batch: list[Any] = []
    batch_weight = 0
    started = False

    def flush() -> Iterator[str]:
        nonlocal batch, batch_weight, started
        if batch:
            yield ("," if started else "") + _dumps(dict(batch) if is_object else batch)[1:-1]
            started = True
        batch, batch_weight = [], 0

    def add(light: list[Any], heft: int) -> Iterator[str]:
        """Batch light members; encode the batch once it outweighs a piece."""
        nonlocal batch_weight
        batch.extend(light)
        batch_weight += heft
        if batch_weight > PIECE_WEIGHT:
            yield from flush()

    members = list(members)
    for start in range(0, len(members), GROUP):
        group = members[start:start + GROUP]
        if is_object and not all(isinstance(key, str) for key, _ in group):
            raise TypeError("JSON object keys must be strings")
        # A light group (the usual case: many small records) is weighed in one walk: its members
        # are light too, since each weighs less than all of them.
        heft = weight([value for _, value in group] if is_object else group, PIECE_WEIGHT)
        if heft <= PIECE_WEIGHT:
            yield from add(group, heft)
            continue
        for member in group:
            heft = weight(member[1] if is_object else member, PIECE_WEIGHT)
            if heft <= PIECE_WEIGHT:
                yield from add([member], heft)
                continue
            yield from flush()
            yield ("," if started else "") + (_dumps(member[0]) + ":" if is_object else "")
            started = True
            yield from json_pieces(member[1] if is_object else member, ensure_ascii)
    yield from flush()
