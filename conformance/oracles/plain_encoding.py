"""The ``plain`` text encoder, restated for the ``text_encoding`` check.

A contract revision whose tools carry no ``text_encoder`` (every revision before contract
revision 1) means ``plain`` (spec/README.md#text-encoders): compact JSON, and inside strings
only what JSON itself requires escaped (``"``, ``\\`` and the control characters U+0000-U+001F,
in any JSON form); every other character, ``<``, ``>``, ``&``, ``/``, U+2028/U+2029 and all
non-ASCII included, is written as itself. Number spelling is not part of it. Restated from
the contract's words, not taken from any server.
"""

from __future__ import annotations

_WHITESPACE = " \t\n\r"


def plain_problem(raw: str) -> str | None:
    """Why ``raw`` (a text already known to be valid JSON) is not plain JSON, or None."""
    i, n = 0, len(raw)
    while i < n:
        ch = raw[i]
        if ch in _WHITESPACE:
            return f"whitespace outside strings at character {i} (plain JSON is compact)"
        if ch != '"':
            i += 1
            continue
        i += 1
        while raw[i] != '"':
            if raw[i] != "\\":
                i += 1
                continue
            problem = _escape_problem(raw, i)
            if problem:
                return problem
            i += 6 if raw[i + 1] == "u" else 2
        i += 1
    return None


def _escape_problem(raw: str, at: int) -> str | None:
    """An escape plain would not write: one for a character that JSON lets stand as itself."""
    if raw[at + 1] == "/":
        return f"'/' written as \\/ at character {at} (plain writes it as itself)"
    if raw[at + 1] != "u":
        return None   # \" \\ \b \f \n \r \t: the characters JSON requires escaped
    code = int(raw[at + 2:at + 6], 16)
    if code < 0x20 or code in (0x22, 0x5C):
        return None
    if 0xD800 <= code <= 0xDBFF and raw[at + 6:at + 8] == "\\u" and 0xDC00 <= int(raw[at + 8:at + 12], 16) <= 0xDFFF:
        char = chr(0x10000 + ((code - 0xD800) << 10) + int(raw[at + 8:at + 12], 16) - 0xDC00)
        return f"{char!r} written as {raw[at:at + 12]} at character {at} (plain writes it as itself)"
    if 0xD800 <= code <= 0xDFFF:
        return None   # a lone surrogate has no UTF-8 form: an escape is the only way to write it
    return f"{chr(code)!r} written as {raw[at:at + 6]} at character {at} (plain writes it as itself)"
