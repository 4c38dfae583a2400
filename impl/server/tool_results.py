"""Results on the wire: success, and ``ToolError`` → ``isError`` with the error envelope.

This is the only place that decides how a failure looks to a client (spec/okf/contract/read.md §4.1):
``structuredContent`` is ``{code, message, retryable, diagnostics}``; the text content is the
message (or the error's own text, e.g. the OKF parse-error JSON); codes outside ``[a-z0-9_]+``
become ``operation_rejected``; messages are path-redacted and cut to 512 bytes; a result over
64 KiB becomes ``resource_limit``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import mcp.types as types
from pydantic import PrivateAttr

from knowspec.impl.errors import ToolError, diagnostic
from knowspec.impl.kept_answers import KeptAnswer
from knowspec.impl.rules import go_json
from knowspec.impl.rules.redaction import MAX_MESSAGE_BYTES, looks_like_path, redact_message, safe_file

SAFE_CODE = re.compile(r"^[a-z0-9_]+$")
MAX_ERROR_RESULT_BYTES = 64 * 1024
MAX_DIAGNOSTICS = 10_000
LONG_DIAGNOSTIC = "diagnostic message exceeds MCP output limit; inspect the bundle locally"


def compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def fallback_text(value: Any, encoder: str) -> str:
    """A ``json`` text fallback written with the tool's encoder (spec/README.md#text-encoders)."""
    return go_json.dumps(value) if encoder == "go" else compact_json(value)


_STRICT_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


class EncodedToolResult(types.CallToolResult):
    """A success whose structured content is also held as compact JSON text (non-ASCII kept),
    written once when its text fallback was cut from it: parking the answer
    (``parked_answers``) then need not encode it again. On the wire it is a ``CallToolResult``."""

    _structured_json: str | None = PrivateAttr(default=None)
    # A kept answer (``kept_answers``) is carried as its JSON alone, until a reader that needs
    # the values decodes it (:func:`materialized`); parking writes the JSON as it is.
    _kept: KeptAnswer | None = PrivateAttr(default=None)
    _deferred: bool = PrivateAttr(default=False)  # its content and structured content are placeholders

    @property
    def structured_json(self) -> str | None:
        return self._structured_json

    @property
    def kept(self) -> KeptAnswer | None:
        return self._kept

    def forget_json(self) -> None:
        self._structured_json = None
        self._kept = None


def wrapped_json_text(structured: dict[str, Any], wrap: str, encoder: str) -> tuple[str, str] | None:
    """``(structured content as compact JSON, the json text fallback of its ``wrap`` value)`` from
    one encoding, when ``structured`` holds only ``wrap`` and the tool's encoder is the plain one:
    the fallback is then ``compact_json(structured[wrap])``, the same text inside ``{"<wrap>":``
    and ``}``. None otherwise, or when it holds what strict JSON cannot carry (NaN)."""
    if encoder == "go" or not wrap or len(structured) != 1 or wrap not in structured:
        return None
    try:
        whole = _STRICT_COMPACT(structured)
    except (TypeError, ValueError):
        return None
    return whole, whole[len(compact_json(wrap)) + 2:-1]


def success_result(structured: dict[str, Any], text: str, structured_json: str | None = None) -> types.CallToolResult:
    """The success result; ``structured_json``: ``structured`` already encoded (compact, non-ASCII kept)."""
    content: list[types.ContentBlock] = [types.TextContent(type="text", text=text)]
    if structured_json is None:
        return types.CallToolResult(content=content, structured_content=structured, is_error=False)
    encoded = EncodedToolResult(content=content, structured_content=structured, is_error=False)
    encoded._structured_json = structured_json
    return encoded


def kept_result(answer: KeptAnswer, structured: dict[str, Any] | None = None,
                text: str | None = None) -> EncodedToolResult:
    """A kept answer's result, written as kept when parked; without ``structured`` and ``text``
    (an answer given again) its values are left as JSON until :func:`materialized` decodes them."""
    deferred = structured is None or text is None
    result = EncodedToolResult(content=[types.TextContent(type="text", text=text if text is not None else "")],
                               structured_content=structured if not deferred else {}, is_error=False)
    result._kept = answer
    result._deferred = deferred
    return result


def materialized(result: types.CallToolResult) -> types.CallToolResult:
    """``result`` with its values in hand (a kept answer given again: its JSON decoded)."""
    if not isinstance(result, EncodedToolResult) or result._kept is None or not result._deferred:
        return result
    answer = result._kept
    values = result.model_copy(update={"content": [types.TextContent(type="text", text=answer.text)],
                                       "structured_content": answer.structured})
    values._kept = None
    values._deferred = False
    return values


def _redacted_or_empty(text: str) -> str:
    """Short names (a field path, a spec section) pass; anything path-like or long is dropped."""
    return "" if looks_like_path(text) or len(text.encode("utf-8")) > MAX_MESSAGE_BYTES else text


_FIELD_PATH = re.compile(r"^/?[A-Za-z0-9_$-]*(?:[./][A-Za-z0-9_$-]+)*$")


def _field_path(text: str) -> str:
    """An argument path (``limit``, ``kinds.0``, ``/params/database``); anything else is dropped."""
    return text if len(text) <= 256 and _FIELD_PATH.match(text) else ""


def _clean_diagnostic(d: dict[str, Any]) -> dict[str, Any]:
    message = str(d.get("message", ""))
    if len(message.encode("utf-8")) > MAX_MESSAGE_BYTES:
        message = LONG_DIAGNOSTIC
    else:
        message = redact_message(message)
    return diagnostic(
        str(d.get("code") or "operation_rejected"),
        message,
        severity=d.get("severity", "ERROR") if d.get("severity") in ("ERROR", "WARN", "INFO") else "ERROR",
        file=safe_file(str(d.get("file", ""))),
        field=_field_path(str(d.get("field", ""))),
        spec_ref=_redacted_or_empty(str(d.get("spec_ref", ""))),
        policy_failure=bool(d.get("policy_failure", False)),
    )


def envelope_of(err: ToolError) -> dict[str, Any]:
    code = err.code if SAFE_CODE.match(err.code or "") else "operation_rejected"
    message = redact_message(err.message or code)
    return {
        "code": code,
        "message": message,
        "retryable": bool(err.retryable),
        "diagnostics": [_clean_diagnostic(d) for d in err.diagnostics[:MAX_DIAGNOSTICS]],
    }


def error_result(err: ToolError) -> types.CallToolResult:
    envelope = envelope_of(err)
    text = err.text if err.text is not None else envelope["message"]
    if len(compact_json(envelope).encode("utf-8")) + len(text.encode("utf-8")) > MAX_ERROR_RESULT_BYTES:
        envelope = envelope_of(ToolError("resource_limit", "tool error result exceeds MCP output limits"))
        text = envelope["message"]
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=envelope,
        is_error=True,
    )
