"""The dependency rules of ARCHITECTURE.md, checked over every module's imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FOLDERS = ("impl", "generated", "codegen", "conformance")
BARE = {"impl", "generated", "codegen", "conformance"}


def imports_of(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def modules(folder: str) -> list[Path]:
    return sorted(p for p in (REPO / folder).rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("folder", FOLDERS)
def test_no_bare_top_level_imports(folder):
    offenders = [f"{p.relative_to(REPO)}: {name}" for p in modules(folder) for name in imports_of(p)
                 if name.split(".")[0] in BARE]
    assert not offenders


def test_generated_never_imports_impl_or_conformance():
    offenders = [f"{p.relative_to(REPO)}: {n}" for p in modules("generated") for n in imports_of(p)
                 if n.startswith(("knowspec.impl", "knowspec.conformance"))]
    assert not offenders


def test_conformance_never_imports_impl():
    offenders = [f"{p.relative_to(REPO)}: {n}" for p in modules("conformance") for n in imports_of(p)
                 if n.startswith("knowspec.impl") and "mutants" not in p.parts]
    assert not offenders


CONTRACT_DIFF = {"knowspec.codegen.contract_view", "knowspec.codegen.spec_diff", "knowspec.codegen.spec_rules"}


def test_conformance_imports_from_codegen_only_the_pure_contract_diff():
    offenders = [f"{p.relative_to(REPO)}: {n}" for p in modules("conformance") for n in imports_of(p)
                 if n.startswith("knowspec.codegen") and n not in CONTRACT_DIFF]
    assert not offenders


def test_the_contract_diff_conformance_uses_imports_no_impl():
    files = [REPO / "codegen" / (name.rsplit(".", 1)[1] + ".py") for name in sorted(CONTRACT_DIFF)]
    offenders = [f"{p.relative_to(REPO)}: {n}" for p in files for n in imports_of(p) if n.startswith("knowspec.impl")]
    assert not offenders


def test_impl_imports_conformance_only_from_its_cli():
    offenders = [f"{p.relative_to(REPO)}: {n}" for p in modules("impl") for n in imports_of(p)
                 if n.startswith("knowspec.conformance") and p.relative_to(REPO).as_posix() != "impl/cli.py"]
    assert not offenders


def test_every_subpackage_is_installed():
    """setup.py walks the folders; a folder without __init__.py would silently drop out of the wheel."""
    for folder in FOLDERS:
        for directory in (REPO / folder).rglob("*"):
            if directory.is_dir() and "__pycache__" not in directory.parts and any(directory.glob("*.py")):
                assert (directory / "__init__.py").exists(), f"{directory.relative_to(REPO)} lacks __init__.py"
