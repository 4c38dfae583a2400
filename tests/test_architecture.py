"""The dependency rules of ARCHITECTURE.md, checked over every module's imports.

A module reaches another through an ``import``/``from`` statement (relative ones resolved
against its package, ``from pkg import sub`` counted as ``pkg.sub``), through
``importlib.import_module``/``__import__`` called with a literal name, or through a string
literal that names a knowspec module (``"knowspec.impl.x"`` or ``"knowspec.impl.x:func"``): that
is how the subcommand and storage tables import lazily. All of them count. The one declared
string seam is the generated registry's ``impl=`` handler names, checked separately: each must
name a function that exists.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest

REPO = Path(__file__).resolve().parent.parent
FOLDERS = ("impl", "generated", "codegen", "conformance")
BARE = set(FOLDERS)
MODULE_STRING = re.compile(r"^knowspec(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_]\w*)?$")
IMPORT_CALLS = {"import_module", "__import__"}
# Storages hand over data (rows, postings, vectors); one search layer ranks (ARCHITECTURE.md).
RANKING = ("knowspec.impl.rules.bm25", "knowspec.impl.rules.fts5", "knowspec.impl.rules.rrf",
           "knowspec.impl.docpool.fulltext.rank", "knowspec.impl.docpool.fulltext.snippet",
           "knowspec.impl.docpool.fulltext.search", "knowspec.impl.docpool.search",
           "knowspec.impl.docpool.vectors.scoring", "knowspec.impl.docpool.vectors.int8_scan")


# A run against an older contract revision reports its drift with codegen's pure contract diff.
CONTRACT_DIFF = ("knowspec.codegen.contract_view", "knowspec.codegen.spec_diff", "knowspec.codegen.spec_rules")

# `knowspec codegen` mounts itself in the `knowspec` command and checks its folders with the
# same argument validators as every other subcommand (one-line errors, exit 2).
# It also names the tools whose handler is not written yet, by the server's own reading of that.
CODEGEN_CLI_EDGE = frozenset({("knowspec.codegen.cli", "knowspec.impl.cli_args"),
                              ("knowspec.codegen.cli", "knowspec.impl.handler_presence")})


@dataclass(frozen=True)
class Reference:
    source: str   # dotted module that refers
    target: str   # dotted module referred to (bare when written bare)
    where: str    # path:line, for the message


def dotted(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(("knowspec", *parts))


def exists(name: str, root: Path) -> bool:
    """Whether ``knowspec.<folder>...`` is a module or package of the tree at ``root``."""
    parts = name.split(".")
    if parts[0] != "knowspec" or len(parts) < 2:
        return False
    base = root.joinpath(*parts[1:])
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def package_of(path: Path, root: Path) -> list[str]:
    name = dotted(path, root).split(".")
    return name if path.name == "__init__.py" else name[:-1]


def _relative(path: Path, root: Path, level: int, module: str | None) -> str:
    package = package_of(path, root)
    base = package[: len(package) - (level - 1)] if level > 1 else package
    return ".".join(base + ([module] if module else []))


def references(path: Path, root: Path) -> Iterator[Reference]:
    source = dotted(path, root)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    seam_strings = {id(kw.value) for node in ast.walk(tree) if isinstance(node, ast.Call)
                    for kw in node.keywords if kw.arg == "impl"} if source.startswith("knowspec.generated") else set()

    def ref(target: str, node: ast.AST) -> Reference:
        return Reference(source, target, f"{path.relative_to(root).as_posix()}:{node.lineno}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield ref(alias.name, node)
        elif isinstance(node, ast.ImportFrom):
            base = _relative(path, root, node.level, node.module) if node.level else node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield ref(sub if alias.name != "*" and exists(sub, root) else base, node)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in IMPORT_CALLS and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                target = node.args[0].value
                if target.startswith("."):
                    level = len(target) - len(target.lstrip("."))
                    target = _relative(path, root, level, target.lstrip(".") or None)
                yield ref(target, node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in seam_strings \
                and MODULE_STRING.match(node.value):
            target = node.value.partition(":")[0]
            if exists(target, root):
                yield ref(target, node)


def under(name: str, *prefixes: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


@dataclass(frozen=True)
class Rule:
    name: str
    sources: tuple[str, ...]                 # modules the rule is about
    forbidden: tuple[str, ...]               # what they must not reach
    allowed: tuple[str, ...] = ()            # ... except these targets
    exempt_sources: tuple[str, ...] = ()     # modules of `sources` the rule skips
    allowances: frozenset = field(default_factory=frozenset)  # (source, target) pairs let through

    def breaks(self, r: Reference) -> bool:
        return (under(r.source, *self.sources) and not under(r.source, *self.exempt_sources)
                and under(r.target, *self.forbidden) and not under(r.target, *self.allowed))


RULES = (
    Rule("no bare top-level imports", ("knowspec",), tuple(sorted(BARE))),
    Rule("generated imports nothing from impl or conformance", ("knowspec.generated",),
         ("knowspec.impl", "knowspec.conformance")),
    Rule("conformance imports nothing from impl", ("knowspec.conformance",), ("knowspec.impl",)),
    Rule("conformance imports from codegen only the pure contract diff", ("knowspec.conformance",),
         ("knowspec.codegen",), allowed=CONTRACT_DIFF),
    Rule("the contract diff conformance uses imports no impl", CONTRACT_DIFF, ("knowspec.impl",)),
    Rule("codegen imports nothing from impl", ("knowspec.codegen",), ("knowspec.impl",),
         allowances=CODEGEN_CLI_EDGE),
    Rule("impl imports conformance only in impl/cli.py", ("knowspec.impl",), ("knowspec.conformance",),
         exempt_sources=("knowspec.impl.cli",)),
    Rule("impl imports codegen only in impl/cli.py", ("knowspec.impl",), ("knowspec.codegen",),
         exempt_sources=("knowspec.impl.cli",)),
    Rule("okf never imports docpool", ("knowspec.impl.okf",), ("knowspec.impl.docpool",)),
    Rule("docpool never imports okf", ("knowspec.impl.docpool",), ("knowspec.impl.okf",)),
    Rule("rules imports nothing from impl outside rules", ("knowspec.impl.rules",), ("knowspec.impl",),
         allowed=("knowspec.impl.rules",)),
    Rule("storage imports no ranking", ("knowspec.impl.docpool.storage",), RANKING),
)


def modules(root: Path) -> list[Path]:
    return sorted(p for folder in FOLDERS if (root / folder).is_dir()
                  for p in (root / folder).rglob("*.py") if "__pycache__" not in p.parts)


def all_references(root: Path) -> list[Reference]:
    return [r for p in modules(root) for r in references(p, root)]


def violations(rule: Rule, refs: list[Reference]) -> list[str]:
    return sorted({f"{r.where}: {r.target}" for r in refs
                   if rule.breaks(r) and (r.source, r.target) not in rule.allowances})


@pytest.fixture(scope="module")
def repo_references() -> list[Reference]:
    return all_references(REPO)


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.name)
def test_dependency_rule(rule, repo_references):
    assert violations(rule, repo_references) == []


def test_allowances_are_still_needed(repo_references):
    """An allowance nothing uses any more is stale: delete it."""
    used = {(r.source, r.target) for r in repo_references}
    stale = [pair for rule in RULES for pair in rule.allowances if pair not in used]
    assert stale == []


def test_registry_handler_strings_name_existing_functions():
    """The registry's dotted handler names are the declared seam: each must resolve in impl/."""
    from knowspec.generated.registry import TOOLS

    for entry in TOOLS:
        module, _, function = entry.impl.partition(":")
        assert under(module, "knowspec.impl") and exists(module, REPO), entry.impl
        path = REPO.joinpath(*module.split(".")[1:]).with_suffix(".py")
        defined = {n.name for n in ast.parse(path.read_text(encoding="utf-8")).body
                   if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        assert function in defined, entry.impl


def test_every_subpackage_is_installed():
    """setup.py walks the folders; a folder without __init__.py would silently drop out of the wheel."""
    for folder in FOLDERS:
        for directory in (REPO / folder).rglob("*"):
            if directory.is_dir() and "__pycache__" not in directory.parts and any(directory.glob("*.py")):
                assert (directory / "__init__.py").exists(), f"{directory.relative_to(REPO)} lacks __init__.py"


# --- the test of the test: violations the old, statement-only check let through ----------------

CLEAN_TREE = {
    "impl/__init__.py": "",
    "impl/errors.py": "",
    "impl/cli.py": "import importlib\nSUBCOMMANDS = ('knowspec.conformance.cli',)\n",
    "impl/okf/__init__.py": "",
    "impl/okf/model.py": "from . import concepts\nfrom ..rules import text\n",
    "impl/okf/concepts.py": "",
    "impl/docpool/__init__.py": "",
    "impl/docpool/tools.py": "from .storage import sqlite\nfrom knowspec.impl.errors import x\n",
    "impl/docpool/storage/__init__.py": "",
    "impl/docpool/storage/sqlite.py": "from ...rules.fold import fold\n",
    "impl/rules/__init__.py": "",
    "impl/rules/bm25.py": "",
    "impl/rules/fold.py": "",
    "impl/rules/text.py": "from .fold import fold\n",
    "generated/__init__.py": "",
    "generated/registry.py": "TOOLS = [ToolEntry(impl='knowspec.impl.docpool.tools:doc_search')]\n",
    "codegen/__init__.py": "",
    "codegen/render.py": "from knowspec.generated import registry\n",
    "conformance/__init__.py": "",
    "conformance/cli.py": "from .checks import run\n",
    "conformance/checks.py": "from knowspec.generated.registry import TOOLS\n",
}

PLANTED = {
    "a relative import crossing okf -> docpool": (
        "impl/okf/model.py", "from ..docpool import tools\n", "okf never imports docpool"),
    "an importlib string into impl": (
        "conformance/checks.py", "import importlib\nmod = importlib.import_module('knowspec.impl.okf.model')\n",
        "conformance imports nothing from impl"),
    "a codegen -> impl import": (
        "codegen/render.py", "from knowspec.impl.okf import model\n", "codegen imports nothing from impl"),
    "a server module running the generator's code": (
        "impl/docpool/tools.py", "from knowspec.codegen import render\n", "impl imports codegen only in impl/cli.py"),
    "rules reaching outside rules": (
        "impl/rules/text.py", "from .. import errors\n", "rules imports nothing from impl outside rules"),
    "storage importing a ranking rule by a lazy string": (
        "impl/docpool/storage/sqlite.py", "RANKER = 'knowspec.impl.rules.bm25:score'\n", "storage imports no ranking"),
    "a bare import through __import__": (
        "impl/docpool/tools.py", "m = __import__('impl.okf')\n", "no bare top-level imports"),
}


def plant(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text), encoding="utf-8")


def broken_rules(root: Path) -> dict[str, list[str]]:
    refs = all_references(root)
    return {rule.name: v for rule in RULES if (v := violations(rule, refs))}


def test_the_clean_tree_breaks_no_rule(tmp_path):
    plant(tmp_path, CLEAN_TREE)
    assert broken_rules(tmp_path) == {}


@pytest.mark.parametrize("case", PLANTED, ids=list(PLANTED))
def test_a_planted_violation_is_caught(tmp_path, case):
    rel, addition, rule = PLANTED[case]
    plant(tmp_path, {**CLEAN_TREE, rel: CLEAN_TREE[rel] + addition})
    broken = broken_rules(tmp_path)
    assert list(broken) == [rule]
    assert all(v.startswith(rel + ":") for v in broken[rule])


# --- storages run no ranking SQL ---------------------------------------------------------------
# Storages hand over data; the one search layer ranks full text for every backend. Imports are
# checked above; this checks what a storage could still send its engine: every string literal of
# a storage module (f-string parts too, docstrings aside) is searched for the SQL that ranks,
# scores or cuts snippets (FTS5's bm25 / rank / snippet / highlight, PostgreSQL's ts_rank /
# ts_rank_cd / ts_headline).
RANKING_SQL = re.compile(r"\b(?:bm25|ts_rank(?:_cd)?|ts_headline|snippet|highlight)\s*\(|\brank\s+match\b"
                         r"|\border\s+by\s+rank\b", re.IGNORECASE)


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def ranking_sql(path: Path) -> list[str]:
    """``path:line`` of each string literal of ``path`` that holds ranking SQL."""
    tree = ast.parse(path.read_text("utf-8"))
    docs = _docstrings(tree)
    return [f"{path.name}:{node.lineno}: {RANKING_SQL.search(node.value).group(0)}"  # type: ignore[union-attr]
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
            and RANKING_SQL.search(node.value)]


def test_storages_send_no_ranking_sql():
    storage = REPO / "impl" / "docpool" / "storage"
    assert {"firebird.py", "postgres.py", "sqlite.py"} <= {p.name for p in storage.glob("*.py")}
    assert [hit for path in sorted(storage.glob("*.py")) for hit in ranking_sql(path)] == []


@pytest.mark.parametrize("source,caught", [
    ('SQL = "select rank as score from t where t match ? and rank match ?"\n', True),
    ("q = f'select bm25({t}, 10.0) from {t}'\n", True),
    ('q = "select ts_rank_cd(w, fts, q) from doc$chunk"\n', True),
    ("q = ('select ts_headline(cfg, body, '\n     'q) from x')\n", True),
    ('"""Ranked by the layer with FTS5\'s bm25() and snippet() rules."""\nx = "select id from doc$chunk"\n', False),
], ids=["rank-match", "f-string-bm25", "ts_rank_cd", "ts_headline", "docstring-only"])
def test_ranking_sql_check_catches_what_it_names(tmp_path, source, caught):
    path = tmp_path / "storage.py"
    path.write_text(source, encoding="utf-8")
    assert bool(ranking_sql(path)) is caught
