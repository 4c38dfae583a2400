"""JSON Schema 2020-12 checks of tool input and output, mapped onto the error contract.

A failing limit keyword (``maximum``, ``maxLength``, ``maxItems``, ``maxProperties``) is
``resource_limit``; any other failure is ``schema_validation``. Input diagnostics are
``invalid_input``: at most 8, sorted by field then keyword, one per field+keyword, with guidance
that never echoes the offending value.
"""

from __future__ import annotations

from functools import cache
from itertools import islice
from typing import TYPE_CHECKING, Any, Iterator

import jsonschema_rs

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

from knowspec.generated.constants import TEMPORAL_PROFILE_DATE, TEMPORAL_PROFILE_INSTANT
from knowspec.impl.errors import ToolError, diagnostic

LIMIT_KEYWORDS = frozenset({"maximum", "maxLength", "maxItems", "maxProperties"})
OUTPUT_LIMIT_MESSAGE = "tool output exceeds the advertised schema limits"
MAX_INPUT_DIAGNOSTICS = 8
# The detail pass only explains a verdict the fast validator already gave: this many errors are
# plenty to pick 8 diagnostics from and to see a limit keyword (limit keywords are checked first
# at every level, see ``_limits_first``), and the cap keeps a huge bad array cheap.
MAX_DETAIL_ERRORS = 1024

FIELD_GUIDANCE = {
    "temporal_profile": f"Use {TEMPORAL_PROFILE_DATE} or {TEMPORAL_PROFILE_INSTANT}; match as_of to that profile.",
    "as_of": (f"Use YYYY-MM-DD with {TEMPORAL_PROFILE_DATE}, or RFC3339 with an explicit UTC offset with "
              f"{TEMPORAL_PROFILE_INSTANT}; do not guess a timezone."),
    "bundle_path": "Use the absolute path of an accessible OKF bundle root.",
}
FORMAT_GUIDANCE = {
    "date": "Use a date in YYYY-MM-DD format, for example 2026-01-02.",
    "date-time": "Use RFC3339 date-time with an explicit UTC offset, for example 2026-01-02T03:04:05Z.",
}
UNKNOWN_PROPERTY = "Remove unsupported fields and use only advertised input properties."
REDUCE = "Reduce this field to the advertised limit; narrow the request before retrying."
FALLBACK = "Check this field against the advertised input schema, then retry with corrected arguments."


def _json_key(value: Any) -> Any:
    """A hashable key equal exactly when two JSON values are equal (1 == 1.0, true != 1)."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, (int, float)):
        return ("n", value)
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, list):
        return ("l", tuple(_json_key(item) for item in value))
    if isinstance(value, dict):
        return ("d", frozenset((key, _json_key(item)) for key, item in value.items()))
    return ("z", None)


def _unique_items(validator: Any, unique: bool, instance: Any, schema: Any) -> Iterator[ValidationError]:
    """``uniqueItems`` in linear time; the library's own check is quadratic on mixed-type arrays."""
    from jsonschema.exceptions import ValidationError

    if unique and validator.is_type(instance, "array"):
        seen: set[Any] = set()
        for item in instance:
            key = _json_key(item)
            if key in seen:
                yield ValidationError("array has non-unique elements")
                return
            seen.add(key)


def _limits_first(schema: Any) -> Any:
    """The same schema with limit keywords first in every subschema, so they fail first."""
    if isinstance(schema, list):
        return [_limits_first(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    ordered = sorted(schema.items(), key=lambda kv: kv[0] not in LIMIT_KEYWORDS)
    return {key: _limits_first(value) for key, value in ordered}


@cache
def detail_validator_class() -> Any:
    """The Python validator that explains a failure. Imported at the first failure, not at start:
    ``jsonschema`` and its dependencies are 3-4 MiB of a server that may never see a bad call."""
    from jsonschema import Draft202012Validator
    from jsonschema.validators import extend

    return extend(Draft202012Validator, {"uniqueItems": _unique_items})


class SchemaCheck:
    """Validators for one schema: a fast Rust check first, Python detail only on failure.

    The detail pass is bounded: linear ``uniqueItems`` and at most ``MAX_DETAIL_ERRORS`` errors.
    """

    def __init__(self, schema: dict[str, Any]):
        self.schema = schema
        self.fast = jsonschema_rs.Draft202012Validator(schema, validate_formats=True)
        self._detail: Any = None  # made at the first failure (``detail``)

    @property
    def detail(self) -> Any:
        """The detail validator (limit keywords first), made at its first use."""
        if self._detail is None:
            from jsonschema import FormatChecker

            self._detail = detail_validator_class()(_limits_first(self.schema), format_checker=FormatChecker())
        return self._detail

    def errors(self, instance: Any) -> list[ValidationError]:
        if self.fast.is_valid(instance):
            return []
        from jsonschema.exceptions import ValidationError

        errors = list(islice(self.detail.iter_errors(instance), MAX_DETAIL_ERRORS))
        if not errors:  # the two engines disagree on a format: trust the stricter verdict
            errors = [ValidationError("does not match the schema", validator="format")]
        return errors


# What an array's schema may say for its items to be checked one by one: with ``minItems``,
# ``contains`` or ``uniqueItems`` the items would have to be seen together.
_ITEMWISE_ARRAY_KEYWORDS = frozenset({"type", "items", "maxItems", "title", "description"})
# What the object's schema may say besides: its ``properties`` alone reach the array (``allOf``,
# ``if``/``then``, ``patternProperties`` and the like could constrain it from elsewhere).
_ITEMWISE_OBJECT_KEYWORDS = frozenset({"$schema", "$id", "$defs", "title", "description", "type", "required",
                                       "properties", "additionalProperties"})


class ItemsCheck:
    """The ``whole`` answer's ``SchemaCheck``, applied a piece at a time, for an answer too big to
    hold as values all at once: each item of its array ``key`` as it is made (:meth:`item`), then
    the rest of the object and the array's length (:meth:`finish`). The same verdict as checking
    the whole, for schemas that reach the array through ``properties`` alone and whose array says
    nothing about its items together (``_ITEMWISE_OBJECT_KEYWORDS``, ``_ITEMWISE_ARRAY_KEYWORDS``);
    refused (``ValueError``) for any other."""

    def __init__(self, whole: SchemaCheck, key: str):
        schema = whole.schema
        array = schema.get("properties", {}).get(key) if schema.get("type") == "object" else None
        if (not isinstance(array, dict) or array.get("type") != "array" or set(array) - _ITEMWISE_ARRAY_KEYWORDS
                or set(schema) - _ITEMWISE_OBJECT_KEYWORDS):
            raise ValueError(f"the items of {key!r} cannot be checked one by one against this schema")
        root: dict[str, Any] = {name: schema[name] for name in ("$schema", "$defs") if name in schema}
        self.key = key
        self._items = SchemaCheck({**root, **array.get("items", {})})
        self._whole = whole
        self._max_items = array.get("maxItems")
        self._errors: list[ValidationError] = []

    def item(self, value: Any) -> None:
        """Check one item; its errors are kept for :meth:`finish` (at most ``MAX_DETAIL_ERRORS``)."""
        if len(self._errors) < MAX_DETAIL_ERRORS:
            self._errors.extend(self._items.errors(value)[:MAX_DETAIL_ERRORS - len(self._errors)])

    def finish(self, rest: dict[str, Any], count: int) -> None:
        """Check the object without its array (``rest``) and the array's length, ``count`` items:
        raise what the whole's check would (``output_error``)."""
        if self._max_items is not None and count > self._max_items:
            raise ToolError("resource_limit", OUTPUT_LIMIT_MESSAGE)
        errors = self._errors + self._whole.errors({**rest, self.key: []})
        if errors:
            raise output_error(errors)


def _leaf_errors(errors: list[ValidationError]) -> list[ValidationError]:
    """Descend into anyOf/oneOf so diagnostics name the real keyword and field."""
    out = []
    for err in errors:
        if err.context and err.validator in ("anyOf", "oneOf", "allOf"):
            out.extend(_leaf_errors(list(err.context)))
        else:
            out.append(err)
    return out


def _field(err: ValidationError) -> str:
    path = [str(p) for p in err.absolute_path]
    if err.validator == "additionalProperties" or err.validator == "unevaluatedProperties":
        return "arguments" if not path else ".".join(path)
    if err.validator == "required" and isinstance(err.validator_value, list):
        missing = [name for name in err.validator_value if isinstance(err.instance, dict) and name not in err.instance]
        if missing:
            path.append(missing[0])
    return ".".join(path) or "arguments"


def _guidance(err: ValidationError, field: str) -> str:
    keyword = err.validator
    if keyword in ("additionalProperties", "unevaluatedProperties"):
        return UNKNOWN_PROPERTY
    if keyword in LIMIT_KEYWORDS:
        return REDUCE
    top = field.split(".")[0]
    schema = err.schema if isinstance(err.schema, dict) else {}
    if keyword == "enum":
        values = ", ".join(str(v) for v in err.validator_value)
        return f"Use one of the advertised values: {values}."
    if keyword == "format" and err.validator_value in FORMAT_GUIDANCE:
        return FORMAT_GUIDANCE[err.validator_value]
    if keyword == "type":
        types = err.validator_value if isinstance(err.validator_value, list) else [err.validator_value]
        return f"Expected JSON {' or '.join(types)}; strings are not coerced to numbers or booleans."
    if keyword in ("minimum", "exclusiveMinimum") and "maximum" in schema:
        example = f", for example {schema['default']}" if "default" in schema else ""
        return f"Use an integer from {schema.get('minimum')} to {schema['maximum']}{example}."
    if top in FIELD_GUIDANCE:
        return FIELD_GUIDANCE[top]
    if keyword in ("minLength", "pattern") and top == "query":
        return "Use nonblank literal search text within the advertised length."
    return FALLBACK


def input_error(errors: list[ValidationError]) -> ToolError:
    leaves = _leaf_errors(errors)
    limit = any(e.validator in LIMIT_KEYWORDS for e in leaves)
    seen: set[tuple[str, str]] = set()
    diags = []
    for err in sorted(leaves, key=lambda e: (_field(e), str(e.validator))):
        field = _field(err)
        key = (field, str(err.validator))
        if key in seen:
            continue
        seen.add(key)
        diags.append(diagnostic("invalid_input", _guidance(err, field), field=field))
    if limit:
        return ToolError("resource_limit", "tool input exceeds the advertised schema limits", diagnostics=diags[:MAX_INPUT_DIAGNOSTICS])
    return ToolError("schema_validation", "tool input does not match the advertised schema", diagnostics=diags[:MAX_INPUT_DIAGNOSTICS])


def output_error(errors: list[ValidationError]) -> ToolError:
    if any(e.validator in LIMIT_KEYWORDS for e in _leaf_errors(errors)):
        return ToolError("resource_limit", OUTPUT_LIMIT_MESSAGE)
    return ToolError("schema_validation", "tool output does not match the advertised schema")
