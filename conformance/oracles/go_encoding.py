"""Go ``encoding/json`` output, restated for the ``text_fallback`` byte comparison.

The contract fixes the encoder of the OKF family's text fallbacks (spec/README.md#text-encoders):
a conforming server's text is exactly ``json.Marshal`` of the JSON it holds. Restated here from
Go's documented behaviour, not taken from any server.
"""

from __future__ import annotations

import json
from typing import Any

_GO_ESCAPED = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def go_marshal(value: Any) -> str:
    """Compact ``json.Marshal`` text of a decoded JSON value (object keys in their given order)."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_number(value)
    if isinstance(value, str):
        return _go_string(value)
    if isinstance(value, list):
        return "[" + ",".join(go_marshal(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(_go_string(k) + ":" + go_marshal(v) for k, v in value.items()) + "}"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def go_text_problem(raw: str, value: Any) -> str | None:
    """Where ``raw`` first differs from Go's ``json.Marshal`` of ``value``, or None when it is that."""
    go = go_marshal(value)
    if raw == go:
        return None
    at = next((i for i, (a, b) in enumerate(zip(raw, go)) if a != b), min(len(raw), len(go)))
    return f"first difference at character {at}: {raw[at:at + 12]!r}, Go writes {go[at:at + 12]!r}"


def _go_string(text: str) -> str:
    quoted = json.dumps(text, ensure_ascii=False)
    return "".join(_GO_ESCAPED.get(ch, ch) for ch in quoted)


def go_number(value: float) -> str:
    """Shortest round-trip digits; exponent form only below 1e-6 or from 1e21 on (e-7, e+21)."""
    shortest = repr(value)
    magnitude = abs(value)
    if magnitude != 0 and not 1e-6 <= magnitude < 1e21:
        mantissa, exponent = shortest.split("e")
        return f"{mantissa}e{exponent[0]}{int(exponent[1:]):02d}" if exponent[0] == "+" else f"{mantissa}e-{int(exponent[1:])}"
    return _positional(shortest)


def _positional(shortest: str) -> str:
    """``1.5e-05`` -> ``0.000015``, ``1e+20`` -> ``100000000000000000000``, ``2.0`` -> ``2``."""
    sign = "-" if shortest.startswith("-") else ""
    mantissa, _, exponent = shortest.lstrip("-").partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits, point = whole + fraction, len(whole) + (int(exponent) if exponent else 0)
    if point <= 0:
        digits, point = "0" * (1 - point) + digits, 1
    digits = digits.ljust(point, "0")
    integer, fraction = digits[:point].lstrip("0") or "0", digits[point:].rstrip("0")
    return sign + integer + ("." + fraction if fraction else "")


def go_marshal_indent(value: Any, level: int = 0) -> str:
    """``json.MarshalIndent(value, "", "  ")`` of a decoded JSON value (keys in their given order):
    one item or member a line, ``": "`` after a key, ``[]`` and ``{}`` when empty."""
    pad, inner = "  " * level, "  " * (level + 1)
    if isinstance(value, list):
        if not value:
            return "[]"
        return "[\n" + ",\n".join(inner + go_marshal_indent(v, level + 1) for v in value) + "\n" + pad + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        return ("{\n" + ",\n".join(inner + _go_string(k) + ": " + go_marshal_indent(v, level + 1)
                                   for k, v in value.items()) + "\n" + pad + "}")
    return go_marshal(value)
