"""How many JSON values a request body holds, counted on its bytes before anything decodes it.

Decoding is where a body's size turns into memory: 66 MiB of empty lists (``[[],[],...]``)
became 22 million Python lists, ~2 GB, and held the GIL (so the event loop) for seconds, only
for the raw-argument walk (``arguments.MAX_VALUES``) to refuse the call afterwards. The count
here is of the structural bytes outside strings: an opening bracket or brace per container and
a comma per further element or member. That is never more than twice the values the body holds
(each container one bracket; each comma a value after it), so a body counted over twice a limit
surely holds more values than the limit, and refusing it early refuses nothing the walk would
let through.
"""

from __future__ import annotations

import re

# A JSON string, escapes included: the unrolled form scans a long string in one run.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def _structural(body: bytes) -> int:
    return body.count(b"[") + body.count(b"{") + body.count(b",")


def structural_count(body: bytes) -> int:
    """Brackets, braces and commas of ``body`` outside its strings (at most twice its values)."""
    return _structural(_STRING.sub(b"", body))


def surely_more_values_than(body: bytes, limit: int) -> bool:
    """Whether ``body`` certainly holds more than ``limit`` JSON values. The strings are cut out
    only when the bytes as they are count past the bound (a few ms a MiB): most bodies, a big
    text argument's included, stop at the plain count."""
    return _structural(body) > 2 * limit and structural_count(body) > 2 * limit
