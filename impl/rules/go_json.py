"""JSON text as Go's ``encoding/json`` writes it.

okf-mcp's text fallbacks are ``json.Marshal`` output. A client that compares those bytes (or
hashes them, as ``search_sections`` fingerprints do) sees the same text from knowspec only when
the escaping and the number format are Go's: ``<``, ``>``, ``&``, U+2028 and U+2029 escaped as
``\\u003c`` and so on, invalid text replaced by U+FFFD, and floats written without an exponent
between 1e-6 and 1e21 (``1`` rather than ``1.0``, ``0.00001`` rather than ``1e-05``).
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Any

_ESCAPES = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))
_SURROGATE = re.compile("[\ud800-\udfff]")
_FLOAT_MARK = "\x00go-float-{}\x00"
_FLOAT_TOKEN = re.compile(r'"\\u0000go-float-(\d+)\\u0000"')


def go_float(value: float) -> str:
    """Go's ``strconv.AppendFloat(f, fmt, -1, 64)`` as ``encoding/json`` picks ``fmt``."""
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"JSON has no encoding for {value!r}")
    magnitude = abs(value)
    if magnitude != 0 and (magnitude < 1e-6 or magnitude >= 1e21):
        text = repr(value)  # shortest digits, exponent form: Go's 'e' format
        mantissa, _, exponent = text.partition("e")
        if exponent.startswith("-0"):  # Go cleans e-09 up to e-9, and leaves e+21 alone
            exponent = "-" + exponent[2:]
        return f"{mantissa}e{exponent}"
    text = format(Decimal(repr(value)).normalize(), "f")  # shortest digits, no exponent
    return "-0" if text == "0" and math.copysign(1.0, value) < 0 else text


def escape_html(text: str) -> str:
    """Escape what Go escapes inside JSON strings (only ever inside strings, never structure)."""
    for raw, escaped in _ESCAPES:  # str.replace is cheaper than translate when most are absent
        if raw in text:
            text = text.replace(raw, escaped)
    return text


def dumps(value: Any, *, indent: int | None = None) -> str:
    """``json.Marshal`` (or ``json.MarshalIndent(v, "", "  ")`` with ``indent=2``) of ``value``."""
    floats: list[float] = []
    if _has_float(value):
        value = _mark_floats(value, floats)
    separators = (",", ":") if indent is None else (",", ": ")
    text = json.dumps(value, ensure_ascii=False, separators=separators, indent=indent, allow_nan=False)
    if floats:
        text = _FLOAT_TOKEN.sub(lambda m: go_float(floats[int(m.group(1))]), text)
    if _SURROGATE.search(text):
        text = _SURROGATE.sub("\ufffd", text)
    return escape_html(text)


def _has_float(value: Any) -> bool:
    """Whether a float sits anywhere in ``value``; one loop over its members, containers
    stacked, since it runs over every value of a large answer's text."""
    if type(value) is float:
        return True
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            members = item.values()
        elif kind is list or kind is tuple:
            members = item
        else:
            continue
        for member in members:
            kind = type(member)
            if kind is float:
                return True
            if kind is dict or kind is list or kind is tuple:
                stack.append(member)
    return False


def _mark_floats(value: Any, floats: list[float]) -> Any:
    kind = type(value)
    if kind is float:
        floats.append(value)
        return _FLOAT_MARK.format(len(floats) - 1)
    if kind is dict:
        return {k: _mark_floats(v, floats) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [_mark_floats(v, floats) for v in value]
    return value
