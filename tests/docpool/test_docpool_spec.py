"""The docpool spec files: table rows, schema rules (closed objects, titles) and seed limits."""

from __future__ import annotations

import json
import tomllib

import pytest

from docpool_sample import REPO, SCHEMAS

TABLE = tomllib.loads((REPO / "spec" / "docpool" / "tools.toml").read_text("utf-8"))
TOOLS = {t["name"]: t for t in TABLE["tool"]}
OPEN_MAPS = {"EntityAttributes", "Form", "FormIslemKodu"}  # the seed's open attribute maps
SEED_TOOLS = ["doc_collections", "doc_search", "doc_get", "doc_entity", "doc_entities", "doc_links",
              "help_search", "help_get_topic", "help_form_info", "help_stats", "doc_stats"]


def _walk(node, path=""):
    if isinstance(node, dict):
        yield path, node
        for k, v in node.items():
            yield from _walk(v, f"{path}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, f"{path}/{i}")


def _schema_files():
    return sorted(SCHEMAS.glob("*.json"))


def test_family_and_the_eleven_tools():
    assert TABLE["family"] == {"name": "docpool", "order": 2, "text_encoder": "plain"}
    assert sorted(TOOLS) == sorted(SEED_TOOLS)
    for name, row in TOOLS.items():
        assert row["impl"] == f"knowspec.impl.docpool.tools:{name}"
        assert row["read_only"] and row["idempotent"]


@pytest.mark.parametrize("path", _schema_files(), ids=lambda p: p.name)
def test_objects_are_closed_and_titled(path):
    schema = json.loads(path.read_text("utf-8"))
    for where, node in _walk(schema):
        if node.get("type") == "object" and "properties" in node:
            assert "title" in node or where == "", f"{path.name}{where} has no title"
            if node.get("title") not in OPEN_MAPS:
                assert node.get("additionalProperties") is False, f"{path.name}{where} is open"
        if "enum" in node:
            assert "title" in node, f"{path.name}{where}: enum without title"


def test_array_results_are_wrapped_in_results():
    for name, row in TOOLS.items():
        out = json.loads((SCHEMAS / row["output"]).read_text("utf-8"))
        if row["wrap"]:
            assert row["wrap"] == "results" and list(out["properties"]) == ["results"]
            assert out["properties"]["results"]["type"] == "array"


@pytest.mark.parametrize("tool, arg, default, maximum", [
    ("doc_search", "limit", 10, 50), ("doc_entities", "limit", 20, 200), ("help_search", "limit", 10, 50),
])
def test_seed_limits(tool, arg, default, maximum):
    prop = json.loads((SCHEMAS / f"{tool}.input.schema.json").read_text("utf-8"))["properties"][arg]
    assert (prop["default"], prop["maximum"]) == (default, maximum)
    assert TOOLS[tool]["limits"][arg] == {"default": default, "minimum": 1, "maximum": maximum}


def test_doc_tools_take_database_and_help_tools_do_not():
    for name in SEED_TOOLS:
        props = json.loads((SCHEMAS / f"{name}.input.schema.json").read_text("utf-8"))["properties"]
        assert ("database" in props) == name.startswith("doc_")


def test_search_mode_enum_and_default():
    prop = json.loads((SCHEMAS / "doc_search.input.schema.json").read_text("utf-8"))["properties"]["mode"]
    assert (prop["enum"], prop["default"]) == (["fts", "vector", "hybrid"], "fts")


def test_spec_loads_without_docpool_problems():
    from knowspec.codegen.load import load_spec
    model = load_spec(REPO / "spec")
    assert not [p for p in model.problems if str(p).split(":", 2)[1].strip().startswith("docpool/")]
    assert [len(f.tools) for f in model.families if f.name == "docpool"] == [11]


@pytest.mark.parametrize("name", ["sqlite_schema.sql", "doc_import.sql"])
def test_the_server_reads_the_spec_pool_sql_through_generated(name):
    from knowspec.impl.docpool.storage import sqlite

    spec = (REPO / "spec" / "docpool" / "sql" / name).read_text("utf-8")
    read = {"sqlite_schema.sql": sqlite.schema_sql, "doc_import.sql": sqlite.import_recipe_sql}[name]()
    assert read == spec == (REPO / "generated" / "docpool" / name).read_text("utf-8")
    assert not (REPO / "spec" / "docpool" / "sql" / name).is_symlink()  # written once, here
    assert not (REPO / "impl" / "docpool" / "sql" / name).exists()      # no hand-kept copy
