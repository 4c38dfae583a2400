"""Read spec/ into the intermediate model, collecting problems instead of raising."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from knowspec.codegen.bundle import BundleError, bundle_schema
from knowspec.codegen.model import EndpointSpec, FamilySpec, Problem, SpecModel, ToolSpec

TOOL_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
# Handler-level re-checks a tool may apply to schema-valid input (answering schema_validation with
# its own message, spec/okf/contract/read.md §4.2); the conformance suite evaluates them itself.
RECHECK_RULES = {"non_blank", "letter_or_number"}
TEXT_ENCODERS = {"go", "plain"}  # how a json text fallback is written: spec/README.md#text-encoders
IMPL_PATH = re.compile(r"^knowspec\.impl(\.[a-z_][a-z0-9_]*)+:[a-z_][a-z0-9_]*$")
LIMIT_KEYWORDS = {"default", "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems"}
REQUIRED_TOOL_KEYS = ("name", "title", "description", "impl", "read_only", "idempotent", "input", "output")
# Everything else a tool row, the [family] table and a tools.toml may hold: a misspelt key (say
# ``[tool.limit]``) would otherwise drop its content silently, and the checks derived from it.
OPTIONAL_TOOL_KEYS = ("errors", "wrap", "text_fallback", "text_fallback_doc", "text_encoder", "limits", "ordering",
                      "rechecks")
FAMILY_KEYS = ("name", "order", "text_encoder")
TABLE_KEYS = ("family", "tool")


def load_spec(spec_dir: Path) -> SpecModel:
    problems: list[Problem] = []
    revision = _toml(spec_dir / "REVISION.toml", problems, spec_dir)
    _check_revision(revision, problems)
    revision = revision or {}
    errors_table = (_toml(spec_dir / "errors.toml", problems, spec_dir) or {}).get("codes", {})
    error_schema_path = spec_dir / "common" / "error.schema.json"
    error_schema = _schema(error_schema_path, spec_dir, problems) or {}
    model = SpecModel(revision=revision, error_codes=errors_table, error_schema=error_schema, problems=problems)

    seen: set[str] = set()
    files: dict[str, str] = {}
    for table in sorted(spec_dir.glob("*/tools.toml")):
        family = _load_family(table, spec_dir, errors_table, problems)
        if family is None:
            continue
        for tool in family.tools:
            if tool.name in seen:
                problems.append(Problem("ERROR", _rel(table, spec_dir), tool.name, "duplicate tool name"))
            seen.add(tool.name)
            for path in (tool.input_file, tool.output_file):
                if path in files:
                    problems.append(Problem("ERROR", _rel(table, spec_dir), tool.name,
                                            f"{path} is already the root schema of {files[path]}; give each tool its own file"))
                files[path] = tool.name
        model.families.append(family)
    model.families.sort(key=lambda f: (f.order, f.name))
    endpoints = spec_dir / "rest" / "endpoints.toml"
    if endpoints.exists():
        model.api, model.endpoints = _load_endpoints(endpoints, spec_dir, problems)
    return model


def _rel(path: Path, spec_dir: Path) -> str:
    return path.relative_to(spec_dir).as_posix()


def _toml(path: Path, problems: list[Problem], spec_dir: Path) -> dict[str, Any] | None:
    """The file's table, or None (with its problem) when it is missing or not TOML."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        problems.append(Problem("ERROR", _rel(path, spec_dir), "", "file is missing"))
    except tomllib.TOMLDecodeError as exc:
        problems.append(Problem("ERROR", _rel(path, spec_dir), "", f"invalid TOML: {exc}"))
    return None


def _check_revision(revision: dict[str, Any] | None, problems: list[Problem]) -> None:
    """``contract-revision`` numbers the contract: conformance runs compare it as a number (a
    spec without one is unnumbered)."""
    if revision is None or "contract-revision" not in revision:
        return
    number = revision["contract-revision"]
    if type(number) is not int or number < 1:
        problems.append(Problem("ERROR", "REVISION.toml", "contract-revision",
                                f"must be a whole number from 1 up (found {number!r})"))


def _unknown(found: Any, known: tuple[str, ...], rel: str, pointer: str, problems: list[Problem]) -> None:
    unknown = sorted(set(found) - set(known)) if isinstance(found, dict) else []
    if unknown:
        problems.append(Problem("ERROR", rel, pointer, f"unknown key(s) {', '.join(unknown)}; "
                                                       f"known: {', '.join(known)}"))


def _schema(path: Path, spec_dir: Path, problems: list[Problem]) -> dict[str, Any] | None:
    rel = _rel(path, spec_dir) if path.is_relative_to(spec_dir) else path.name
    try:
        schema = bundle_schema(path)
    except FileNotFoundError as exc:
        problems.append(Problem("ERROR", rel, "", f"schema file is missing ({Path(exc.filename or '').name})"))
        return None
    except (json.JSONDecodeError, BundleError, KeyError, IndexError) as exc:
        problems.append(Problem("ERROR", rel, "", f"cannot load schema: {exc}"))
        return None
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        pointer = "/" + "/".join(str(p) for p in exc.path)
        problems.append(Problem("ERROR", rel, pointer, f"not a valid 2020-12 schema: {exc.message}"))
        return None
    return schema


def _load_family(table: Path, spec_dir: Path, codes: dict[str, Any], problems: list[Problem]) -> FamilySpec | None:
    rel = _rel(table, spec_dir)
    data = _toml(table, problems, spec_dir)
    if data is None:
        return None
    _unknown(data, TABLE_KEYS, rel, "", problems)
    fam = data.get("family", {})
    _unknown(fam, FAMILY_KEYS, rel, "family", problems)
    name = fam.get("name")
    if not name:
        problems.append(Problem("ERROR", rel, "family", "[family] name is required"))
        return None
    tools = []
    for index, row in enumerate(data.get("tool", [])):
        tool = _load_tool(row, name, table, spec_dir, codes, problems, f"tool/{index}",
                          fam.get("text_encoder", "plain"))
        if tool is not None:
            tools.append(tool)
    return FamilySpec(name=name, order=int(fam.get("order", 99)), folder=table.parent.name, tools=tuple(tools))


def _load_tool(row, family, table, spec_dir, codes, problems, pointer, family_encoder) -> ToolSpec | None:
    rel = _rel(table, spec_dir)
    missing = [k for k in REQUIRED_TOOL_KEYS if k not in row]
    if missing:
        problems.append(Problem("ERROR", rel, pointer, f"missing keys: {', '.join(missing)}"))
        return None
    name = row["name"]
    pointer = f"{pointer} ({name})"  # a row's index alone sends a reader to count rows
    _unknown(row, REQUIRED_TOOL_KEYS + OPTIONAL_TOOL_KEYS, rel, pointer, problems)
    if not TOOL_NAME.match(name):
        problems.append(Problem("ERROR", rel, pointer, f"tool name {name!r} is not snake_case"))
    if not IMPL_PATH.match(row["impl"]):
        problems.append(Problem("ERROR", rel, pointer, f"impl {row['impl']!r} is not knowspec.impl.<module>:<function>"))
    schemas = table.parent / "schemas"
    input_schema = _schema(schemas / row["input"], spec_dir, problems)
    success = _schema(schemas / row["output"], spec_dir, problems)
    if input_schema is None or success is None:
        return None
    if input_schema.get("type") != "object":
        problems.append(Problem("ERROR", rel, pointer, "input schema must have type: object"))
    if input_schema.get("additionalProperties") is not False:
        problems.append(Problem("ERROR", rel, pointer, "input schema must be closed (additionalProperties: false)"))
    if success.get("type") != "object":
        problems.append(Problem("ERROR", rel, pointer, "output schema must describe an object (MCP structuredContent)"))
    for code in row.get("errors", []):
        if code not in codes:
            problems.append(Problem("ERROR", rel, pointer, f"error code {code!r} is not in spec/errors.toml"))
    wrap = row.get("wrap", "")
    if wrap and wrap not in success.get("properties", {}):
        problems.append(Problem("ERROR", rel, pointer, f"wrap property {wrap!r} is not in the output schema"))
    text_fallback = row.get("text_fallback", "json")
    if text_fallback not in ("json", "custom"):
        problems.append(Problem("ERROR", rel, pointer, "text_fallback must be 'json' or 'custom'"))
    text_encoder = row.get("text_encoder", family_encoder)
    if text_encoder not in TEXT_ENCODERS:
        problems.append(Problem("ERROR", rel, pointer, f"text_encoder must be one of {sorted(TEXT_ENCODERS)}"))
    limits = row.get("limits", {})
    _check_limits(limits, input_schema, rel, pointer, problems)
    rechecks = tuple(row.get("rechecks", []))
    for recheck in rechecks:
        if recheck.get("rule") not in RECHECK_RULES or recheck.get("argument") not in input_schema.get("properties", {}):
            problems.append(Problem("ERROR", rel, f"{pointer}/rechecks",
                                    f"recheck {recheck!r} needs an input argument and a rule in {sorted(RECHECK_RULES)}"))
    return ToolSpec(
        name=name,
        family=family,
        title=row["title"],
        description=row["description"].strip(),
        impl=row["impl"],
        read_only=bool(row["read_only"]),
        idempotent=bool(row["idempotent"]),
        input_file=f"{table.parent.name}/schemas/{row['input']}",
        output_file=f"{table.parent.name}/schemas/{row['output']}",
        input_schema=input_schema,
        success_schema=success,
        text_fallback=text_fallback,
        text_fallback_doc=row.get("text_fallback_doc", "").strip(),
        text_encoder=text_encoder,
        wrap=wrap,
        errors=tuple(row.get("errors", [])),
        limits=limits,
        ordering=dict(row.get("ordering", {})),
        rechecks=rechecks,
    )


def _check_limits(limits, input_schema, rel, pointer, problems) -> None:
    """Each limit in the table must agree with the keyword in the input schema."""
    props = input_schema.get("properties", {})
    for arg, bounds in limits.items():
        prop = _deref(props.get(arg), input_schema)
        if prop is None:
            problems.append(Problem("ERROR", rel, f"{pointer}/limits/{arg}", "limit names an argument the input schema lacks"))
            continue
        for keyword, value in bounds.items():
            if keyword not in LIMIT_KEYWORDS:
                problems.append(Problem("ERROR", rel, f"{pointer}/limits/{arg}", f"unknown limit keyword {keyword!r}"))
            elif prop.get(keyword) != value:
                problems.append(Problem(
                    "ERROR", rel, f"{pointer}/limits/{arg}/{keyword}",
                    f"table says {value!r} but the schema says {prop.get(keyword)!r}",
                ))


def _deref(prop: dict[str, Any] | None, root: dict[str, Any]) -> dict[str, Any] | None:
    """Follow local ``#/$defs/...`` refs (and merge them with sibling keywords) for limit checks."""
    seen = 0
    while prop is not None and isinstance(prop.get("$ref"), str) and prop["$ref"].startswith("#/$defs/") and seen < 16:
        target = root.get("$defs", {}).get(prop["$ref"].split("/")[-1])
        if target is None:
            return prop
        prop = {**target, **{k: v for k, v in prop.items() if k != "$ref"}}
        seen += 1
    return prop


def _load_endpoints(path: Path, spec_dir: Path, problems: list[Problem]) -> tuple[dict[str, Any], list[EndpointSpec]]:
    """spec/rest/endpoints.toml: schema files are named relative to spec/, or written inline."""
    rel = _rel(path, spec_dir)
    data = _toml(path, problems, spec_dir) or {}

    def schema_of(row: dict[str, Any], file_key: str, inline_key: str) -> dict[str, Any] | None:
        if row.get(file_key):
            return _schema(spec_dir / row[file_key], spec_dir, problems)
        if row.get(inline_key):
            schema = dict(row[inline_key])
            try:
                Draft202012Validator.check_schema(schema)
            except SchemaError as exc:
                problems.append(Problem("ERROR", rel, row.get("operation_id", ""), f"{inline_key}: {exc.message}"))
                return None
            return schema
        return None

    out = []
    for index, row in enumerate(data.get("endpoint", [])):
        missing = [k for k in ("method", "path", "operation_id") if k not in row]
        if missing:
            problems.append(Problem("ERROR", rel, f"endpoint/{index}", f"missing keys: {', '.join(missing)}"))
            continue
        request = schema_of(row, "request", "request_schema")
        if request is not None and row.get("omit"):
            request = dict(request)
            request["properties"] = {k: v for k, v in request.get("properties", {}).items() if k not in row["omit"]}
            request["required"] = [k for k in request.get("required", []) if k not in row["omit"]]
            if not request["required"]:
                del request["required"]
        out.append(EndpointSpec(
            method=row["method"].upper(),
            path=row["path"],
            operation_id=row["operation_id"],
            summary=row.get("summary", ""),
            auth=row.get("auth", "session"),
            tag=row.get("tag", ""),
            tool=row.get("tool"),
            request=request,
            response=schema_of(row, "response", "response_schema"),
            accepted=schema_of(row, "accepted", "accepted_schema"),
            errors=tuple(int(s) for s in row.get("errors", [])),
            omit=tuple(row.get("omit", [])),
        ))
    return dict(data.get("api", {})), out
