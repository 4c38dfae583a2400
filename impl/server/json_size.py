"""How many JSON values a request body holds, counted on its bytes before anything decodes it.

Decoding is where a body's size turns into memory: 66 MiB of empty lists (``[[],[],...]``)
became 22 million Python lists, ~2 GB, and held the GIL (so the event loop) for seconds, only
for the raw-argument walk (``arguments.MAX_VALUES``) to refuse the call afterwards. The count
here is of the structural bytes outside strings: an opening bracket or brace per container and
a comma per further element or member. That is never more than twice the values the body holds
(each container one bracket; each comma a value after it), so a body counted over twice a limit
surely holds more values than the limit. The walk counts a call's arguments, not the message
around them (``ENVELOPE_MARGIN``); a ``_meta`` of that many values, which it does not walk, is
refused here too: no use of it needs them.
"""

from __future__ import annotations

import json
import re

# A JSON string, escapes included: the unrolled form scans a long string in one run. One never
# closed runs to the end of the body (a lone backslash last included), so every attempt
# matches at once: a pattern that had to fail there was retried at each later quote, each
# retry scanning to the end (a 232 KB body held the interpreter for 3.9 s).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
# The JSON-RPC envelope of a tool call (the message, params, name, arguments, id...), which the
# argument walk does not count: a call whose arguments hold exactly the most values is let in.
ENVELOPE_MARGIN = 64


def _structural(body: bytes) -> int:
    return body.count(b"[") + body.count(b"{") + body.count(b",")


def structural_count(body: bytes) -> int:
    """Brackets, braces and commas of ``body`` outside its strings (at most twice its values).
    JSON in UTF-16 or UTF-32 (which ``json.loads`` accepts) is counted in UTF-8: there, bytes of
    ordinary characters may read as brackets."""
    encoding = json.detect_encoding(body)
    if encoding not in ("utf-8", "utf-8-sig"):
        body = body.decode(encoding, errors="replace").encode("utf-8")
    return _structural(_STRING.sub(b"", body))


def surely_more_values_than(body: bytes, limit: int) -> bool:
    """Whether the message ``body`` certainly holds more than ``limit`` JSON values beyond its
    envelope (``ENVELOPE_MARGIN``). The strings are cut out only when the bytes as they are
    count past the bound (milliseconds a MiB): most bodies, a big text argument's included,
    stop at the plain count."""
    bound = 2 * limit + ENVELOPE_MARGIN
    return _structural(body) > bound and structural_count(body) > bound
