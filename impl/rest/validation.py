"""Request bodies checked against the advertised JSON Schemas before any handler runs.

The MCP pipeline's own check (``impl/server/validation.py``): a failing limit keyword answers
``resource_limit``, any other failure ``schema_validation``, with the same diagnostics.
Integral floats such as ``35.0`` are integers in JSON Schema, so they are accepted and handed
on as ``int``.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from knowspec.impl.errors import ToolError
from knowspec.impl.server.arguments import MAX_VALUES, REST_WORDING, walk_arguments
from knowspec.impl.server.json_size import surely_more_values_than
from knowspec.impl.server.validation import SchemaCheck, input_error


def is_json_media_type(content_type: str | None) -> bool:
    """``application/json`` or any ``+json`` type; a missing header is taken as JSON."""
    if not content_type:
        return True
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def parse_json_body(raw: bytes, content_type: str | None = None) -> Any:
    """An empty body is ``{}``; anything else must be JSON (415 for another media type, 400
    for malformed JSON). Decoding holds the GIL: call it off the event loop."""
    if not raw.strip():
        return {}
    if not is_json_media_type(content_type):
        raise ToolError("unsupported_media_type", "request body must be application/json")
    if surely_more_values_than(raw, MAX_VALUES):  # refused before decoding it costs memory and time
        raise ToolError("resource_limit", REST_WORDING.limit)
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ToolError("invalid_request", f"request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise ToolError("resource_limit", "request body is nested too deeply") from None
    walk_arguments(body, wording=REST_WORDING)  # the MCP pipeline's raw-argument rules: UTF-8, depth, size
    return body


@lru_cache(maxsize=64)
def _check(schema_json: str) -> SchemaCheck:
    return SchemaCheck(json.loads(schema_json))


def validate_body(schema: dict[str, Any], body: Any) -> None:
    """Raise the MCP pipeline's input error (same codes and diagnostics) when ``body`` fails."""
    errors = _check(json.dumps(schema, sort_keys=True)).errors(body)
    if errors:
        raise input_error(errors)


def integral_floats_to_int(value: Any) -> Any:
    """``35.0`` → ``35`` recursively (JSON Schema counts it as an integer)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: integral_floats_to_int(v) for k, v in value.items()}
    if isinstance(value, list):
        return [integral_floats_to_int(v) for v in value]
    return value
