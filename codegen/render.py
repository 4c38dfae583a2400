"""Templates and JSON documents from the intermediate model (one jinja2 Environment)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jinja2

from knowspec.codegen.bundle import advertised_output_schema
from knowspec.codegen.constants import input_enums
from knowspec.codegen.model import SpecModel, ToolSpec

TEMPLATES = Path(__file__).parent / "templates"


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["pyrepr"] = repr
    return env


def dump_json(data: Any) -> str:
    """The one JSON style of generated files: stable, readable, newline-terminated."""
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def schema_files(spec: SpecModel) -> dict[str, str]:
    files = {"schemas/error.json": dump_json(spec.error_schema)}
    for tool in spec.tools:
        base = f"schemas/{tool.family}/{tool.name}"
        files[f"{base}.input.json"] = dump_json(tool.input_schema)
        files[f"{base}.success.json"] = dump_json(tool.success_schema)
        files[f"{base}.output.json"] = dump_json(advertised_output_schema(tool.success_schema, spec.error_schema))
    return files


def contract_document(spec: SpecModel, sources: list[tuple[str, str]]) -> dict[str, Any]:
    """Everything the conformance suite needs, normalised: it reads nothing else of ours."""
    return {
        "knowspec_contract": 1,
        "revision": spec.revision,
        "sources": dict(sources),
        "error_codes": spec.error_codes,
        "error_schema": spec.error_schema,
        "tools": [
            {
                "name": t.name,
                "family": t.family,
                "title": t.title,
                "description": t.description,
                "read_only": t.read_only,
                "idempotent": t.idempotent,
                "input_schema": t.input_schema,
                "output_schema": advertised_output_schema(t.success_schema, spec.error_schema),
                "success_schema": t.success_schema,
                "text_fallback": t.text_fallback,
                "text_encoder": t.text_encoder,
                "wrap": t.wrap,
                "errors": list(t.errors),
                "limits": t.limits,
                "ordering": t.ordering,
                "rechecks": list(t.rechecks),
            }
            for t in spec.tools
        ],
    }


def _type_of(prop: dict[str, Any]) -> str:
    if "enum" in prop:
        return " \\| ".join(f"`{json.dumps(v, ensure_ascii=False)}`" for v in prop["enum"])
    kind = prop.get("type", "any")
    if isinstance(kind, list):
        kind = " \\| ".join(kind)
    if kind == "array":
        return f"array of {_type_of(prop.get('items', {}))}"
    if "format" in prop:
        return f"{kind} ({prop['format']})"
    return str(kind)


def argument_rows(tool: ToolSpec) -> list[dict[str, Any]]:
    schema = tool.input_schema
    required = set(schema.get("required", []))
    rows = []
    for name, prop in schema.get("properties", {}).items():
        bounds = ", ".join(
            f"{k} {prop[k]}" for k in ("minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems") if k in prop
        )
        default = f"`{json.dumps(prop['default'], ensure_ascii=False)}`" if "default" in prop else ""
        rows.append({"name": name, "type": _type_of(prop), "required": name in required,
                     "default": default, "bounds": bounds})
    return rows


def result_fields(tool: ToolSpec) -> str:
    props = tool.success_schema.get("properties", {})
    required = set(tool.success_schema.get("required", []))
    return ", ".join(f"`{name}`" + ("" if name in required else "?") for name in props) or "(none)"


def render_templates(spec: SpecModel, models: dict[str, dict[str, str]], sources: list[tuple[str, str]]) -> dict[str, str]:
    env = environment()
    tools = spec.tools
    ctx = {
        "tools": tools,
        "models": models,
        "sources": sources,
        "revision": spec.revision,
        "arguments": {t.name: argument_rows(t) for t in tools},
        "result_fields": {t.name: result_fields(t) for t in tools},
        "enums": input_enums(spec),
    }
    return {
        "registry.py": env.get_template("registry.py.j2").render(ctx),
        "handlers.py": env.get_template("handlers.py.j2").render(ctx),
        "constants.py": env.get_template("constants.py.j2").render(ctx),
        "TOOLS.md": env.get_template("TOOLS.md.j2").render(ctx),
    }
