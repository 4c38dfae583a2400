"""Request bodies checked against the advertised JSON Schemas before any handler runs.

The same split as the MCP pipeline: a failing limit keyword (``maximum``, ``maxLength``, ...)
answers ``resource_limit``, any other failure ``schema_validation``. Integral floats such as
``35.0`` are integers in JSON Schema, so they are accepted and handed on as ``int``.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import best_match

from knowspec.impl.errors import ToolError, diagnostic

_LIMIT_KEYWORDS = {
    "maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties", "maxContains",
}
MAX_ERRORS = 50


def is_json_media_type(content_type: str | None) -> bool:
    """``application/json`` or any ``+json`` type; a missing header is taken as JSON."""
    if not content_type:
        return True
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def parse_json_body(raw: bytes, content_type: str | None = None) -> Any:
    """An empty body is ``{}``; anything else must be JSON (415 for another media type, 400
    for malformed JSON)."""
    if not raw.strip():
        return {}
    if not is_json_media_type(content_type):
        raise ToolError(
            "unsupported_media_type", f"request body must be application/json, not {content_type}"
        )
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ToolError("invalid_request", f"request body is not valid JSON: {exc}") from None


@lru_cache(maxsize=64)
def _validator(schema_json: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(schema_json), format_checker=FormatChecker())


def validate_body(schema: dict[str, Any], body: Any) -> None:
    """Raise ``ToolError`` listing every schema failure of ``body``."""
    validator = _validator(json.dumps(schema, sort_keys=True))
    errors = sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path))
    if not errors:
        return
    leaves = [_deepest(e) for e in errors]
    code = "resource_limit" if all(e.validator in _LIMIT_KEYWORDS for e in leaves) else (
        "schema_validation"
    )
    diags = [
        diagnostic(code, e.message, field="/" + "/".join(str(p) for p in e.absolute_path))
        for e in leaves[:MAX_ERRORS]
    ]
    raise ToolError(code, f"request body does not match the schema: {leaves[0].message}",
                    diagnostics=diags)


def _deepest(error):
    """For oneOf/anyOf failures, the most specific sub-error (best match)."""
    if error.context:
        return best_match(error.context)
    return error


def integral_floats_to_int(value: Any) -> Any:
    """``35.0`` → ``35`` recursively (JSON Schema counts it as an integer)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: integral_floats_to_int(v) for k, v in value.items()}
    if isinstance(value, list):
        return [integral_floats_to_int(v) for v in value]
    return value
